// Integration: `pscluster launch` runs a whole local cluster and returns the
// chief's status, leaving no process behind.
#include <signal.h>

#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;

std::vector<int> StartedPids(const std::string& out) {
  std::vector<int> pids;
  std::regex re(R"(\(pid (\d+)\))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    pids.push_back(std::stoi((*it)[1]));
  }
  return pids;
}

TEST(LauncherTest, LaunchesTheClusterAndTheChiefFindsIt) {
  auto r = RunProgram(
      {BinPath("pscluster"), "launch", "--ps=1", "--workers=2", "--", "--startup_timeout=30s"}, {},
      absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  EXPECT_THAT(r->out, HasSubstr("[chief:0] "));
  EXPECT_THAT(r->out, HasSubstr("cluster ready: 3 tasks answer"));
  EXPECT_THAT(r->out, HasSubstr("[ps:0] "));
  EXPECT_THAT(r->out, HasSubstr("[worker:1] "));
  EXPECT_THAT(r->out, HasSubstr("token required"));  // every task got the generated token
  EXPECT_THAT(r->out, HasSubstr("[launcher] chief:0 exited: exit 0"));
  EXPECT_THAT(r->out, HasSubstr("[launcher] worker:0 stopped: exit 0"));
  EXPECT_THAT(r->out, HasSubstr("[launcher] ps:0 stopped: exit 0"));
  // Each log line carries exactly one prefix.
  std::vector<int> pids = StartedPids(r->out);
  ASSERT_EQ(pids.size(), 4u) << r->out;
  for (int pid : pids) EXPECT_NE(kill(pid, 0), 0) << "pid " << pid << " outlived the launcher";
}

TEST(LauncherTest, ReturnsTheChiefsStatus) {
  auto r =
      RunProgram({BinPath("pscluster"), "launch", "--workers=1", "--", "--startup_timeout=-1s"}, {},
                 absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 2") << r->out;
  EXPECT_THAT(r->out, HasSubstr("[chief:0] chief: --startup_timeout must not be negative"));
}

TEST(LauncherTest, BadArgumentsExitTwo) {
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{BinPath("pscluster")},
        std::vector<std::string>{BinPath("pscluster"), "start"},
        std::vector<std::string>{BinPath("pscluster"), "launch", "--ps=0"},
        std::vector<std::string>{BinPath("pscluster"), "launch", "--workers=100"},
        std::vector<std::string>{BinPath("pscluster"), "launch", "--stop_grace=-2s"},
        std::vector<std::string>{BinPath("pscluster"), "launch", "--token_file=/nonexistent"}}) {
    auto r = RunProgram(argv, {}, absl::Seconds(60));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.ToString(), "exit 2") << argv.back() << ": " << r->err;
    EXPECT_FALSE(r->err.empty());
  }
}

TEST(LauncherTest, KilledLauncherLeavesNoOrphans) {
  const std::string dir = MakeTempDir("launcher");
  // The chief's own --tf_config (it wins over the launcher's TF_CONFIG) names
  // tasks that never answer, so it keeps probing while the test acts.
  const std::string tf = R"({"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
                             "worker": ["127.0.0.1:3"]}, "task": {"type": "chief"}})";
  SubprocessOptions o;
  o.argv = {BinPath("pscluster"),     "launch",           "--workers=1", "--", "--check_cluster",
            "--startup_timeout=600s", "--tf_config=" + tf};
  o.stdout_path = dir + "/out";
  o.stderr_path = "=stdout";
  auto launcher = Subprocess::Spawn(o);
  ASSERT_TRUE(launcher.ok());
  // Poll the log until the three tasks were started.
  std::vector<int> pids;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (pids.size() < 3 && absl::Now() < deadline) {
    pids = StartedPids(ReadFile(dir + "/out"));
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(pids.size(), 3u) << ReadFile(dir + "/out");
  (*launcher)->Signal(SIGKILL);
  ASSERT_TRUE((*launcher)->Wait(absl::Seconds(30)).ok());
  // The children get SIGTERM from the kernel (PR_SET_PDEATHSIG) and exit.
  for (int pid : pids) {
    const absl::Time until = absl::Now() + absl::Seconds(30);
    while (kill(pid, 0) == 0 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(20));
    EXPECT_NE(kill(pid, 0), 0) << "pid " << pid << " was orphaned";
  }
}

TEST(LauncherTest, SigtermStopsEveryTask) {
  const std::string dir = MakeTempDir("launcher-term");
  const std::string tf = R"({"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
                             "worker": ["127.0.0.1:3"]}, "task": {"type": "chief"}})";
  SubprocessOptions o;
  o.argv = {BinPath("pscluster"),     "launch",           "--workers=1", "--", "--check_cluster",
            "--startup_timeout=600s", "--tf_config=" + tf};
  o.stdout_path = dir + "/out";
  o.stderr_path = "=stdout";
  auto launcher = Subprocess::Spawn(o);
  ASSERT_TRUE(launcher.ok());
  // Poll the log until both servers serve (a daemon killed before it set up
  // its signal handling would die of the signal instead of exiting 0).
  std::vector<int> pids;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  auto serving = [&](const std::string& log) {
    return log.find("ps:0 serving on") != std::string::npos &&
           log.find("worker:0 serving on") != std::string::npos;
  };
  while (!serving(ReadFile(dir + "/out")) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  pids = StartedPids(ReadFile(dir + "/out"));
  ASSERT_EQ(pids.size(), 3u);
  (*launcher)->Signal(SIGTERM);
  auto exit = (*launcher)->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.ok());
  const std::string out = ReadFile(dir + "/out");
  EXPECT_EQ(exit->ToString(), "exit 143") << out;
  EXPECT_THAT(out, HasSubstr("[launcher] got SIGTERM; stopping the cluster"));
  EXPECT_THAT(out, HasSubstr("[launcher] worker:0 stopped: exit 0"));
  EXPECT_THAT(out, HasSubstr("[launcher] ps:0 stopped: exit 0"));
  for (int pid : pids) EXPECT_NE(kill(pid, 0), 0) << "pid " << pid << " still runs";
}

}  // namespace
}  // namespace testing
}  // namespace psc
