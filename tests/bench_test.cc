// The benchmarks run end to end and report the keys docs/results.md quotes.
// Smoke runs of a few iterations: their timings mean nothing here.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

TEST(PsDataplaneBenchTest, EmitsItsJson) {
  auto r = RunProgram(
      {BinPath("ps_dataplane"), "--warmup=1", "--iters=3", "--repeats=1", "--concurrent_workers=2"},
      {}, absl::Seconds(120));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->exit.ToString(), "exit 0") << r->err;
  auto j = nlohmann::json::parse(r->out);
  EXPECT_EQ(j["bytes_each_way"], 1741224);
  EXPECT_GT(j["time_ratio_vs_tcp"].get<double>(), 0);
  EXPECT_EQ(j["pscluster_2_shards"]["round_trips_timed"], 3);
  EXPECT_EQ(j["pscluster_4_shards"]["transport"], "data channel");
  EXPECT_EQ(j["grpc_1_shard"]["transport"], "gRPC");
  EXPECT_GT(j["time_ratio_vs_tcp_grpc"].get<double>(), 0);
  ASSERT_EQ(j["concurrent"].size(), 2u);
  EXPECT_EQ(j["concurrent"][1]["shards"], 2);
  EXPECT_EQ(j["concurrent"][1]["workers"], 2);
  EXPECT_GT(j["concurrent"][0]["aggregate_GB_per_s"].get<double>(), 0);
  EXPECT_GT(j["tcp"]["median_us"].get<double>(), 0);
}

TEST(ComputeCpuBenchTest, EmitsItsJson) {
  auto r = RunProgram({BinPath("compute_cpu"), "--torch=false", "--warmup=1", "--steps=2",
                       "--repeats=1", "--batch=16"},
                      {}, absl::Seconds(120));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->exit.ToString(), "exit 0") << r->err;
  auto j = nlohmann::json::parse(r->out);
  EXPECT_GT(j["examples_per_s"].get<double>(), 0);
  EXPECT_EQ(j["model"], "seed_cnn");
  EXPECT_FALSE(j.contains("speedup_vs_torch")) << "no peer was run";
}

}  // namespace
}  // namespace testing
}  // namespace psc
