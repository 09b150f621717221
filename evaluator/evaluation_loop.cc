#include "evaluator/evaluation_loop.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/data/batch_plan.h"
#include "common/summary/event_file.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace evaluator {
namespace {

// The longest the loop sleeps before it looks at the shutdown signal again.
constexpr absl::Duration kWaitSlice = absl::Milliseconds(50);

absl::Status Validate(const EvaluationLoopOptions& o) {
  if (o.checkpoint_dir.empty()) return absl::InvalidArgumentError("no checkpoint directory given");
  if (o.final_step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("final step ", o.final_step, " is negative"));
  }
  if (o.poll_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the poll interval must be > 0, got ", absl::FormatDuration(o.poll_interval)));
  }
  if (o.max_failures < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_failures must be >= 1, got ", o.max_failures));
  }
  return absl::OkStatus();
}

// Appends `line` (with its newline) to `path` in one write, creating the file.
absl::Status AppendLine(io::FileSystem* fs, const std::string& path, const std::string& line) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<io::WritableFile> file,
                       fs->OpenForWrite(path, io::OpenMode::kAppend));
  PSC_RETURN_IF_ERROR(file->Append(line));
  return file->Close();
}

// One running loop. Thread-compatible.
class Loop {
 public:
  Loop(const EvaluationLoopOptions& options, const EvaluateFn& evaluate, base::Clock* clock)
      : o_(options),
        evaluate_(evaluate),
        clock_(clock),
        fs_(options.fs != nullptr ? options.fs : io::LocalFileSystem()) {}

  absl::StatusOr<EvaluationSummary> Run();

 private:
  // Sleeps for the poll interval in slices; false if shutdown was requested.
  bool WaitForNextPoll();
  bool ShutdownRequested() const { return o_.shutdown != nullptr && o_.shutdown->requested(); }
  // The newest complete checkpoint after last_done_, or nullopt. Records
  // and logs the older ones it passes over as skipped.
  std::optional<checkpoint::CompleteCheckpoint> NextCheckpoint();
  absl::Status Report(const checkpoint::CompleteCheckpoint& checkpoint, const job::SplitMetrics& m,
                      absl::Duration took);

  const EvaluationLoopOptions& o_;
  const EvaluateFn& evaluate_;
  base::Clock* const clock_;
  io::FileSystem* const fs_;
  std::unique_ptr<summary::EventWriter> events_;
  EvaluationSummary summary_;
  int64_t last_done_ = -1;  // evaluated or given up; only newer steps count
  int64_t failing_step_ = -1;
  int failures_ = 0;  // in a row, of failing_step_
};

bool Loop::WaitForNextPoll() {
  const absl::Time until = clock_->Now() + o_.poll_interval;
  for (;;) {
    if (ShutdownRequested()) return false;
    const absl::Duration left = until - clock_->Now();
    if (left <= absl::ZeroDuration()) return true;
    clock_->SleepFor(std::min(left, kWaitSlice));
  }
}

std::optional<checkpoint::CompleteCheckpoint> Loop::NextCheckpoint() {
  auto listed = checkpoint::ListCompleteCheckpoints(o_.checkpoint_dir, fs_);
  if (!listed.ok()) {
    base::Logf("evaluator: listing checkpoints: %s; trying again in %s",
               std::string(listed.status().message()), absl::FormatDuration(o_.poll_interval));
    return std::nullopt;
  }
  std::vector<checkpoint::CompleteCheckpoint> newer;
  for (const checkpoint::CompleteCheckpoint& c : *listed) {
    if (c.step > last_done_) newer.push_back(c);
  }
  if (newer.empty()) return std::nullopt;
  const checkpoint::CompleteCheckpoint newest = newer.back();
  std::vector<int64_t> passed;
  for (const checkpoint::CompleteCheckpoint& c : newer) {
    if (c.step == newest.step) continue;
    if (!passed.empty() && passed.back() == c.step) continue;
    if (!summary_.skipped.empty() && summary_.skipped.back() >= c.step) continue;
    passed.push_back(c.step);
  }
  if (!passed.empty()) {
    base::Logf("evaluator: skipping step(s) %s: step %d is newer", absl::StrJoin(passed, ", "),
               newest.step);
    summary_.skipped.insert(summary_.skipped.end(), passed.begin(), passed.end());
  }
  return newest;
}

absl::Status Loop::Report(const checkpoint::CompleteCheckpoint& checkpoint,
                          const job::SplitMetrics& m, absl::Duration took) {
  // A regression has no accuracy (NaN): left out, and null in --eval_out.
  const bool accuracy = !std::isnan(m.accuracy);
  base::Logf("evaluator: step %d (%d shard%s): loss %.4f%s - %d examples - %.2fs", checkpoint.step,
             checkpoint.num_shards, checkpoint.num_shards == 1 ? "" : "s", m.loss,
             accuracy ? absl::StrFormat(" - accuracy %.4f", m.accuracy) : "", m.examples,
             absl::ToDoubleSeconds(took));
  summary_.evaluations.push_back({checkpoint.step, checkpoint.num_shards, m});
  if (events_ != nullptr) {
    PSC_RETURN_IF_ERROR(
        events_->AddScalar("evaluation/loss", checkpoint.step, static_cast<float>(m.loss)));
    if (accuracy) {
      PSC_RETURN_IF_ERROR(events_->AddScalar("evaluation/accuracy", checkpoint.step,
                                             static_cast<float>(m.accuracy)));
    }
    PSC_RETURN_IF_ERROR(events_->Flush());
  }
  if (!o_.eval_out.empty()) {
    nlohmann::ordered_json line;
    line["step"] = checkpoint.step;
    line["loss"] = m.loss;
    line["accuracy"] = m.accuracy;
    line["examples"] = m.examples;
    PSC_RETURN_IF_ERROR(AppendLine(fs_, o_.eval_out, line.dump() + "\n"));
  }
  return absl::OkStatus();
}

absl::StatusOr<EvaluationSummary> Loop::Run() {
  PSC_RETURN_IF_ERROR(Validate(o_));
  if (!o_.logdir.empty()) {
    PSC_ASSIGN_OR_RETURN(events_,
                         summary::EventWriter::Create(io::JoinPath(o_.logdir, "eval"), fs_));
  }
  for (;;) {
    if (ShutdownRequested()) break;
    const std::optional<checkpoint::CompleteCheckpoint> next = NextCheckpoint();
    if (next.has_value()) {
      const absl::Time start = clock_->Now();
      absl::StatusOr<job::SplitMetrics> metrics = evaluate_(*next);
      if (metrics.ok()) {
        failing_step_ = -1;
        failures_ = 0;
        last_done_ = next->step;
        PSC_RETURN_IF_ERROR(Report(*next, *metrics, clock_->Now() - start));
        if (next->step >= o_.final_step) {
          summary_.finished = true;
          break;
        }
        continue;  // a newer checkpoint may have come meanwhile
      }
      if (failing_step_ != next->step) {
        failing_step_ = next->step;
        failures_ = 0;
      }
      ++failures_;
      if (failures_ < o_.max_failures) {
        base::Logf("evaluator: step %d: %s; trying again in %s (%d/%d)", next->step,
                   std::string(metrics.status().message()), absl::FormatDuration(o_.poll_interval),
                   failures_, o_.max_failures);
      } else if (next->step >= o_.final_step) {
        base::Logf("evaluator: step %d (the final step): %s; giving up after %d tries", next->step,
                   std::string(metrics.status().message()), failures_);
        return absl::Status(
            metrics.status().code(),
            absl::StrCat("cannot evaluate the final checkpoint (step ", next->step, ") after ",
                         failures_, " tries: ", metrics.status().message()));
      } else {
        base::Logf("evaluator: step %d: %s; skipping it after %d tries", next->step,
                   std::string(metrics.status().message()), failures_);
        summary_.given_up.push_back(next->step);
        last_done_ = next->step;
        failing_step_ = -1;
        failures_ = 0;
      }
    }
    if (!WaitForNextPoll()) break;
  }
  if (!summary_.finished && o_.shutdown != nullptr) {
    // Requested already, so Wait returns its reason at once.
    summary_.stop_reason = o_.shutdown->Wait();
  }
  if (events_ != nullptr) PSC_RETURN_IF_ERROR(events_->Close());
  return std::move(summary_);
}

}  // namespace

absl::StatusOr<int64_t> FinalStep(const proto::JobSpec& job, int64_t train_examples) {
  if (job.epochs() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("epochs must be >= 1, got ", job.epochs()));
  }
  data::BatchPlanOptions plan;
  plan.num_examples = train_examples;
  plan.batch_size = job.batch_size();
  plan.steps_per_epoch = job.steps_per_epoch();
  PSC_ASSIGN_OR_RETURN(const data::BatchPlan batches, data::BatchPlan::Create(plan));
  return batches.steps_per_epoch() * job.epochs();
}

absl::StatusOr<EvaluationSummary> RunEvaluationLoop(const EvaluationLoopOptions& options,
                                                    const EvaluateFn& evaluate) {
  base::RealClock real_clock;
  Loop loop(options, evaluate, options.clock != nullptr ? options.clock : &real_clock);
  return loop.Run();
}

}  // namespace evaluator
}  // namespace psc
