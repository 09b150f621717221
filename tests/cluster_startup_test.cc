// Integration: real ps_server, worker and chief processes on 127.0.0.1 with
// generated TF_CONFIG. The chief finds the cluster, or names what is missing.
#include <signal.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ClusterStartupTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("startup"); }

  void StartTask(cluster::TaskType type, int index) {
    const char* binary = type == cluster::TaskType::kPs ? "ps_server" : "worker";
    auto d = Daemon::Start(binary, spec_.TfConfig(type, index), {}, dir_);
    ASSERT_TRUE(d.ok()) << d.status();
    daemons_.push_back(*std::move(d));
  }

  absl::StatusOr<RunResult> RunChief(const std::vector<std::string>& flags,
                                     absl::Duration timeout = absl::Seconds(60)) {
    std::vector<std::string> argv = {BinPath("chief")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return RunProgram(argv, {{"TF_CONFIG", spec_.TfConfig(cluster::TaskType::kChief, 0)}}, timeout);
  }

  std::string dir_;
  ClusterSpec spec_{1, 2};
  std::vector<std::unique_ptr<Daemon>> daemons_;
};

TEST_F(ClusterStartupTest, ChiefFindsTheWholeClusterAndExitsZero) {
  StartTask(cluster::TaskType::kPs, 0);
  StartTask(cluster::TaskType::kWorker, 0);
  StartTask(cluster::TaskType::kWorker, 1);
  auto check = RunChief({"--check_cluster", "--startup_timeout=30s"});
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->exit.ToString(), "exit 0") << check->err;
  EXPECT_THAT(check->out, HasSubstr("cluster ready: 3 tasks answer"));
  EXPECT_THAT(check->out, HasSubstr(spec_.Address(cluster::TaskType::kWorker, 1)));

  // The chief finds the cluster, then runs a tiny job to its end.
  auto r = RunChief({"--startup_timeout=30s", "--model=mlp", "--epochs=1", "--steps_per_epoch=2",
                     "--max_train_examples=6400", "--intra_op_threads=1", "--eval_threads=1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->err;
  EXPECT_THAT(r->err, HasSubstr("cluster ready: 3 tasks answer"));
  for (const char* task : {"ps:0", "worker:0", "worker:1"}) {
    EXPECT_THAT(r->out, HasSubstr(task));
  }
  EXPECT_THAT(r->out, Not(HasSubstr("MISSING")));
  EXPECT_THAT(r->out, HasSubstr("test_accuracy"));
}

TEST_F(ClusterStartupTest, MissingWorkerMakesTheChiefExitOneWithinTheDeadlineNamingIt) {
  StartTask(cluster::TaskType::kPs, 0);
  StartTask(cluster::TaskType::kWorker, 0);  // worker:1 is never started
  for (bool check : {false, true}) {
    std::vector<std::string> flags = {"--startup_timeout=3s"};
    if (check) flags.push_back("--check_cluster");
    auto r = RunChief(flags);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit.ToString(), "exit 1") << r->err;
    EXPECT_GE(r->wall, absl::Seconds(3));
    EXPECT_LT(r->wall, absl::Seconds(10)) << "the chief overran its deadline";
    EXPECT_THAT(r->err, HasSubstr("1 of 3 tasks did not answer within 3s: worker:1 at " +
                                  spec_.Address(cluster::TaskType::kWorker, 1)));
    EXPECT_THAT(r->err, Not(HasSubstr("worker:0 at")));
    EXPECT_THAT(r->out, HasSubstr("MISSING"));
  }
}

TEST_F(ClusterStartupTest, ChiefStartedFirstFindsTasksThatComeUpLater) {
  std::vector<std::string> argv = {BinPath("chief"),       "--startup_timeout=60s",
                                   "--model=mlp",          "--epochs=1",
                                   "--steps_per_epoch=2",  "--max_train_examples=6400",
                                   "--intra_op_threads=1", "--eval_threads=1"};
  launcher::SubprocessOptions o;
  o.argv = argv;
  o.env = {{"TF_CONFIG", spec_.TfConfig(cluster::TaskType::kChief, 0)}};
  o.stdout_path = dir_ + "/chief.out";
  o.stderr_path = "=stdout";
  auto chief = launcher::Subprocess::Spawn(o);
  ASSERT_TRUE(chief.ok());
  // The chief is already probing (and backing off) when the tasks start.
  ASSERT_TRUE(
      WaitForServing(spec_.Address(cluster::TaskType::kChief, 0), {}, absl::Seconds(30)).ok());
  StartTask(cluster::TaskType::kPs, 0);
  StartTask(cluster::TaskType::kWorker, 0);
  StartTask(cluster::TaskType::kWorker, 1);
  auto exit = (*chief)->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->ToString(), "exit 0") << ReadFile(dir_ + "/chief.out");
}

}  // namespace
}  // namespace testing
}  // namespace psc
