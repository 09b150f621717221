#include "common/job/compiled_metrics.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace job {
namespace {

proto::CompiledMetric Metric(const char* name, proto::CompiledMetric::Kind kind,
                             int thresholds = 0) {
  proto::CompiledMetric m;
  m.set_name(name);
  m.set_kind(kind);
  m.set_num_thresholds(thresholds);
  return m;
}

std::vector<proto::CompiledMetric> All(int auc_thresholds = 200) {
  return {Metric("mae", proto::CompiledMetric::MAE),
          Metric("mse", proto::CompiledMetric::MSE),
          Metric("precision", proto::CompiledMetric::PRECISION),
          Metric("recall", proto::CompiledMetric::RECALL),
          Metric("auc", proto::CompiledMetric::AUC, auc_thresholds),
          Metric("binary_accuracy", proto::CompiledMetric::BINARY_ACCURACY)};
}

// Labels {0, 1, 1} as one-hot rows of 2 classes, outputs as below: the
// values Keras 3.15.1's metrics give for them (its update_state and
// result, in float32).
const std::vector<float> kOutputs = {0.8f, 0.3f, 0.4f, 0.6f, 0.1f, 0.35f};
const std::vector<int32_t> kLabels = {0, 1, 1};

TEST(CompiledMetricsTest, KerasValues) {
  MetricSums sums(All());
  sums.Add(kOutputs, kLabels, 2);
  const MetricValues v = sums.Values();
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v[0].first, "mae");
  EXPECT_NEAR(v[0].second, 0.34166666865348816, 1e-7);
  EXPECT_NEAR(v[1].second, 0.1470833271741867, 1e-7);
  EXPECT_NEAR(v[2].second, 1.0, 1e-7);                 // precision
  EXPECT_NEAR(v[3].second, 0.6666666865348816, 1e-7);  // recall
  EXPECT_NEAR(v[4].second, 0.8888888955116272, 1e-7);  // AUC, 200 thresholds
  EXPECT_NEAR(v[5].second, 0.8333333134651184, 1e-7);  // binary accuracy
  // Three thresholds put 0.35 in the negatives' bucket: half credit.
  MetricSums three({Metric("auc", proto::CompiledMetric::AUC, 3)});
  three.Add(kOutputs, kLabels, 2);
  EXPECT_NEAR(three.Values()[0].second, 0.8333333730697632, 1e-7);
  // Logits beyond [0, 1] are clipped, as Keras's AUC clips them.
  MetricSums clipped({Metric("auc", proto::CompiledMetric::AUC, 200)});
  clipped.Add({1.7f, -0.3f, 0.4f, 0.6f, 0.5f, 0.5f}, kLabels, 2);
  EXPECT_NEAR(clipped.Values()[0].second, 0.9444444179534912, 1e-7);
}

// The values come from sums: one batch, two batches or two workers' sums
// added give the same.
TEST(CompiledMetricsTest, SplitsAddUp) {
  MetricSums whole(All(7));
  whole.Add(kOutputs, kLabels, 2);
  MetricSums first(All(7)), second(All(7)), merged(All(7));
  first.Add(absl::MakeConstSpan(kOutputs).subspan(0, 2), absl::MakeConstSpan(kLabels).subspan(0, 1),
            2);
  second.Add(absl::MakeConstSpan(kOutputs).subspan(2), absl::MakeConstSpan(kLabels).subspan(1), 2);
  ASSERT_TRUE(merged.Add(first.sums()).ok());
  ASSERT_TRUE(merged.Add(second.sums()).ok());
  EXPECT_EQ(merged.sums().SerializeAsString(), whole.sums().SerializeAsString());
  EXPECT_EQ(merged.Values(), whole.Values());
  // Another job's AUC buckets are refused, and nothing is added.
  MetricSums other(All(9));
  other.Add(kOutputs, kLabels, 2);
  EXPECT_EQ(merged.Add(other.sums()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(merged.Values(), whole.Values());
  merged.Clear();
  EXPECT_EQ(merged.sums().elements(), 0);
  EXPECT_EQ(merged.sums().auc_positive_size(), 7);
}

TEST(CompiledMetricsTest, EmptyAndDegenerate) {
  MetricSums none;
  EXPECT_TRUE(none.empty());
  none.Add(kOutputs, kLabels, 2);
  EXPECT_TRUE(none.Values().empty());
  // No example yet: every ratio is 0 (Keras's divide_no_nan).
  MetricSums fresh(All());
  for (const auto& [name, value] : fresh.Values()) EXPECT_EQ(value, 0) << name;
  EXPECT_EQ(RocAuc({}, {}), 0);
  EXPECT_DOUBLE_EQ(RocAuc({0, 0, 5}, {5, 0, 0}), 1.0);
  EXPECT_DOUBLE_EQ(RocAuc({0, 4, 0}, {0, 4, 0}), 0.5);
}

// A regression's metrics compare the outputs with the float targets:
// Keras's mae, mse and root_mean_squared_error of the same numbers.
TEST(CompiledMetricsTest, ARegressionComparesOutputsWithTargets) {
  MetricSums sums({Metric("mae", proto::CompiledMetric::MAE),
                   Metric("mse", proto::CompiledMetric::MSE),
                   Metric("rmse", proto::CompiledMetric::ROOT_MEAN_SQUARED_ERROR)});
  const std::vector<float> outputs = {1.0f, 2.0f, -1.0f, 0.5f};
  const std::vector<float> targets = {1.5f, 0.0f, -1.0f, 1.5f};
  const std::vector<int32_t> labels = {0, 0};
  // Two batches of one example each: the values are of all four errors.
  sums.Add(absl::MakeConstSpan(outputs).subspan(0, 2), absl::MakeConstSpan(labels).subspan(0, 1), 2,
           absl::MakeConstSpan(targets).subspan(0, 2));
  sums.Add(absl::MakeConstSpan(outputs).subspan(2, 2), absl::MakeConstSpan(labels).subspan(1, 1), 2,
           absl::MakeConstSpan(targets).subspan(2, 2));
  const MetricValues v = sums.Values();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_DOUBLE_EQ(v[0].second, (0.5 + 2.0 + 0.0 + 1.0) / 4);
  EXPECT_DOUBLE_EQ(v[1].second, (0.25 + 4.0 + 0.0 + 1.0) / 4);
  EXPECT_DOUBLE_EQ(v[2].second, std::sqrt((0.25 + 4.0 + 0.0 + 1.0) / 4));
  EXPECT_EQ(v[2].first, "rmse");
}

}  // namespace
}  // namespace job
}  // namespace psc
