// multi_worker_mirrored in one process (real Gloo over 127.0.0.1): the
// replicas stay bit-identical, a run repeats bit for bit, one step matches
// the ps strategy's sync step, an epoch reaches its accuracy, and a lost
// worker is survived without a restore and can join again.
#include <cmath>
#include <cstring>
#include <filesystem>

#include "absl/synchronization/notification.h"
#include "chief/job_runner.h"
#include "common/base/shutdown.h"
#include "common/collective/memory_store.h"
#include "common/job/job_model.h"
#include "common/keras/keras_config.h"
#include "common/optimizer/optimizer.h"
#include "common/placement/placement.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/collective_cluster.h"
#include "tests/testing/in_process_cluster.h"

namespace psc {
namespace testing {
namespace {

proto::JobSpec Job(const std::string& model, int64_t steps_per_epoch, int64_t epochs,
                   int64_t batch = 96) {
  proto::JobSpec job;
  job.mutable_policy()->set_mode(proto::MODE_SYNC);
  job.set_strategy(proto::MULTI_WORKER_MIRRORED);
  job.mutable_collective()->set_overlap(true);
  job.mutable_collective()->set_timeout_seconds(60);
  job.mutable_collective()->set_bucket_bytes(64 << 10);  // several buckets
  job.set_model(model);
  proto::OptimizerConfig opt;
  opt.set_kind(proto::OptimizerConfig::MOMENTUM);
  opt.set_learning_rate(0.01);
  *job.mutable_optimizer() = *optimizer::CompleteOptimizerConfig(opt);
  job.set_batch_size(batch);
  job.set_epochs(epochs);
  job.set_steps_per_epoch(steps_per_epoch);
  job.set_max_train_examples(6400);
  job.set_data_dir("/usr/share/datasets/fashion-mnist");
  job.set_seed(5);
  job.set_intra_op_threads(1);
  return job;
}

chief::JobRunnerOptions Options(const proto::JobSpec& job, CollectiveCluster* cluster) {
  chief::JobRunnerOptions options;
  options.job = job;
  options.unit_steps = 1;
  options.eval_threads = 1;
  options.replica_group = cluster->replicas();
  options.group_store = cluster->store();
  return options;
}

bool SameBits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t v = 0; v < a.size(); ++v) {
    if (a[v].size() != b[v].size() ||
        std::memcmp(a[v].data(), b[v].data(), a[v].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

// `job` under the parameter_server strategy: 1 ps, 2 sync workers, on
// `servers` (one shard).
absl::StatusOr<job::JobResult> RunPsSync(const proto::JobSpec& job, int64_t unit_steps,
                                         InProcessParameterClient* servers) {
  proto::JobSpec ps_job = job;
  ps_job.set_strategy(proto::PARAMETER_SERVER);
  ps_job.clear_collective();
  InProcessWorkerClient workers(2, servers);
  chief::JobRunnerOptions options;
  options.job = ps_job;
  options.unit_steps = unit_steps;
  options.eval_threads = 1;
  return chief::RunJob(options, servers, &workers);
}

// The worst relative difference (each element's, over max(|a|, |b|, 1e-3))
// of `ours` (model order) from the variables of `servers`' one shard, and
// how many elements differ at all.
double WorstRelativeDifference(const std::vector<std::vector<float>>& ours,
                               InProcessParameterClient& servers, const compute::Model& model,
                               int64_t* differing) {
  std::vector<proto::PullResponse> pulled;
  EXPECT_TRUE(servers.PullAll({proto::PullRequest()}, &pulled, absl::Seconds(10)).ok());
  std::map<std::string, std::vector<float>> theirs;
  for (const auto& v : pulled[0].variables()) theirs[v.name()] = tensor::FloatValues(v.tensor());
  double worst = 0;
  *differing = 0;
  for (size_t v = 0; v < model.variables().size(); ++v) {
    const std::vector<float>& a = ours[v];
    const std::vector<float>& b = theirs.at(model.variables()[v].name);
    EXPECT_EQ(a.size(), b.size()) << model.variables()[v].name;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      const double scale = std::max({std::abs(double{a[i]}), std::abs(double{b[i]}), 1e-3});
      worst = std::max(worst, std::abs(double{a[i]} - double{b[i]}) / scale);
      *differing += a[i] != b[i] ? 1 : 0;
    }
  }
  return worst;
}

class CollectiveSemanticsTest : public ::testing::Test {
 protected:
  // As the worker daemon does: a Gloo write to a member that is gone (the
  // restart tests) is EPIPE, not a SIGPIPE that ends the test binary.
  static void SetUpTestSuite() { base::IgnoreBrokenPipes(); }
  void SetUp() override {
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    }
  }
};

TEST_F(CollectiveSemanticsTest, ReplicasAreBitIdenticalAfterEveryStepAndRunToRun) {
  const proto::JobSpec job = Job("mlp", 6, 1);
  std::string sha[2];
  for (int run = 0; run < 2; ++run) {
    CollectiveCluster cluster(3);
    chief::JobRunnerOptions options = Options(job, &cluster);
    int checked = 0;
    options.stop_after_unit = [&](int64_t step) {
      auto first = cluster.Variables(0, job);
      EXPECT_TRUE(first.ok()) << first.status();
      for (int w = 1; w < 3 && first.ok(); ++w) {
        auto other = cluster.Variables(w, job);
        EXPECT_TRUE(other.ok()) << other.status();
        EXPECT_TRUE(other.ok() && SameBits(*first, *other))
            << "worker " << w << "'s replica differs from worker 0's after step " << step;
      }
      ++checked;
      return false;
    };
    auto result = chief::RunJob(options, cluster.replicas(), &cluster);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(checked, 6);
    EXPECT_EQ(result->strategy, "multi_worker_mirrored");
    EXPECT_EQ(result->steps, 6);
    EXPECT_GT(result->comm_s, 0);
    EXPECT_GE(result->comm_hidden_fraction, 0);
    EXPECT_LE(result->comm_hidden_fraction, 1);
    EXPECT_EQ(result->workers_lost, 0);
    sha[run] = result->final_variables_sha256;
  }
  EXPECT_EQ(sha[0], sha[1]) << "two runs of one seed differ";
}

// One step of the seed CNN from the same start: the group's all-reduced
// sum against the ps's mean of the two slots (another order of the same
// float sums).
TEST_F(CollectiveSemanticsTest, OneStepMatchesTheParameterServerSyncStep) {
  proto::JobSpec job = Job("seed_cnn", 1, 1, 64);
  job.set_max_train_examples(640);
  CollectiveCluster cluster(2);
  chief::JobRunnerOptions options = Options(job, &cluster);
  auto mirrored = chief::RunJob(options, cluster.replicas(), &cluster);
  ASSERT_TRUE(mirrored.ok()) << mirrored.status();
  auto ours = cluster.Variables(0, job);
  ASSERT_TRUE(ours.ok()) << ours.status();

  InProcessParameterClient servers(1);
  auto ps_result = RunPsSync(job, 1, &servers);
  ASSERT_TRUE(ps_result.ok()) << ps_result.status();
  auto model = keras::BuiltinModel("seed_cnn");
  ASSERT_TRUE(model.ok());
  int64_t differing = 0;
  const double worst = WorstRelativeDifference(*ours, servers, *model, &differing);
  EXPECT_LE(worst, 1e-5);
  std::printf(
      "one step, all-reduce vs ps sync: worst relative difference %.3g, %lld elements differ\n",
      worst, static_cast<long long>(differing));
}

// Fine-tuning: a Conv2D base with trainable=False under a trainable head.
// Its gradients are neither computed nor all-reduced; the replicas stay
// bit-identical, the base where it started, and the steps those of the ps
// strategy's sync steps.
TEST_F(CollectiveSemanticsTest, AFrozenBaseIsNotReducedAndTrainsAsThePsStrategy) {
  proto::JobSpec job = Job("fine_tune", 3, 1, 64);
  job.set_model_config(R"({"class_name": "Sequential", "config": {"name": "fine_tune", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [null, 28, 28, 1], "name": "in"}},
    {"class_name": "Conv2D", "config": {"name": "base", "trainable": false, "filters": 8,
      "kernel_size": [3, 3], "padding": "same", "activation": "relu"}},
    {"class_name": "MaxPooling2D", "config": {"name": "pool", "pool_size": [4, 4]}},
    {"class_name": "Flatten", "config": {"name": "flatten"}},
    {"class_name": "Dense", "config": {"name": "head", "units": 10, "activation": "softmax"}}
  ]}})");
  job.set_max_train_examples(640);
  CollectiveCluster cluster(2);
  auto mirrored = chief::RunJob(Options(job, &cluster), cluster.replicas(), &cluster);
  ASSERT_TRUE(mirrored.ok()) << mirrored.status();
  auto first = cluster.Variables(0, job);
  auto second = cluster.Variables(1, job);
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  EXPECT_TRUE(SameBits(*first, *second));
  auto model = job::ModelForJob(job);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<std::vector<float>> initial = model->Initialize(job.seed());
  EXPECT_EQ((*first)[0], initial[0]) << "the frozen kernel";
  EXPECT_EQ((*first)[1], initial[1]) << "the frozen bias";
  EXPECT_NE((*first)[2], initial[2]) << "the head trains";

  InProcessParameterClient servers(1);
  auto ps_result = RunPsSync(job, 3, &servers);
  ASSERT_TRUE(ps_result.ok()) << ps_result.status();
  int64_t differing = 0;
  EXPECT_LE(WorstRelativeDifference(*first, servers, *model, &differing), 1e-5);
}

TEST_F(CollectiveSemanticsTest, OneEpochReachesThePsSyncAccuracy) {
  proto::JobSpec job = Job("mlp", 50, 1, 128);
  CollectiveCluster cluster(2);
  chief::JobRunnerOptions options = Options(job, &cluster);
  options.unit_steps = 10;
  auto mirrored = chief::RunJob(options, cluster.replicas(), &cluster);
  ASSERT_TRUE(mirrored.ok()) << mirrored.status();

  InProcessParameterClient servers(1);
  auto ps_result = RunPsSync(job, 10, &servers);
  ASSERT_TRUE(ps_result.ok()) << ps_result.status();
  std::printf("one epoch: test accuracy %.4f (all-reduce) vs %.4f (ps sync)\n",
              mirrored->test_accuracy, ps_result->test_accuracy);
  EXPECT_NEAR(mirrored->test_accuracy, ps_result->test_accuracy, 0.003);
  EXPECT_GT(mirrored->test_accuracy, 0.6);
}

TEST_F(CollectiveSemanticsTest, ALostWorkerIsSurvivedWithoutARestoreAndJoinsAgain) {
  const proto::JobSpec job = Job("mlp", 12, 1);
  CollectiveCluster cluster(3);
  cluster.KillAtStep(2, 4);
  chief::JobRunnerOptions options = Options(job, &cluster);
  options.unit_steps = 2;
  options.join_poll = absl::ZeroDuration();
  // Back (empty, as a restarted process) once the survivors went on.
  options.stop_after_unit = [&](int64_t step) {
    if (step == 8) cluster.Restart(2);
    if (step >= 10) {
      for (int w = 1; w < 3; ++w) {
        auto a = cluster.Variables(0, job);
        auto b = cluster.Variables(w, job);
        EXPECT_TRUE(a.ok() && b.ok() && SameBits(*a, *b)) << "worker " << w << " after " << step;
      }
    }
    return false;
  };
  auto result = chief::RunJob(options, cluster.replicas(), &cluster);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->workers_lost, 1);
  EXPECT_EQ(result->workers_joined, 1);
  EXPECT_GE(result->regroups, 1);
  EXPECT_EQ(result->recoveries, 0);  // no checkpoint restore
  EXPECT_EQ(result->steps, 12);
  EXPECT_EQ(result->steps_redone, 0);
}

// A worker killed and restarted (empty) before the chief notices: it is
// not lost (it answers), so the chief gives its fresh process the job and a
// peer's replica while it forms the group again.
TEST_F(CollectiveSemanticsTest, AWorkerRestartedBeforeItsLossIsNoticedGetsAPeersReplica) {
  const proto::JobSpec job = Job("mlp", 8, 1);
  CollectiveCluster cluster(3);
  cluster.KillAtStep(1, 3, /*restart=*/true);
  chief::JobRunnerOptions options = Options(job, &cluster);
  options.unit_steps = 2;
  auto result = chief::RunJob(options, cluster.replicas(), &cluster);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->workers_lost, 0);
  EXPECT_GE(result->regroups, 1);
  EXPECT_EQ(result->steps, 8);
  for (int w = 1; w < 3; ++w) {
    auto a = cluster.Variables(0, job);
    auto b = cluster.Variables(w, job);
    EXPECT_TRUE(a.ok() && b.ok() && SameBits(*a, *b)) << "worker " << w;
  }
}

// Two workers told to form one group while they run different jobs, or
// while one believes the group has another size: each is refused with a
// message naming the other's rank, within the collective timeout, before
// any connection is made.
TEST_F(CollectiveSemanticsTest, MembersOfAnotherJobOrGroupSizeAreRefusedWithoutAHang) {
  collective::MemoryStore store;
  worker::CollectiveSetup setup;
  setup.store = &store;
  base::RealClock clock;
  proto::JobSpec job = Job("mlp", 4, 1);
  job.mutable_collective()->set_timeout_seconds(2);
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok());
  auto placement = placement::PlaceVariables(model->variables(), {1});
  ASSERT_TRUE(placement.ok());
  *job.mutable_placement() = *placement;
  job.set_num_replicas(2);
  job.set_job_id("j");
  std::vector<std::unique_ptr<ps_server::ShardServer>> shards;
  std::vector<std::unique_ptr<worker::EmbeddedShardClient>> clients;
  std::vector<std::unique_ptr<worker::WorkerCore>> cores;
  for (int w = 0; w < 2; ++w) {
    ps_server::ShardServerOptions options;
    options.shard.clock = &clock;
    shards.push_back(std::make_unique<ps_server::ShardServer>(options));
    clients.push_back(std::make_unique<worker::EmbeddedShardClient>(shards[w].get(), &clock));
    cores.push_back(std::make_unique<worker::WorkerCore>(w, std::vector<proto::DeviceInfo>{},
                                                         nullptr, worker::DeviceSetup(),
                                                         clients[w].get(), &setup));
  }
  proto::JobSpec other = job;
  other.set_seed(job.seed() + 1);  // another job (its fingerprint differs)
  ASSERT_TRUE(cores[0]->StartJob(job).ok());
  ASSERT_TRUE(cores[1]->StartJob(other).ok());
  auto run = [&](const std::vector<proto::RunUnitRequest>& units) {
    std::vector<absl::Status> status(units.size());
    std::vector<absl::Notification> done(units.size());
    for (size_t w = 0; w < units.size(); ++w) {
      cores[w]->RunUnit(units[w], [&, w](absl::StatusOr<proto::UnitMetrics> m) {
        status[w] = m.status();
        done[w].Notify();
      });
    }
    for (auto& d : done) EXPECT_TRUE(d.WaitForNotificationWithTimeout(absl::Seconds(60)));
    return status;
  };
  auto unit = [](int slot, int slots, const std::string& prefix) {
    proto::RunUnitRequest r;
    r.set_job_id("j");
    r.set_unit(0);
    r.set_first_step(0);
    r.set_num_steps(1);
    r.set_replica_slot(slot);
    r.set_num_slots(slots);
    r.mutable_group()->set_prefix(prefix);
    return r;
  };
  const absl::Time start = absl::Now();
  auto jobs = run({unit(0, 2, "a/"), unit(1, 2, "a/")});
  EXPECT_EQ(jobs[0].code(), absl::StatusCode::kFailedPrecondition) << jobs[0];
  EXPECT_THAT(std::string(jobs[0].message()), ::testing::HasSubstr("rank 1 runs job"));
  EXPECT_EQ(jobs[1].code(), absl::StatusCode::kFailedPrecondition) << jobs[1];
  EXPECT_THAT(std::string(jobs[1].message()), ::testing::HasSubstr("rank 0 runs job"));

  ASSERT_TRUE(cores[1]->StartJob(job).ok());  // the same job now
  auto sizes = run({unit(0, 2, "b/"), unit(1, 3, "b/")});
  EXPECT_EQ(sizes[0].code(), absl::StatusCode::kFailedPrecondition) << sizes[0];
  EXPECT_THAT(std::string(sizes[0].message()), ::testing::HasSubstr("group of 3"));
  // Rank 1 of "3" reads rank 0's first, before it would wait for a rank 2.
  EXPECT_EQ(sizes[1].code(), absl::StatusCode::kFailedPrecondition) << sizes[1];
  EXPECT_THAT(std::string(sizes[1].message()), ::testing::HasSubstr("group of 2"));
  // A member alone in a group of 2: the other never arrives (the timeout).
  ASSERT_TRUE(cores[1]->StartJob(job).ok());
  auto alone = run({unit(0, 2, "c/")});
  EXPECT_EQ(alone[0].code(), absl::StatusCode::kDeadlineExceeded) << alone[0];
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  for (auto& c : cores) c->Stop();
}

}  // namespace
}  // namespace testing
}  // namespace psc
