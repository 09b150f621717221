// The evaluator's loop on real checkpoint directories, with a clock that
// only moves when the loop sleeps (no test sleeps): the newest checkpoint
// wins, failures are retried and then skipped, the loop ends after the final
// step or on shutdown, and the reports (TensorBoard, JSON lines) read back.
#include "evaluator/evaluation_loop.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/checkpoint/checkpoint_files.h"
#include "common/compute/cpu_backend.h"
#include "common/data/dataset.h"
#include "common/io/faulty_file_system.h"
#include "common/keras/keras_config.h"
#include "common/summary/event_file.h"
#include "evaluator/checkpoint_evaluator.h"
#include "evaluator/test_checkpoints.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace evaluator {
namespace {

namespace fs = std::filesystem;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A clock that only moves when slept on; each SleepFor first runs the test's
// hook with the number of sleeps so far (1, 2, ...), so a test can change
// the directory "while the loop waits". Thread-safe.
class ScriptedClock : public base::Clock {
 public:
  explicit ScriptedClock(std::function<void(int)> on_sleep) : on_sleep_(std::move(on_sleep)) {}
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void SleepFor(absl::Duration d) override {
    int n;
    {
      absl::MutexLock lock(&mu_);
      n = ++sleeps_;
      if (d > absl::ZeroDuration()) now_ += d;
    }
    if (on_sleep_) on_sleep_(n);
  }
  int sleeps() {
    absl::MutexLock lock(&mu_);
    return sleeps_;
  }

 private:
  const std::function<void(int)> on_sleep_;
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch();
  int sleeps_ ABSL_GUARDED_BY(mu_) = 0;
};

// A checkpoint with placeholder bytes: the fake evaluator never parses them.
void WriteDummy(const std::string& root, int64_t step, int num_shards = 1) {
  for (int s = 0; s < num_shards; ++s) {
    ASSERT_TRUE(checkpoint::WriteShardCheckpoint(root, step, s, num_shards, "bytes").ok());
  }
}

job::SplitMetrics MetricsFor(int64_t step) {
  return job::SplitMetrics{1.0 / (step + 1), step / 1000.0, 5000};
}

// Records the checkpoints it is asked to evaluate; fails those in `fail`
// (step -> how many more times).
struct FakeEvaluator {
  std::vector<checkpoint::CompleteCheckpoint> calls;
  std::map<int64_t, int> fail;
  absl::StatusOr<job::SplitMetrics> operator()(const checkpoint::CompleteCheckpoint& c) {
    calls.push_back(c);
    auto it = fail.find(c.step);
    if (it != fail.end() && it->second > 0) {
      --it->second;
      return absl::DataLossError(absl::StrCat("step ", c.step, " is corrupt"));
    }
    return MetricsFor(c.step);
  }
  std::vector<int64_t> steps() const {
    std::vector<int64_t> out;
    for (const auto& c : calls) out.push_back(c.step);
    return out;
  }
};

std::vector<std::string> EventFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().find("tfevents") != std::string::npos) {
      files.push_back(it->path().string());
    }
  }
  return files;
}

class EvaluationLoopTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::TestDir(); }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  EvaluationLoopOptions Options(int64_t final_step, base::Clock* clock) const {
    EvaluationLoopOptions o;
    o.checkpoint_dir = dir_ + "/ckpt";
    o.final_step = final_step;
    o.poll_interval = absl::Seconds(2);
    o.clock = clock;
    return o;
  }

  absl::StatusOr<EvaluationSummary> Run(const EvaluationLoopOptions& o, FakeEvaluator& fake) {
    return RunEvaluationLoop(o,
                             [&fake](const checkpoint::CompleteCheckpoint& c) { return fake(c); });
  }

  std::string dir_;
};

TEST_F(EvaluationLoopTest, EvaluatesTheNewestAndReturnsAfterTheFinalStep) {
  const std::string ckpt = dir_ + "/ckpt";
  WriteDummy(ckpt, 10);
  WriteDummy(ckpt, 20, 2);
  ScriptedClock clock([&](int sleep) {
    if (sleep == 1) {  // while the loop waits after step 20
      WriteDummy(ckpt, 30);
      WriteDummy(ckpt, 40);
    }
  });
  EvaluationLoopOptions o = Options(40, &clock);
  o.logdir = dir_ + "/logs";
  o.eval_out = dir_ + "/eval.jsonl";
  FakeEvaluator fake;
  auto summary = Run(o, fake);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_TRUE(summary->finished);
  EXPECT_THAT(fake.steps(), ElementsAre(20, 40));
  EXPECT_EQ(fake.calls[0].num_shards, 2);
  EXPECT_THAT(summary->skipped, ElementsAre(10, 30));
  EXPECT_THAT(summary->given_up, IsEmpty());
  ASSERT_EQ(summary->evaluations.size(), 2u);
  EXPECT_EQ(summary->evaluations[1].step, 40);
  EXPECT_EQ(summary->evaluations[1].metrics.accuracy, MetricsFor(40).accuracy);
  // 2s at 50 ms per sleep: one poll interval waited, no more.
  EXPECT_EQ(clock.sleeps(), 40);

  // TensorBoard: <logdir>/eval holds both scalars at both steps.
  const std::vector<std::string> files = EventFiles(dir_ + "/logs/eval");
  ASSERT_EQ(files.size(), 1u);
  auto events = summary::ReadEventFile(files[0]);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->file_version, summary::kEventFileVersion);
  std::vector<std::string> got;
  for (const summary::ScalarEvent& e : events->scalars) {
    got.push_back(absl::StrCat(e.tag, "@", e.step, "=", e.value));
  }
  EXPECT_THAT(got, ElementsAre(absl::StrCat("evaluation/loss@20=", static_cast<float>(1.0 / 21)),
                               absl::StrCat("evaluation/accuracy@20=", 0.02f),
                               absl::StrCat("evaluation/loss@40=", static_cast<float>(1.0 / 41)),
                               absl::StrCat("evaluation/accuracy@40=", 0.04f)));

  // One JSON line per evaluation.
  std::ifstream in(o.eval_out);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["step"], 20);
  EXPECT_EQ(lines[1]["step"], 40);
  EXPECT_EQ(lines[1]["loss"].get<double>(), 1.0 / 41);
  EXPECT_EQ(lines[1]["accuracy"].get<double>(), 0.04);
  EXPECT_EQ(lines[1]["examples"], 5000);
  EXPECT_EQ(lines[1].size(), 4u);
}

// Through the file-system seam: a record that cannot be written ends the
// loop with that error, naming the file.
TEST_F(EvaluationLoopTest, AnEvalOutThatCannotBeWrittenIsTheLoopsError) {
  WriteDummy(dir_ + "/ckpt", 10);
  ScriptedClock clock(nullptr);
  io::FaultyFileSystem fs;
  fs.Fail(io::Op::kAppend, "eval.jsonl", absl::InternalError("write eval.jsonl: No space left"));
  EvaluationLoopOptions o = Options(10, &clock);
  o.eval_out = dir_ + "/eval.jsonl";
  o.fs = &fs;
  FakeEvaluator fake;
  auto summary = Run(o, fake);
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(summary.status().message(), HasSubstr("eval.jsonl: No space left"));
  EXPECT_EQ(fs.failures(), 1);
}

TEST_F(EvaluationLoopTest, AFinalCheckpointAlreadyThereEndsAtOnce) {
  WriteDummy(dir_ + "/ckpt", 5);
  WriteDummy(dir_ + "/ckpt", 10);
  ScriptedClock clock(nullptr);
  FakeEvaluator fake;
  auto summary = Run(Options(10, &clock), fake);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_TRUE(summary->finished);
  EXPECT_THAT(fake.steps(), ElementsAre(10));
  EXPECT_EQ(clock.sleeps(), 0);
}

TEST_F(EvaluationLoopTest, WaitsForEveryShardOfAStep) {
  const std::string ckpt = dir_ + "/ckpt";
  ASSERT_TRUE(checkpoint::WriteShardCheckpoint(ckpt, 10, 1, 2, "shard 1 first").ok());
  ScriptedClock clock([&](int sleep) {
    if (sleep == 100) WriteDummy(ckpt, 10, 2);  // shard 0 done after 5 s
  });
  FakeEvaluator fake;
  auto summary = Run(Options(10, &clock), fake);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_THAT(fake.steps(), ElementsAre(10));
  EXPECT_EQ(fake.calls[0].num_shards, 2);
  EXPECT_EQ(clock.sleeps(), 120);  // found at the third poll (6 s)
}

TEST_F(EvaluationLoopTest, AFailureIsRetriedAtTheNextPoll) {
  const std::string ckpt = dir_ + "/ckpt";
  WriteDummy(ckpt, 10);
  ScriptedClock clock(nullptr);
  FakeEvaluator fake;
  fake.fail[10] = 2;
  auto summary = Run(Options(10, &clock), fake);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_THAT(fake.steps(), ElementsAre(10, 10, 10));
  EXPECT_EQ(clock.sleeps(), 80);  // two poll intervals
  EXPECT_THAT(summary->given_up, IsEmpty());
  EXPECT_EQ(summary->evaluations.size(), 1u);
}

TEST_F(EvaluationLoopTest, AStepThatKeepsFailingIsSkippedAfterMaxFailures) {
  const std::string ckpt = dir_ + "/ckpt";
  WriteDummy(ckpt, 10);
  ScriptedClock clock([&](int sleep) {
    if (sleep == 200) WriteDummy(ckpt, 20);
  });
  EvaluationLoopOptions o = Options(20, &clock);
  o.max_failures = 3;
  FakeEvaluator fake;
  fake.fail[10] = 1000;
  auto summary = Run(o, fake);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_THAT(fake.steps(), ElementsAre(10, 10, 10, 20));
  EXPECT_THAT(summary->given_up, ElementsAre(10));
  ASSERT_EQ(summary->evaluations.size(), 1u);
  EXPECT_EQ(summary->evaluations[0].step, 20);
}

TEST_F(EvaluationLoopTest, ANewerCheckpointReplacesAFailingOne) {
  const std::string ckpt = dir_ + "/ckpt";
  WriteDummy(ckpt, 10);
  ScriptedClock clock([&](int sleep) {
    if (sleep == 1) WriteDummy(ckpt, 20);
  });
  FakeEvaluator fake;
  fake.fail[10] = 1000;
  auto summary = Run(Options(20, &clock), fake);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_THAT(fake.steps(), ElementsAre(10, 20));
  EXPECT_THAT(summary->skipped, ElementsAre(10));
  EXPECT_THAT(summary->given_up, IsEmpty());
}

TEST_F(EvaluationLoopTest, AFinalCheckpointThatKeepsFailingIsAnError) {
  WriteDummy(dir_ + "/ckpt", 10);
  ScriptedClock clock(nullptr);
  EvaluationLoopOptions o = Options(10, &clock);
  o.max_failures = 2;
  FakeEvaluator fake;
  fake.fail[10] = 1000;
  auto summary = Run(o, fake);
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kDataLoss) << summary.status();
  EXPECT_THAT(summary.status().message(), HasSubstr("final checkpoint (step 10) after 2 tries"));
  EXPECT_THAT(summary.status().message(), HasSubstr("step 10 is corrupt"));
  EXPECT_THAT(fake.steps(), ElementsAre(10, 10));
}

TEST_F(EvaluationLoopTest, ShutdownStopsTheWait) {
  base::ShutdownSignal shutdown;
  ScriptedClock clock([&](int sleep) {
    if (sleep == 7) shutdown.Request("test over");
  });
  EvaluationLoopOptions o = Options(10, &clock);
  o.shutdown = &shutdown;
  o.logdir = dir_ + "/logs";
  FakeEvaluator fake;
  auto summary = Run(o, fake);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_FALSE(summary->finished);
  EXPECT_EQ(summary->stop_reason, "test over");
  EXPECT_THAT(fake.calls, IsEmpty());
  EXPECT_EQ(clock.sleeps(), 7);  // noticed at the next slice
  // The event file exists (TensorBoard sees the run) and holds no scalar.
  const std::vector<std::string> files = EventFiles(dir_ + "/logs/eval");
  ASSERT_EQ(files.size(), 1u);
  auto events = summary::ReadEventFile(files[0]);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_THAT(events->scalars, IsEmpty());
}

TEST_F(EvaluationLoopTest, AnUnlistableDirectoryIsPolledAgain) {
  const std::string ckpt = dir_ + "/ckpt";
  std::ofstream(ckpt) << "a file where the directory should be";
  ScriptedClock clock([&](int sleep) {
    if (sleep == 40) {
      fs::remove(ckpt);
      WriteDummy(ckpt, 3);
    }
  });
  FakeEvaluator fake;
  auto summary = Run(Options(3, &clock), fake);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_THAT(fake.steps(), ElementsAre(3));
}

TEST_F(EvaluationLoopTest, BadOptionsAreInvalidArgument) {
  ScriptedClock clock(nullptr);
  FakeEvaluator fake;
  EvaluationLoopOptions o = Options(10, &clock);
  o.checkpoint_dir = "";
  EXPECT_EQ(Run(o, fake).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(-1, &clock);
  EXPECT_EQ(Run(o, fake).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(10, &clock);
  o.poll_interval = absl::ZeroDuration();
  EXPECT_EQ(Run(o, fake).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(10, &clock);
  o.max_failures = 0;
  EXPECT_EQ(Run(o, fake).status().code(), absl::StatusCode::kInvalidArgument);
  // A logdir that is a file: EventWriter's INVALID_ARGUMENT, before any poll.
  std::ofstream(dir_ + "/file") << "x";
  o = Options(10, &clock);
  o.logdir = dir_ + "/file";
  EXPECT_EQ(Run(o, fake).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fake.calls, IsEmpty());
  EXPECT_EQ(clock.sleeps(), 0);
}

TEST(FinalStepTest, EpochsTimesStepsPerEpoch) {
  proto::JobSpec job;
  job.set_batch_size(128);
  job.set_epochs(3);
  job.set_steps_per_epoch(7);
  EXPECT_EQ(*FinalStep(job, 6400), 21);
  job.set_steps_per_epoch(0);  // a full pass: 6400 / 128 = 50 steps
  EXPECT_EQ(*FinalStep(job, 6400), 150);
  EXPECT_EQ(*FinalStep(job, 55000), 3 * 429);
  EXPECT_EQ(FinalStep(job, 100).status().code(), absl::StatusCode::kInvalidArgument);
  job.set_epochs(0);
  EXPECT_EQ(FinalStep(job, 6400).status().code(), absl::StatusCode::kInvalidArgument);
}

// The loop with the real evaluator on checkpoints of 1 and 2 shards.
TEST_F(EvaluationLoopTest, EndToEndWithTheCheckpointEvaluator) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  data::DatasetOptions data_options;
  data_options.max_train_examples = 6400;
  auto data = data::LoadFashionMnist(data_options);
  ASSERT_TRUE(data.ok()) << data.status();
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok());
  const std::string ckpt = dir_ + "/ckpt";
  std::vector<std::vector<std::vector<float>>> values;
  for (int shards : {1, 2}) {
    values.push_back(testing::TestValues(model->variables(), shards));
    auto placement = placement::PlaceVariables(model->variables(), {shards, 1024});
    ASSERT_TRUE(placement.ok());
    ASSERT_TRUE(
        testing::WriteCheckpoint(ckpt, 10 * shards, *placement, model->variables(), values.back())
            .ok());
  }
  auto evaluator = CheckpointEvaluator::Create("mlp", &data->validation, 1);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  ScriptedClock clock(nullptr);
  EvaluationLoopOptions o = Options(20, &clock);
  o.logdir = dir_ + "/logs";
  auto summary = RunEvaluationLoop(
      o, [&](const checkpoint::CompleteCheckpoint& c) { return (*evaluator)->Evaluate(ckpt, c); });
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->evaluations.size(), 1u);
  EXPECT_EQ(summary->evaluations[0].step, 20);
  EXPECT_EQ(summary->evaluations[0].num_shards, 2);
  EXPECT_THAT(summary->skipped, ElementsAre(10));

  auto backend = compute::CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto executor = compute::Executor::Create(&*model, backend->get());
  ASSERT_TRUE(executor.ok());
  ASSERT_TRUE((*executor)->SetParameters(values[1]).ok());
  auto want = job::EvaluateSplit(executor->get(), data->validation);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(summary->evaluations[0].metrics.loss, want->loss);
  EXPECT_EQ(summary->evaluations[0].metrics.accuracy, want->accuracy);

  const std::vector<std::string> files = EventFiles(dir_ + "/logs/eval");
  ASSERT_EQ(files.size(), 1u);
  auto events = summary::ReadEventFile(files[0]);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->scalars.size(), 2u);
  EXPECT_EQ(events->scalars[1].tag, "evaluation/accuracy");
  EXPECT_EQ(events->scalars[1].step, 20);
  EXPECT_EQ(events->scalars[1].value, static_cast<float>(want->accuracy));
}

}  // namespace
}  // namespace evaluator
}  // namespace psc
