#include "worker/worker_core.h"

#include <atomic>
#include <filesystem>
#include <map>

#include "absl/synchronization/notification.h"
#include "common/compute/model.h"
#include "common/keras/keras_config.h"
#include "common/optimizer/optimizer.h"
#include "common/placement/placement.h"
#include "common/ps_client/sharded_parameters.h"
#include "common/ps_client/testing/fake_parameter_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/worker_metrics.h"

namespace psc {
namespace worker {
namespace {

using ::testing::HasSubstr;

// One shard that answers every pull and push with the model's initial
// values, and whose pushes can be held until CancelAll.
class FakeServers : public ps_client::testing::FakeParameterClient {
 public:
  explicit FakeServers(const proto::JobSpec& job) {
    auto model = keras::BuiltinModel(job.model());
    auto sharded = ps_client::ShardedParameters::Create(job.placement(), model->variables());
    std::vector<std::vector<proto::NamedTensor>> split;
    sharded->Split(model->Initialize(1), &split);
    for (auto& t : split[0]) *values_.Add() = std::move(t);
  }
  void HoldPushes() { hold_ = true; }
  int pushes() const { return pushes_.load(); }

  absl::Status PushAll(const std::vector<proto::PushRequest>&,
                       std::vector<proto::PushResponse>* responses, absl::Duration) override {
    ++pushes_;
    if (hold_ && !cancelled_.WaitForNotificationWithTimeout(absl::Seconds(30))) {
      return absl::DeadlineExceededError("never cancelled");
    }
    if (interrupted_.exchange(false)) return absl::CancelledError("interrupted");
    if (all_cancelled_) return absl::CancelledError("cancelled");
    responses->resize(1);
    *(*responses)[0].mutable_variables() = values_;
    return absl::OkStatus();
  }
  absl::Status PullAll(const std::vector<proto::PullRequest>&,
                       std::vector<proto::PullResponse>* responses, absl::Duration) override {
    responses->resize(1);
    *(*responses)[0].mutable_variables() = values_;
    return absl::OkStatus();
  }
  void CancelAll() override {
    all_cancelled_ = true;
    if (!cancelled_.HasBeenNotified()) cancelled_.Notify();
  }
  // Ends a held push (CANCELLED); later pushes are not held.
  void CancelInFlight() override {
    if (hold_.exchange(false)) {
      interrupted_ = true;
      if (!cancelled_.HasBeenNotified()) cancelled_.Notify();
    }
  }

 private:
  google::protobuf::RepeatedPtrField<proto::NamedTensor> values_;
  std::atomic<bool> hold_{false};
  std::atomic<bool> interrupted_{false};
  std::atomic<bool> all_cancelled_{false};
  std::atomic<int> pushes_{0};
  absl::Notification cancelled_;
};

proto::JobSpec Job() {
  proto::JobSpec job;
  job.set_job_id("mlp-async");
  job.mutable_policy()->set_mode(proto::MODE_ASYNC);
  job.set_model("mlp");
  proto::OptimizerConfig sgd;
  sgd.set_kind(proto::OptimizerConfig::SGD);
  *job.mutable_optimizer() = *optimizer::CompleteOptimizerConfig(sgd);
  job.set_batch_size(32);
  job.set_epochs(1);
  job.set_steps_per_epoch(10);
  job.set_max_train_examples(640);
  job.set_data_dir("/usr/share/datasets/fashion-mnist");
  job.set_intra_op_threads(1);
  job.set_num_replicas(1);
  auto model = keras::BuiltinModel("mlp");
  *job.mutable_placement() = *placement::PlaceVariables(model->variables(), {1});
  return job;
}

proto::RunUnitRequest Unit(int64_t first, int64_t steps) {
  proto::RunUnitRequest u;
  u.set_job_id("mlp-async");
  u.set_unit(first);
  u.set_first_step(first);
  u.set_num_steps(steps);
  u.set_num_slots(1);
  return u;
}

// Runs `unit` and waits for it.
absl::StatusOr<proto::UnitMetrics> RunAndWait(WorkerCore* core, const proto::RunUnitRequest& unit) {
  absl::Notification done;
  absl::StatusOr<proto::UnitMetrics> result = absl::UnknownError("not run");
  core->RunUnit(unit, [&](absl::StatusOr<proto::UnitMetrics> m) {
    result = std::move(m);
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  return result;
}

class WorkerCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    }
  }
  proto::JobSpec job_ = Job();
  FakeServers servers_{job_};
};

TEST_F(WorkerCoreTest, ALifecycleFromIdleToReadyAndBack) {
  WorkerCore core(3, {}, &servers_);
  EXPECT_EQ(core.Status(false).state(), proto::WorkerStatus::IDLE);
  EXPECT_THAT(RunAndWait(&core, Unit(0, 2)).status().message(), HasSubstr("call StartJob first"));
  ASSERT_TRUE(core.StartJob(job_).ok());
  ASSERT_TRUE(core.StartJob(job_).ok()) << "the same job again is a no-op";
  EXPECT_EQ(core.Status(false).state(), proto::WorkerStatus::READY);
  auto metrics = RunAndWait(&core, Unit(0, 3));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->examples(), 3 * 32);
  EXPECT_EQ(servers_.pushes(), 3);
  const proto::WorkerStatus status = core.Status(false);
  EXPECT_EQ(status.task_index(), 3);
  EXPECT_EQ(status.steps_done(), 3);
  EXPECT_EQ(status.current_unit(), 0);
  const WorkerCore::Progress p = core.CurrentProgress();
  EXPECT_FALSE(p.running);
  EXPECT_EQ(p.steps_done, 3);
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(core.Status(true).state(), proto::WorkerStatus::STOPPING);
  // What the worker's metrics read: the unit's steps, examples and times.
  const WorkerCore::Counters c = core.counters();
  EXPECT_EQ(c.steps, 3);
  EXPECT_EQ(c.examples, 3 * 32);
  EXPECT_EQ(c.units_done, 1);
  EXPECT_EQ(c.units_failed, 0) << "a unit refused at once never ran";
  // The steps' samples add up to the unit's metrics, its first pull included.
  EXPECT_NEAR(c.compute_seconds, metrics->compute_seconds(), 1e-9);
  EXPECT_NEAR(c.comm_seconds, metrics->comm_seconds(), 1e-9);
  EXPECT_EQ(c.last_step.step, 2);
  EXPECT_EQ(c.last_step.examples, 32);
  EXPECT_GT(c.last_step.seconds, 0);
  EXPECT_FALSE(c.running);
  const auto families = WorkerMetricFamilies(3, c, {5, 1, 2});
  std::map<std::string, double> values;
  for (const auto& f : families) {
    for (const auto& m : f.metric) {
      ASSERT_FALSE(m.label.empty());
      EXPECT_EQ(m.label[0].value, "worker:3") << f.name;
      values[f.name] += f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  EXPECT_EQ(values["pscluster_worker_steps_total"], 3);
  EXPECT_EQ(values["pscluster_worker_pushes_total"], 5);
  EXPECT_EQ(values["pscluster_worker_retries_total"], 2);
  EXPECT_EQ(values["pscluster_worker_units_total"], 1);
  EXPECT_GT(values["pscluster_worker_examples_per_second"], 0);
}

TEST_F(WorkerCoreTest, RefusesWhatDoesNotFit) {
  WorkerCore core(0, {}, &servers_);
  proto::JobSpec two_shards = job_;
  two_shards.mutable_placement()->set_num_shards(2);
  EXPECT_THAT(core.StartJob(two_shards).message(), HasSubstr("places variables on 2 shards"));
  ASSERT_TRUE(core.StartJob(job_).ok());
  proto::RunUnitRequest other = Unit(0, 1);
  other.set_job_id("another");
  EXPECT_EQ(RunAndWait(&core, other).status().code(), absl::StatusCode::kFailedPrecondition);
  proto::RunUnitRequest bad = Unit(0, 1);
  bad.set_num_slots(0);
  auto r = RunAndWait(&core, bad);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(core.CurrentProgress().error, HasSubstr("bad unit")) << "a failed unit is reported";
}

// --topk_ratio: a unit starts from the residuals it brings, or from the
// worker's own when they are the right ones; it returns them at its end.
TEST_F(WorkerCoreTest, AUnitGoesOnOnlyFromTheRightErrorFeedback) {
  proto::JobSpec topk = job_;
  topk.mutable_policy()->set_topk_ratio(0.1);
  ASSERT_TRUE(placement::DeclareGradients(0.1, keras::BuiltinModel("mlp")->moving_averages(),
                                          topk.mutable_placement())
                  .ok());
  WorkerCore core(2, {}, &servers_);
  ASSERT_TRUE(core.StartJob(topk).ok());
  auto none = RunAndWait(&core, Unit(0, 3));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(),
              HasSubstr("brings no error feedback; this worker holds none"));
  proto::RunUnitRequest first = Unit(0, 3);
  first.mutable_error_feedback()->set_worker(2);
  auto m = RunAndWait(&core, first);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->error_feedback().worker(), 2);
  EXPECT_EQ(m->error_feedback().step(), 3);
  EXPECT_GT(m->error_feedback().residuals_size(), 0) << "nine tenths of each gradient stayed";
  auto next = RunAndWait(&core, Unit(3, 2));  // its own, at step 3
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(RunAndWait(&core, Unit(7, 1)).status().code(), absl::StatusCode::kFailedPrecondition)
      << "it holds step 5's";
  proto::RunUnitRequest other = Unit(5, 1);
  other.mutable_error_feedback()->set_worker(1);  // not whom it pushes as
  other.mutable_error_feedback()->set_step(5);
  EXPECT_EQ(RunAndWait(&core, other).status().code(), absl::StatusCode::kInvalidArgument);

  WorkerCore dense(0, {}, &servers_);
  ASSERT_TRUE(dense.StartJob(job_).ok());
  EXPECT_EQ(RunAndWait(&dense, first).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(WorkerCoreTest, OneUnitAtATimeAndStopCancelsTheRunningOne) {
  WorkerCore core(0, {}, &servers_);
  ASSERT_TRUE(core.StartJob(job_).ok());
  servers_.HoldPushes();
  absl::Notification first_done;
  absl::Status first;
  core.RunUnit(Unit(0, 5), [&](absl::StatusOr<proto::UnitMetrics> m) {
    first = m.status();
    first_done.Notify();
  });
  // Poll (bounded) until the unit waits in its first push.
  for (int i = 0; i < 6000 && servers_.pushes() == 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(servers_.pushes(), 1);
  EXPECT_TRUE(core.CurrentProgress().running);
  EXPECT_EQ(core.Status(false).state(), proto::WorkerStatus::RUNNING);
  EXPECT_THAT(RunAndWait(&core, Unit(5, 1)).status().message(), HasSubstr("already running"));
  core.Stop();
  ASSERT_TRUE(first_done.HasBeenNotified());
  EXPECT_EQ(first.code(), absl::StatusCode::kCancelled) << first;
  EXPECT_THAT(RunAndWait(&core, Unit(5, 1)).status().message(), HasSubstr("stopping"));
}

// A chief killed while a unit runs and restarted at once calls StartJob
// with the unit still running: the orphaned unit is cancelled and waited
// for, and the worker takes the new chief's units.
TEST_F(WorkerCoreTest, StartJobEndsAUnitThatAPreviousChiefLeftRunning) {
  WorkerCore core(0, {}, &servers_);
  ASSERT_TRUE(core.StartJob(job_).ok());
  servers_.HoldPushes();
  absl::Notification orphan_done;
  absl::Status orphan;
  core.RunUnit(Unit(0, 5), [&](absl::StatusOr<proto::UnitMetrics> m) {
    orphan = m.status();
    orphan_done.Notify();
  });
  for (int i = 0; i < 6000 && servers_.pushes() == 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(servers_.pushes(), 1);
  ASSERT_TRUE(core.CurrentProgress().running);
  absl::Status started = core.StartJob(job_);
  EXPECT_TRUE(started.ok()) << started;
  ASSERT_TRUE(orphan_done.HasBeenNotified());
  EXPECT_EQ(orphan.code(), absl::StatusCode::kCancelled) << orphan;
  EXPECT_FALSE(core.CurrentProgress().running);
  auto next = RunAndWait(&core, Unit(0, 2));
  EXPECT_TRUE(next.ok()) << next.status();
}

}  // namespace
}  // namespace worker
}  // namespace psc
