// Fault tests: real processes, real kill -9.
#include <signal.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("fault"); }

  std::unique_ptr<Daemon> StartTask(TaskType type, int index) {
    const char* binary = type == TaskType::kPs ? "ps_server" : "worker";
    auto d = Daemon::Start(binary, spec_.TfConfig(type, index), {}, dir_);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }

  absl::StatusOr<RunResult> CheckCluster(const std::string& timeout) {
    return RunProgram({BinPath("chief"), "--check_cluster", "--startup_timeout=" + timeout},
                      {{"TF_CONFIG", spec_.TfConfig(TaskType::kChief, 0)}}, absl::Seconds(60));
  }

  std::string dir_;
  ClusterSpec spec_{1, 2};
};

TEST_F(FaultTest, KilledWorkerIsReportedMissing) {
  auto ps = StartTask(TaskType::kPs, 0);
  auto w0 = StartTask(TaskType::kWorker, 0);
  auto w1 = StartTask(TaskType::kWorker, 1);
  auto before = CheckCluster("30s");
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->exit.ToString(), "exit 0") << before->err;

  w1->process().Signal(SIGKILL);
  auto killed = w1->process().Wait(absl::Seconds(30));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(killed->term_signal, SIGKILL);

  auto after = CheckCluster("2s");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->exit.ToString(), "exit 1");
  EXPECT_THAT(after->err, HasSubstr("worker:1 at " + spec_.Address(TaskType::kWorker, 1)));
}

TEST_F(FaultTest, KilledServerRestartedOnItsAddressIsFoundAgain) {
  auto ps = StartTask(TaskType::kPs, 0);
  auto w0 = StartTask(TaskType::kWorker, 0);
  auto w1 = StartTask(TaskType::kWorker, 1);
  ASSERT_TRUE(WaitForServing(spec_.Address(TaskType::kPs, 0), {}, absl::Seconds(30)).ok());
  ps->process().Signal(SIGKILL);
  ASSERT_TRUE(ps->process().Wait(absl::Seconds(30)).ok());
  // The port is free again at once (no SO_REUSEPORT, but SO_REUSEADDR).
  auto restarted = StartTask(TaskType::kPs, 0);
  auto r = CheckCluster("30s");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->err << restarted->Log();
}

}  // namespace
}  // namespace testing
}  // namespace psc
