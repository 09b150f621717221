// The step exchanges driven by ReplicaTrainer's loop against recording fake
// servers: what each sends per step, how the loop follows the servers'
// answers (backups, dropped steps), and what a failed unit leaves.
#include "worker/step_exchange.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/base/status_macros.h"
#include "common/keras/keras_config.h"
#include "common/optimizer/optimizer.h"
#include "common/placement/placement.h"
#include "common/ps_client/sharded_parameters.h"
#include "common/ps_client/testing/fake_parameter_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/replica_trainer.h"

namespace psc {
namespace worker {
namespace exchange_test {  // a unity build shares the test files' namespace
namespace {

using ::testing::HasSubstr;

constexpr int kShards = 2;

// Two shards that record every call and answer with the model's initial
// values. A push of step s makes the shard's version `s + 1 + ahead`
// (ahead > 0: the step completed without this worker, as a backup's) with
// outcome `outcome`; a push of step `fail_step` fails with UNAVAILABLE.
class Recorder : public ps_client::testing::FakeParameterClient {
 public:
  explicit Recorder(const proto::JobSpec& job) : FakeParameterClient(kShards) {
    auto model = keras::BuiltinModel(job.model());
    auto sharded = ps_client::ShardedParameters::Create(job.placement(), model->variables());
    std::vector<std::vector<proto::NamedTensor>> split;
    sharded->Split(model->Initialize(1), &split);
    values_.resize(kShards);
    for (int s = 0; s < kShards; ++s) {
      values_[s] = split[s];
    }
  }

  absl::Status PushAll(const std::vector<proto::PushRequest>& requests,
                       std::vector<proto::PushResponse>* responses, absl::Duration) override {
    responses->resize(requests.size());
    for (int s = 0; s < kShards; ++s) {
      PSC_RETURN_IF_ERROR(Push(s, requests[s], &(*responses)[s], absl::Seconds(1)));
    }
    return absl::OkStatus();
  }
  absl::Status Push(int shard, const proto::PushRequest& request, proto::PushResponse* response,
                    absl::Duration) override {
    absl::MutexLock lock(&mu_);
    if (request.id().step() == fail_step) return absl::UnavailableError("shard lost");
    pushes[shard].push_back(request);
    response->Clear();
    const bool last =
        request.id().num_parts() == 0 || request.id().part() + 1 == request.id().num_parts();
    response->set_outcome(!last ? proto::PushResponse::PART_RECEIVED : outcome);
    response->set_version(request.id().step() + 1 + ahead);
    if (request.pull_after()) Answer(shard, {}, response->mutable_variables());
    return absl::OkStatus();
  }
  absl::Status PullAll(const std::vector<proto::PullRequest>& requests,
                       std::vector<proto::PullResponse>* responses, absl::Duration) override {
    responses->resize(requests.size());
    for (int s = 0; s < kShards; ++s) {
      PSC_RETURN_IF_ERROR(Pull(s, requests[s], &(*responses)[s], absl::Seconds(1)));
    }
    return absl::OkStatus();
  }
  absl::Status Pull(int shard, const proto::PullRequest& request, proto::PullResponse* response,
                    absl::Duration) override {
    absl::MutexLock lock(&mu_);
    pulls[shard].push_back(request);
    response->Clear();
    response->set_version(std::max<int64_t>(request.min_version(), 0));
    Answer(shard, {request.names().begin(), request.names().end()}, response->mutable_variables());
    return absl::OkStatus();
  }

  std::vector<proto::PushRequest> pushes[kShards];
  std::vector<proto::PullRequest> pulls[kShards];
  int64_t ahead = 0;
  int64_t fail_step = -1;
  proto::PushResponse::Outcome outcome = proto::PushResponse::APPLIED;

 private:
  void Answer(int shard, const std::vector<std::string>& names,
              google::protobuf::RepeatedPtrField<proto::NamedTensor>* out) {
    for (const proto::NamedTensor& t : values_[shard]) {
      if (names.empty() || std::find(names.begin(), names.end(), t.name()) != names.end()) {
        *out->Add() = t;
      }
    }
  }

  absl::Mutex mu_;
  std::vector<std::vector<proto::NamedTensor>> values_;  // per shard, in placement order
};

proto::JobSpec Job(proto::TrainingMode mode) {
  proto::JobSpec job;
  job.set_job_id("exchange");
  job.mutable_policy()->set_mode(mode);
  job.set_model("mlp");
  proto::OptimizerConfig sgd;
  sgd.set_kind(proto::OptimizerConfig::SGD);
  *job.mutable_optimizer() = *optimizer::CompleteOptimizerConfig(sgd);
  job.set_batch_size(16);
  job.set_epochs(1);
  job.set_steps_per_epoch(8);
  job.set_max_train_examples(256);
  job.set_data_dir("/usr/share/datasets/fashion-mnist");
  job.set_intra_op_threads(1);
  job.set_num_replicas(1);
  auto model = keras::BuiltinModel("mlp");
  placement::PlacementOptions options;
  options.num_shards = kShards;
  options.min_shard_bytes = 64 << 10;  // the first kernel is split over both shards
  *job.mutable_placement() = *placement::PlaceVariables(model->variables(), options);
  return job;
}

proto::RunUnitRequest Unit(int64_t first, int64_t steps, int slots = 1) {
  proto::RunUnitRequest u;
  u.set_job_id("exchange");
  u.set_unit(first);
  u.set_first_step(first);
  u.set_num_steps(steps);
  u.set_num_slots(slots);
  return u;
}

// The names of a shard's variables in the job's placement.
std::vector<std::string> ShardNames(const proto::JobSpec& job, int shard) {
  std::vector<std::string> names;
  for (const auto& v : job.placement().variables()) {
    for (const auto& part : v.parts()) {
      if (part.shard() == shard) names.push_back(part.shard_variable());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> GradientNames(const proto::PushRequest& p) {
  std::vector<std::string> names;
  for (const auto& g : p.gradients()) names.push_back(g.name());
  std::sort(names.begin(), names.end());
  return names;
}

class StepExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    }
  }
};

TEST(NextStepTest, GoesOnAtTheServersStepOnlyWithBackups) {
  EXPECT_EQ(NextStep(3, 9, 10, false), 4);
  EXPECT_EQ(NextStep(3, 9, 10, true), 9);
  EXPECT_EQ(NextStep(3, 2, 10, true), 4);    // the servers behind: the next step
  EXPECT_EQ(NextStep(3, 20, 10, true), 10);  // no further than the unit's end
}

TEST_F(StepExchangeTest, AWholePushIsOnePerShardWithItsVariablesAndTheNextPullInIt) {
  const proto::JobSpec job = Job(proto::MODE_SYNC);
  Recorder servers(job);
  auto trainer = ReplicaTrainer::Create(job, 0, &servers);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto m = (*trainer)->RunUnit(Unit(0, 3), nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->steps(), 3);
  EXPECT_EQ(m->examples(), 48);
  for (int s = 0; s < kShards; ++s) {
    SCOPED_TRACE(s);
    ASSERT_EQ(servers.pulls[s].size(), 1u);  // the unit's first step only
    EXPECT_EQ(servers.pulls[s][0].min_version(), 0);
    ASSERT_EQ(servers.pushes[s].size(), 3u);
    for (int step = 0; step < 3; ++step) {
      const proto::PushRequest& p = servers.pushes[s][step];
      EXPECT_EQ(p.id().step(), step);
      EXPECT_EQ(p.id().num_parts(), 0);
      EXPECT_EQ(p.computed_on_version(), step);  // the last reply's version
      EXPECT_EQ(p.worker_clock(), step + 1);
      EXPECT_TRUE(p.pull_after());
      EXPECT_EQ(p.pull_min_version(), step + 1);
      EXPECT_EQ(GradientNames(p), ShardNames(job, s));
      for (const auto& g : p.gradients()) EXPECT_TRUE(g.tensor().indices().empty()) << g.name();
    }
  }
  // The next unit in sync starts from the parameters the last one ended with.
  ASSERT_TRUE((*trainer)->RunUnit(Unit(3, 1), nullptr).ok());
  EXPECT_EQ(servers.pulls[0].size(), 1u);
  // A unit elsewhere pulls.
  ASSERT_TRUE((*trainer)->RunUnit(Unit(6, 1), nullptr).ok());
  ASSERT_EQ(servers.pulls[0].size(), 2u);
  EXPECT_EQ(servers.pulls[0][1].min_version(), 6);
}

TEST_F(StepExchangeTest, AsyncPullsWhateverIsNewest) {
  const proto::JobSpec job = Job(proto::MODE_ASYNC);
  Recorder servers(job);
  auto trainer = ReplicaTrainer::Create(job, 0, &servers);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->RunUnit(Unit(0, 2), nullptr).ok());
  ASSERT_TRUE((*trainer)->RunUnit(Unit(2, 1), nullptr).ok());
  ASSERT_EQ(servers.pulls[0].size(), 2u);  // async never reuses
  EXPECT_EQ(servers.pulls[0][0].min_version(), 0);
  EXPECT_EQ(servers.pulls[0][1].min_version(), 0);
  for (const auto& p : servers.pushes[0]) EXPECT_EQ(p.pull_min_version(), 0);
}

TEST_F(StepExchangeTest, TopKGradientsTravelSparseAndTheUnitEndsWithItsResiduals) {
  proto::JobSpec job = Job(proto::MODE_ASYNC);
  job.mutable_policy()->set_topk_ratio(0.05);
  ASSERT_TRUE(placement::DeclareGradients(0.05, keras::BuiltinModel("mlp")->moving_averages(),
                                          job.mutable_placement())
                  .ok());
  Recorder servers(job);
  auto trainer = ReplicaTrainer::Create(job, 0, &servers);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  proto::RunUnitRequest first = Unit(0, 2);
  first.mutable_error_feedback()->set_worker(0);  // none yet, from the chief
  auto m = (*trainer)->RunUnit(first, nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  for (int s = 0; s < kShards; ++s) {
    for (const auto& p : servers.pushes[s]) {
      for (const auto& g : p.gradients()) EXPECT_FALSE(g.tensor().indices().empty()) << g.name();
    }
  }
  EXPECT_EQ(m->error_feedback().worker(), 0);
  EXPECT_EQ(m->error_feedback().step(), 2);
  EXPECT_GT(m->error_feedback().residuals_size(), 0);
}

TEST_F(StepExchangeTest, ABackupLateForAStepGoesOnAtTheServersStep) {
  proto::JobSpec job = Job(proto::MODE_SYNC);
  job.set_num_replicas(2);
  job.mutable_policy()->set_replicas_to_aggregate(1);  // one backup
  Recorder servers(job);
  servers.ahead = 2;  // each step completed two steps further without it
  servers.outcome = proto::PushResponse::DROPPED_STALE;
  auto trainer = ReplicaTrainer::Create(job, 1, &servers);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  proto::RunUnitRequest unit = Unit(0, 7, 2);
  unit.set_replica_slot(1);
  auto m = (*trainer)->RunUnit(unit, nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  // Steps 0, 3 and 6 (each reply says 2 more completed); each slot reads 16.
  ASSERT_EQ(servers.pushes[0].size(), 3u);
  EXPECT_EQ(servers.pushes[0][1].id().step(), 3);
  EXPECT_EQ(servers.pushes[0][2].id().step(), 6);
  EXPECT_EQ(m->steps(), 3);
  EXPECT_EQ(m->examples_dropped(), 48);
  EXPECT_EQ(m->examples_skipped(), 4 * 16);
}

TEST_F(StepExchangeTest, AFailedUnitLeavesNothingToReuse) {
  const proto::JobSpec job = Job(proto::MODE_SYNC);
  Recorder servers(job);
  auto trainer = ReplicaTrainer::Create(job, 0, &servers);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->RunUnit(Unit(0, 2), nullptr).ok());
  EXPECT_TRUE(servers.pushes[0].back().pull_skip_frozen());  // the frozen ones are held
  servers.fail_step = 3;
  auto failed = (*trainer)->RunUnit(Unit(2, 2), nullptr);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  servers.fail_step = -1;
  // Step 4 is where the failed unit would have ended: pulled again, whole.
  ASSERT_TRUE((*trainer)->RunUnit(Unit(4, 1), nullptr).ok());
  ASSERT_EQ(servers.pulls[0].size(), 2u);
  EXPECT_EQ(servers.pulls[0][1].min_version(), 4);
  EXPECT_FALSE(servers.pulls[0][1].skip_frozen());
}

TEST_F(StepExchangeTest, OverlapPushesInPartsAndPullsInParts) {
  proto::JobSpec job = Job(proto::MODE_SYNC);
  job.mutable_push()->set_overlap(true);
  job.mutable_push()->set_bucket_bytes(4096);  // a bucket per layer or so
  Recorder servers(job);
  auto trainer = ReplicaTrainer::Create(job, 0, &servers);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto m = (*trainer)->RunUnit(Unit(0, 3), nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->steps(), 3);
  for (int s = 0; s < kShards; ++s) {
    SCOPED_TRACE(s);
    ASSERT_FALSE(servers.pushes[s].empty());
    const int parts = servers.pushes[s][0].id().num_parts();
    EXPECT_GT(parts, 1);
    ASSERT_EQ(servers.pushes[s].size(), 3u * parts);
    // Every step's parts carry the shard's variables once between them.
    for (int step = 0; step < 3; ++step) {
      std::vector<std::string> names;
      for (int k = 0; k < parts; ++k) {
        const proto::PushRequest& p = servers.pushes[s][step * parts + k];
        EXPECT_EQ(p.id().step(), step);
        EXPECT_FALSE(p.pull_after());  // the pull goes in parts after the last
        for (const auto& g : p.gradients()) names.push_back(g.name());
      }
      std::sort(names.begin(), names.end());
      EXPECT_EQ(names, ShardNames(job, s));
    }
    // The unit's first pull whole, then each step's in parts.
    EXPECT_EQ(servers.pulls[s].size(), 1u + 3u * parts);
  }
}

}  // namespace
}  // namespace exchange_test
}  // namespace worker
}  // namespace psc
