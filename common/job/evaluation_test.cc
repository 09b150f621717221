#include "common/job/evaluation.h"

#include <cmath>
#include <random>

#include "common/compute/cpu_backend.h"
#include "common/keras/keras_config.h"
#include "gtest/gtest.h"

namespace psc {
namespace job {
namespace {

// `count` 28x28 examples of random bytes, standardized by a table, labels 0..9.
data::Split RandomSplit(int64_t count) {
  data::Split s;
  s.count = count;
  s.height = s.width = 28;
  std::mt19937 rng(3);
  for (int v = 0; v < 256; ++v) s.table[v] = (static_cast<float>(v) - 72.9f) / 90.0f;
  s.pixels.resize(count * 28 * 28);
  for (uint8_t& p : s.pixels) p = static_cast<uint8_t>(rng() % 256);
  for (int64_t i = 0; i < count; ++i) s.labels.push_back(static_cast<int32_t>(rng() % 10));
  return s;
}

class EvaluationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = compute::CreateCpuBackend(1);
    ASSERT_TRUE(backend.ok());
    backend_ = *std::move(backend);
    auto model = keras::BuiltinModel("mlp");
    ASSERT_TRUE(model.ok());
    model_ = std::make_unique<compute::Model>(*std::move(model));
    auto exec = compute::Executor::Create(model_.get(), backend_.get());
    ASSERT_TRUE(exec.ok());
    exec_ = *std::move(exec);
    ASSERT_TRUE(exec_->SetParameters(model_->Initialize(2)).ok());
  }
  std::unique_ptr<compute::ComputeBackend> backend_;
  std::unique_ptr<compute::Model> model_;
  std::unique_ptr<compute::Executor> exec_;
};

// The batch size is an implementation detail: the same loss and accuracy at
// any batch, a last partial batch included.
TEST_F(EvaluationTest, TheBatchSizeDoesNotChangeTheMetrics) {
  const data::Split split = RandomSplit(37);
  auto all = EvaluateSplit(exec_.get(), split, JobLoss(), {}, 1000);
  auto sevens = EvaluateSplit(exec_.get(), split, JobLoss(), {}, 7);
  auto default_batch = EvaluateSplit(exec_.get(), split);
  ASSERT_TRUE(all.ok() && sevens.ok() && default_batch.ok());
  EXPECT_EQ(all->examples, 37);
  EXPECT_NEAR(sevens->loss, all->loss, 1e-5 * std::fabs(all->loss));
  EXPECT_EQ(sevens->accuracy, all->accuracy);
  EXPECT_NEAR(default_batch->loss, all->loss, 1e-5 * std::fabs(all->loss));
}

TEST_F(EvaluationTest, BadSplitsAndBatchesAreInvalidArgument) {
  data::Split split = RandomSplit(4);
  EXPECT_EQ(EvaluateSplit(exec_.get(), split, JobLoss(), {}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  split.pixels.pop_back();
  EXPECT_EQ(EvaluateSplit(exec_.get(), split).status().code(), absl::StatusCode::kInvalidArgument);
  // An absent split (an .npz without x_test) evaluates to no examples.
  auto empty = EvaluateSplit(exec_.get(), data::Split());
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->examples, 0);
  EXPECT_EQ(empty->loss, 0);
}

}  // namespace
}  // namespace job
}  // namespace psc
