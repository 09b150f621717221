#include "common/job/job_result.h"

#include <fstream>

#include "common/io/faulty_file_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace job {
namespace {

TEST(JobResultTest, HasEveryContractKey) {
  JobResult r;
  r.mode = "sync";
  r.epochs.push_back({1, 0.5, 0.8, 0.6, 0.75, 12.0});
  r.test_accuracy = 0.7;
  const std::string path = ::testing::TempDir() + "/result.json";
  ASSERT_TRUE(WriteJobResult(path, r).ok());
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in);
  for (const char* key :
       {"mode", "cluster", "epochs", "test_accuracy", "test_loss", "wall_s", "examples_per_sec",
        "gradients_accepted", "gradients_applied", "gradients_dropped_stale", "staleness",
        "gradients_discarded", "checkpoints_written", "workers_lost", "recoveries",
        "final_variables_sha256", "threads", "steps", "steps_redone"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["epochs"][0]["val_accuracy"], 0.75);
  for (const char* key : {"mean", "p99", "max"}) EXPECT_TRUE(j["staleness"].contains(key));
  EXPECT_FALSE(WriteJobResult("/nonexistent/dir/r.json", r).ok());
}

TEST(JobResultTest, AFailedWriteNamesTheFileAndLeavesThePreviousOne) {
  const std::string path = ::testing::TempDir() + "/job_result_test_faulty.json";
  JobResult r;
  r.mode = "sync";
  ASSERT_TRUE(WriteJobResult(path, r).ok());
  io::FaultyFileSystem fs;
  fs.Fail(io::Op::kWriteAtomically, path, absl::InternalError("fsync: Input/output error"));
  r.mode = "async";
  absl::Status s = WriteJobResult(path, r, &fs);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), ::testing::HasSubstr(path));
  auto kept = io::LocalFileSystem()->ReadFile(path);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(nlohmann::json::parse(*kept)["mode"], "sync");
}

TEST(JobResultTest, Sha256OfVariablesInNameOrder) {
  std::vector<float> a = {1, 2}, b = {3};
  const std::string ab = VariablesSha256({{"a", a}, {"b", b}});
  EXPECT_EQ(ab, VariablesSha256({{"b", b}, {"a", a}})) << "name order, not argument order";
  EXPECT_EQ(ab.size(), 64u);
  EXPECT_NE(ab, VariablesSha256({{"a", b}, {"b", a}}));
  // SHA-256 of no bytes.
  EXPECT_EQ(VariablesSha256({}),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace job
}  // namespace psc
