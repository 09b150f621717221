#include "common/metrics/families.h"

#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace metrics {
namespace {

using ::testing::ElementsAre;

TEST(FamiliesTest, ExponentialBoundsStartAtZero) {
  EXPECT_THAT(ExponentialBounds(7), ElementsAre(0, 1, 2, 4, 8, 16, 32));
  EXPECT_THAT(ExponentialBounds(1), ElementsAre(0));
  EXPECT_TRUE(ExponentialBounds(0).empty());
}

TEST(FamiliesTest, RebucketFoldsALinearHistogramIntoBounds) {
  // Values 0..5 once each, 3 twice more, and 4 values of 6 or more.
  const std::vector<int64_t> linear = {1, 1, 1, 3, 1, 1, 4};
  // Buckets (-inf,0], (0,1], (1,2], (2,4] (3 three times, 4 once), and
  // +Inf (5 once, and the 4 of 6 or more).
  EXPECT_THAT(Rebucket(linear, {0, 1, 2, 4}), ElementsAre(1, 1, 1, 4, 5));
  // The open-ended last entry goes to +Inf even when a bound is above it:
  // (0,8] holds 1..5 (7 values), +Inf the 4 of 6 or more.
  EXPECT_THAT(Rebucket(linear, {0, 8}), ElementsAre(1, 7, 4));
}

TEST(FamiliesTest, HistogramIsCumulativeWithAnInfBucket) {
  prometheus::MetricFamily h = Histogram("h", "help", {0, 1, 2}, {2, 0, 3, 1}, 7.5, {{"k", "v"}});
  ASSERT_EQ(h.metric.size(), 1u);
  const auto& hist = h.metric[0].histogram;
  ASSERT_EQ(hist.bucket.size(), 4u);
  EXPECT_EQ(hist.bucket[0].cumulative_count, 2u);
  EXPECT_EQ(hist.bucket[1].cumulative_count, 2u);
  EXPECT_EQ(hist.bucket[2].cumulative_count, 5u);
  EXPECT_EQ(hist.bucket[3].cumulative_count, 6u);
  EXPECT_EQ(hist.bucket[3].upper_bound, std::numeric_limits<double>::infinity());
  EXPECT_EQ(hist.sample_count, 6u);
  EXPECT_EQ(hist.sample_sum, 7.5);
  EXPECT_EQ(h.metric[0].label[0].name, "k");
}

TEST(FamiliesTest, GaugeAndCounterCarryTheirLabels) {
  prometheus::MetricFamily g = Gauge("g", "a gauge", 3, {{"shard", "1"}});
  EXPECT_EQ(g.type, prometheus::MetricType::Gauge);
  EXPECT_EQ(g.metric[0].gauge.value, 3);
  EXPECT_EQ(g.metric[0].label[0].value, "1");
  prometheus::MetricFamily c = Counter("c_total", "a counter", 5);
  EXPECT_EQ(c.type, prometheus::MetricType::Counter);
  EXPECT_EQ(c.metric[0].counter.value, 5);
}

}  // namespace
}  // namespace metrics
}  // namespace psc
