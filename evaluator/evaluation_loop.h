// The evaluator's loop, as TensorFlow's evaluator runs it: poll the
// checkpoint directory, evaluate the newest complete checkpoint not
// evaluated yet (older ones that were never evaluated are skipped), report
// it, and stop after the checkpoint of the job's final step.
//
//   WAITING --(a newer complete checkpoint)--> EVALUATING
//   EVALUATING --ok--> report; its step >= final_step ? DONE : poll again at once
//   EVALUATING --error--> log; retry at the next poll (a shard may still be
//                         writing, or an older checkpoint was pruned meanwhile);
//                         after max_failures in a row for that step, skip it
//                         (the final step cannot be skipped: Run fails)
//   any state --shutdown requested--> STOPPED (returns at the next check)
//
// Reports of one evaluation: one log line (common/base/logging.h), the
// TensorBoard scalars "evaluation/loss" and "evaluation/accuracy" at its
// step in <logdir>/eval (flushed at once), and one JSON line
// {"step":..,"loss":..,"accuracy":..,"examples":..} appended to eval_out.
#ifndef PSC_EVALUATOR_EVALUATION_LOOP_H_
#define PSC_EVALUATOR_EVALUATION_LOOP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/base/shutdown.h"
#include "common/checkpoint/checkpoint_files.h"
#include "common/io/file_system.h"
#include "common/job/evaluation.h"
#include "proto/job.pb.h"

namespace psc {
namespace evaluator {

// The job's last global step, where the chief writes its final checkpoint:
// epochs x steps per epoch, where steps per epoch is job.steps_per_epoch()
// or, when that is 0, a full pass over `train_examples` in batches of
// job.batch_size() (data::BatchPlan's rule, which the chief uses).
// INVALID_ARGUMENT for values BatchPlan refuses or epochs < 1.
absl::StatusOr<int64_t> FinalStep(const proto::JobSpec& job, int64_t train_examples);

struct EvaluationLoopOptions {
  std::string checkpoint_dir;  // required
  int64_t final_step = 0;      // return after evaluating a checkpoint at this step or later
  absl::Duration poll_interval = absl::Seconds(2);  // > 0
  int max_failures = 3;                             // per step, in a row; >= 1
  std::string logdir;            // TensorBoard events go to <logdir>/eval; "" = none
  std::string eval_out;          // JSON lines appended here; "" = none
  base::Clock* clock = nullptr;  // not owned; null = the real clock
  io::FileSystem* fs = nullptr;  // not owned; null = the local file system
  base::ShutdownSignal* shutdown =
      nullptr;  // not owned; may be null. Checked at least every 50 ms
                // of clock time while waiting, and between evaluations.
};

// Evaluates one checkpoint (e.g. CheckpointEvaluator::Evaluate bound to the
// checkpoint directory). Called from the thread that runs the loop.
using EvaluateFn =
    std::function<absl::StatusOr<job::SplitMetrics>(const checkpoint::CompleteCheckpoint&)>;

struct Evaluation {
  int64_t step = 0;
  int num_shards = 0;
  job::SplitMetrics metrics;
};

struct EvaluationSummary {
  std::vector<Evaluation> evaluations;  // in order
  std::vector<int64_t> skipped;         // never evaluated: a newer one was there first
  std::vector<int64_t> given_up;        // failed max_failures times in a row
  bool finished = false;                // evaluated the final step (else: shutdown)
  std::string stop_reason;              // the shutdown's reason when !finished
};

// Runs the loop above until the final step was evaluated or `shutdown` is
// requested. Blocks; thread-compatible (one loop per options).
//
// Errors: INVALID_ARGUMENT for an empty checkpoint_dir, final_step < 0,
// poll_interval <= 0 or max_failures < 1; EventWriter::Create's errors for
// <logdir>/eval (before any polling); INTERNAL naming the file when writing a
// report fails; and, when the checkpoint at the final step failed
// max_failures times in a row, its last error. A checkpoint directory that
// cannot be listed is logged and polled again, never an error.
absl::StatusOr<EvaluationSummary> RunEvaluationLoop(const EvaluationLoopOptions& options,
                                                    const EvaluateFn& evaluate);

}  // namespace evaluator
}  // namespace psc

#endif  // PSC_EVALUATOR_EVALUATION_LOOP_H_
