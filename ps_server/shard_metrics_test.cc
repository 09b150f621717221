#include "ps_server/shard_metrics.h"

#include "absl/strings/str_cat.h"
#include "common/metrics/exporter.h"
#include "common/metrics/testing/http_get.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard_server.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

// The server's stats as main.cc exports them, with no timer running.
ShardServerOptions Options(base::Clock* clock) {
  ShardServerOptions options;
  options.shard.clock = clock;
  options.expiry_interval = absl::ZeroDuration();
  return options;
}

TEST(ShardMetricsTest, ServesTheShardCountersOverHttp) {
  base::FakeClock clock;
  ShardServer server(Options(&clock));
  Shard& shard = server.shard();
  proto::ConfigureRequest config;
  config.set_num_shards(1);
  config.set_num_workers(1);
  config.mutable_policy()->set_mode(proto::MODE_ASYNC);
  config.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
  ASSERT_TRUE(shard.Configure(config).ok());
  proto::CreateVariablesRequest create;
  auto* v = create.add_variables();
  v->set_name("w");
  tensor::SetFloatTensor({2}, std::vector<float>{1, 2}, v->mutable_tensor());
  proto::CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(create, &created).ok());
  proto::PushRequest push;
  auto* g = push.add_gradients();
  g->set_name("w");
  tensor::SetFloatTensor({2}, std::vector<float>{1, 1}, g->mutable_tensor());
  proto::PushResponse pushed;
  ASSERT_TRUE(shard.Push(push, &pushed).ok());

  auto exporter = metrics::Exporter::Start(
      "127.0.0.1", 0, "ps", [&server] { return ShardMetricFamilies(server.Stats()); });
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  ASSERT_GT((*exporter)->port(), 0);
  const std::string reply = metrics::HttpGet((*exporter)->port(), "/metrics");
  EXPECT_THAT(reply, HasSubstr("200 OK"));
  EXPECT_THAT(reply, HasSubstr("pscluster_ps_version{shard=\"0\"} 1"));
  EXPECT_THAT(reply, HasSubstr("pscluster_ps_pushes_accepted_total{shard=\"0\"} 1"));
  EXPECT_THAT(reply, HasSubstr("pscluster_ps_gradients_applied_total{shard=\"0\"} 1"));
  EXPECT_THAT(reply, HasSubstr("pscluster_ps_staleness_count{shard=\"0\"} 1"));
  // One worker and slot: its watermark and the id above it.
  EXPECT_THAT(reply, HasSubstr("pscluster_ps_ledger_entries{shard=\"0\"} 2"));
}

TEST(ShardMetricsTest, StalenessHasExponentialBuckets) {
  proto::ShardStats stats;
  stats.set_shard_index(2);
  // Staleness 0 three times, 3 twice, 40 once, and 2 at 62 or more.
  std::vector<int64_t> linear(63, 0);
  linear[0] = 3;
  linear[3] = 2;
  linear[40] = 1;
  linear[62] = 2;
  for (int64_t n : linear) stats.add_staleness_histogram(n);
  stats.set_staleness_sum(6 + 40 + 2 * 62);
  const prometheus::MetricFamily* staleness = nullptr;
  const std::vector<prometheus::MetricFamily> families = ShardMetricFamilies(stats);
  for (const auto& f : families) {
    if (f.name == "pscluster_ps_staleness") staleness = &f;
  }
  ASSERT_NE(staleness, nullptr);
  const auto& buckets = staleness->metric[0].histogram.bucket;
  ASSERT_EQ(buckets.size(), kStalenessBounds + 1u);  // 0, 1, 2, 4, 8, 16, 32, +Inf
  EXPECT_EQ(buckets[0].upper_bound, 0);
  EXPECT_EQ(buckets[0].cumulative_count, 3u);
  EXPECT_EQ(buckets[3].upper_bound, 4);
  EXPECT_EQ(buckets[3].cumulative_count, 5u);
  EXPECT_EQ(buckets[6].upper_bound, 32);
  EXPECT_EQ(buckets[6].cumulative_count, 5u);
  EXPECT_EQ(buckets[7].cumulative_count, 8u);
  EXPECT_EQ(staleness->metric[0].histogram.sample_count, 8u);
  EXPECT_EQ(staleness->metric[0].label[0].value, "2");
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
