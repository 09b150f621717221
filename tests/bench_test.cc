// The benchmarks run end to end and report the keys docs/results.md quotes.
// Smoke runs of a few iterations: their timings mean nothing here.
#include <cstdint>
#include <string>
#include <vector>

#include "common/data/npz_test_util.h"
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

// record_read reads the same records whole and streamed, from gzip shards
// that `pscluster data convert` wrote.
TEST(RecordReadBenchTest, ReadsTheRecordsWholeAndStreamed) {
  const std::string dir = MakeTempDir("record_read");
  std::vector<uint8_t> pixels(300 * 16), labels(300);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(i % 10);
  data::testing::WriteNpz(
      dir + "/d.npz", {{"x_train.npy", data::testing::NpyBytes(data::NpyType::kUint8, {300, 4, 4},
                                                               pixels.data(), pixels.size())},
                       {"y_train.npy", data::testing::NpyBytes(data::NpyType::kUint8, {300},
                                                               labels.data(), labels.size())}});
  auto c = RunProgram({BinPath("pscluster"), "data", "convert", dir + "/d.npz", dir + "/gz",
                       "--shards=3", "--compression=gzip"},
                      {}, absl::Seconds(60));
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->exit.ToString(), "exit 0") << c->err;
  for (const char* mode : {"whole", "stream"}) {
    SCOPED_TRACE(mode);
    auto r =
        RunProgram({BinPath("record_read"), "--files=" + dir + "/gz/train-*",
                    "--spec=" + dir + "/gz/spec.json", std::string("--read=") + mode, "--chunk=64"},
                   {}, absl::Seconds(60));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->exit.ToString(), "exit 0") << r->err;
    auto j = nlohmann::json::parse(r->out);
    EXPECT_EQ(j["read"], mode);
    EXPECT_EQ(j["records"], 300);
    EXPECT_GT(j["records_per_second"].get<double>(), 0);
  }
  auto bad = RunProgram({BinPath("record_read"), "--files=" + dir + "/gz/train-*",
                         "--spec=" + dir + "/gz/spec.json", "--read=lazy"},
                        {}, absl::Seconds(60));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit.ToString(), "exit 1");
  EXPECT_THAT(bad->err, ::testing::HasSubstr("--read takes whole or stream"));
  for (const char* chunk : {"--chunk=0", "--chunk=1048577"}) {
    auto r = RunProgram({BinPath("record_read"), "--files=" + dir + "/gz/train-*",
                         "--spec=" + dir + "/gz/spec.json", "--read=stream", chunk},
                        {}, absl::Seconds(60));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.ToString(), "exit 1") << chunk;
    EXPECT_THAT(r->err, ::testing::HasSubstr("--chunk 1..2^20")) << chunk;
  }
}

}  // namespace
}  // namespace testing
}  // namespace psc
