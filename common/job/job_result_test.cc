#include "common/job/job_result.h"

#include <fstream>

#include "common/base/build_info.h"
#include "common/io/faulty_file_system.h"
#include "common/job/job_flags.h"
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
  for (const char* key : {"mode",
                          "cluster",
                          "epochs",
                          "test_accuracy",
                          "test_loss",
                          "wall_s",
                          "examples_per_sec",
                          "gradients_accepted",
                          "gradients_applied",
                          "gradients_dropped_stale",
                          "staleness",
                          "gradients_discarded",
                          "checkpoints_written",
                          "workers_lost",
                          "recoveries",
                          "final_variables_sha256",
                          "threads",
                          "steps",
                          "steps_redone",
                          "pscluster_version",
                          "git_commit",
                          "start_time",
                          "seed",
                          "job"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["epochs"][0]["val_accuracy"], 0.75);
  for (const char* key : {"mean", "p99", "max"}) EXPECT_TRUE(j["staleness"].contains(key));
  EXPECT_FALSE(WriteJobResult("/nonexistent/dir/r.json", r).ok());
}

// What ran: the build, the start and the job as resolved from its flags.
TEST(JobResultTest, SaysWhatRan) {
  proto::JobSpec job;
  job.set_batch_size(126);
  job.set_seed(7);
  job.set_model("seed_cnn");
  job.set_model_config("{\"huge\": \"keras config\"}");
  job.mutable_placement()->set_num_shards(2);
  job.mutable_policy()->set_mode(proto::MODE_SSP);
  job.mutable_policy()->set_staleness(3);
  JobResult r;
  SetJob(job, absl::FromUnixSeconds(1796000000), &r);
  const nlohmann::json j = nlohmann::json::parse(JobResultJson(r));
  EXPECT_EQ(j["pscluster_version"], base::Version());
  EXPECT_EQ(j["git_commit"], base::GitCommit());
  EXPECT_EQ(j["start_time"], "2026-11-30T00:53:20Z");
  EXPECT_EQ(j["seed"], 7);
  EXPECT_EQ(j["job"]["batch_size"], "126") << "int64 as proto3 JSON writes it";
  EXPECT_EQ(j["job"]["model"], "seed_cnn");
  EXPECT_EQ(j["job"]["policy"]["mode"], "MODE_SSP");
  EXPECT_EQ(j["job"]["policy"]["staleness"], "3");
  EXPECT_FALSE(j["job"].contains("placement"));
  EXPECT_EQ(j["job"]["model_config"], "") << "the file's content is not repeated";
}

// Issue 18's keys: what `pscluster plot` and the modes study read.
TEST(JobResultTest, RecordsEvaluationsWorkersAndTheStalenessHistogram) {
  JobResult r;
  r.mode = "sync";
  r.replicas_to_aggregate = 2;
  r.eval_every_steps = 50;
  r.train_s = 12.5;
  r.examples_seen = 6300;
  r.staleness_histogram = {10, 4, 1};
  r.evaluations.push_back({50, 6.25, 6300, 0.61, 0.78});
  WorkerRecord w;
  w.worker = 2;
  w.straggler_factor = 3;
  w.steps = 4;
  w.compute_s = 2.0;
  w.comm_s = 0.4;
  w.idle_s = 1.3;
  w.examples = 252;
  w.examples_dropped = 189;
  r.workers.push_back(w);
  const nlohmann::json j = nlohmann::json::parse(JobResultJson(r));
  EXPECT_EQ(j["replicas_to_aggregate"], 2);
  EXPECT_EQ(j["eval_every_steps"], 50);
  EXPECT_EQ(j["train_s"], 12.5);
  EXPECT_EQ(j["examples_seen"], 6300);
  EXPECT_EQ(j["staleness"]["histogram"], (std::vector<int64_t>{10, 4, 1}));
  EXPECT_EQ(j["evaluations"][0]["step"], 50);
  EXPECT_EQ(j["evaluations"][0]["train_s"], 6.25);
  EXPECT_EQ(j["evaluations"][0]["examples_seen"], 6300);
  EXPECT_EQ(j["evaluations"][0]["val_accuracy"], 0.78);
  const nlohmann::json& worker = j["workers"][0];
  EXPECT_EQ(worker["worker"], 2);
  EXPECT_EQ(worker["straggler_factor"], 3.0);
  EXPECT_DOUBLE_EQ(worker["step_s"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(worker["compute_s_per_step"].get<double>(), 0.5);
  EXPECT_EQ(worker["examples_dropped"], 189);
}

TEST(JobResultTest, RecordsEveryUnitAndMembershipChange) {
  JobResult r;
  r.units.push_back({0, 5, 1, 2, 0, -1});
  r.units.push_back({5, 10, 1, 2, 0, 1});  // worker 1's, given back
  r.membership.push_back({7, 1, "lost", "no heartbeat for 30s"});
  r.membership.push_back({10, 1, "rejoined", "it answers again"});
  r.workers_rejoined = 1;
  const nlohmann::json j = nlohmann::json::parse(JobResultJson(r));
  ASSERT_EQ(j["units"].size(), 2u);
  EXPECT_EQ(j["units"][0],
            nlohmann::json::parse(
                R"({"first_step": 0, "end": 5, "slot": 1, "num_slots": 2, "worker": 0})"));
  EXPECT_EQ(j["units"][1]["push_as"], 1);
  ASSERT_EQ(j["membership"].size(), 2u);
  EXPECT_EQ(j["membership"][0]["step"], 7);
  EXPECT_EQ(j["membership"][0]["change"], "lost");
  EXPECT_EQ(j["membership"][0]["why"], "no heartbeat for 30s");
  EXPECT_EQ(j["membership"][1]["change"], "rejoined");
  EXPECT_EQ(j["workers_rejoined"], 1);
}

TEST(JobResultTest, RecordsTheDataAndItsPreprocessing) {
  JobResult r;
  r.data = {"npz:/d/train.npz", "rescale", 0, 1, 1.0 / 255, 6000, 2000, 0};
  r.test_loss = 0.25;
  r.wall_s = 2;
  r.examples_per_sec = 100;
  auto j = nlohmann::json::parse(JobResultJson(r));
  EXPECT_EQ(j["data"]["source"], "npz:/d/train.npz");
  EXPECT_EQ(j["data"]["preprocessing"],
            nlohmann::json({{"kind", "rescale"}, {"scale", 1.0 / 255}}));
  EXPECT_EQ(j["data"]["train_examples"], 6000);
  EXPECT_EQ(j["data"]["validation_examples"], 2000);
  // No test split: null, not a made-up 0.
  EXPECT_TRUE(j["test_loss"].is_null());
  EXPECT_TRUE(j["test_accuracy"].is_null());
  EXPECT_EQ(FinalLine(r), "no test split - 2.0s - 100 training examples/s (evaluation excluded)");
  EXPECT_FALSE(j.contains("peak_rss_mb"));

  r.data = {"fashion-mnist:/x", "standardize", 72.5, 90.25, 1, 55000, 5000, 10000};
  r.peak_rss_mb = 300;
  j = nlohmann::json::parse(JobResultJson(r));
  EXPECT_EQ(
      j["data"]["preprocessing"],
      nlohmann::json({{"kind", "standardize"}, {"axis", "none"}, {"mean", 72.5}, {"std", 90.25}}));
  EXPECT_EQ(j["test_loss"], 0.25);
  EXPECT_EQ(j["peak_rss_mb"], 300);
  EXPECT_EQ(FinalLine(r),
            "test_loss: 0.2500 - test_accuracy: 0.0000 - 2.0s - 100 training examples/s "
            "(evaluation excluded)");
  EXPECT_GT(PeakRssMb(), 0);
}

TEST(JobFlagsTest, RescaleFactors) {
  EXPECT_DOUBLE_EQ(*ParseScale("1/255"), 1.0 / 255);
  EXPECT_DOUBLE_EQ(*ParseScale("0.5"), 0.5);
  for (const char* bad : {"", "0", "-1", "1/0", "a/b", "nan", "inf", "1/", "x"}) {
    auto s = ParseScale(bad);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(std::string(ParseScale("x").status().message()), ::testing::HasSubstr("--rescale=x"));
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
