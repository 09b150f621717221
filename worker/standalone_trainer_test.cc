// worker --standalone's core on the real Fashion-MNIST data, a few dozen
// steps: the loss falls, validation beats chance, and runs are reproducible.
#include "worker/standalone_trainer.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace worker {
namespace {

proto::JobSpec SmallJob(const std::string& model, int64_t steps) {
  proto::JobSpec job;
  job.set_model(model);
  job.mutable_optimizer()->set_kind(proto::OptimizerConfig::MOMENTUM);
  job.mutable_optimizer()->set_learning_rate(0.01);
  job.mutable_optimizer()->set_momentum(0.9);
  job.set_batch_size(64);
  job.set_epochs(2);
  job.set_steps_per_epoch(steps);
  job.set_max_train_examples(6400);
  job.set_data_dir("/usr/share/datasets/fashion-mnist");
  job.set_seed(1);
  job.set_intra_op_threads(2);
  return job;
}

class StandaloneTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    }
  }
};

TEST_F(StandaloneTrainerTest, TheLossFallsAndValidationBeatsChance) {
  auto r = TrainStandalone(SmallJob("seed_cnn", 15), nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->epochs.size(), 2u);
  EXPECT_EQ(r->steps, 30);
  EXPECT_LT(r->epochs[1].loss, r->epochs[0].loss);
  EXPECT_GT(r->epochs[1].val_accuracy, 0.2);  // chance is 0.1
  EXPECT_GT(r->test_accuracy, 0.2);
  EXPECT_EQ(r->final_variables_sha256.size(), 64u);
  EXPECT_EQ(r->threads, 2);
}

TEST_F(StandaloneTrainerTest, TheMlpLearnsFast) {
  auto r = TrainStandalone(SmallJob("mlp", 50), nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->epochs[1].val_accuracy, 0.7);
}

TEST_F(StandaloneTrainerTest, RunsAreBitForBitReproducible) {
  auto a = TrainStandalone(SmallJob("mlp", 20), nullptr);
  auto b = TrainStandalone(SmallJob("mlp", 20), nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->final_variables_sha256, b->final_variables_sha256);
  proto::JobSpec other = SmallJob("mlp", 20);
  other.set_seed(2);
  auto c = TrainStandalone(other, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->final_variables_sha256, c->final_variables_sha256);
}

TEST_F(StandaloneTrainerTest, TwoVirtualCpuReplicasTrainTheSameJob) {
  DeviceSetup two;
  two.options.device = DeviceKind::kCpu;
  two.options.virtual_devices = 2;
  two.plan = CpuOnlyPlan(0, 2);
  auto mirrored = TrainStandalone(SmallJob("mlp", 50), nullptr, nullptr, two);
  ASSERT_TRUE(mirrored.ok()) << mirrored.status();
  auto alone = TrainStandalone(SmallJob("mlp", 50), nullptr);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(mirrored->steps, alone->steps);
  EXPECT_GT(mirrored->epochs[1].val_accuracy, 0.7);
  // The same mean gradient, summed in another order: close, not identical.
  EXPECT_NEAR(mirrored->epochs[1].loss, alone->epochs[1].loss, 0.01);
}

TEST_F(StandaloneTrainerTest, BadDataDirIsAnError) {
  proto::JobSpec job = SmallJob("mlp", 2);
  job.set_data_dir("/nonexistent");
  auto r = TrainStandalone(job, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace worker
}  // namespace psc
