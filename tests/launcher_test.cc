// Integration: `pscluster launch` runs a whole local cluster and returns the
// chief's status, leaving no process behind.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/summary/event_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<int> StartedPids(const std::string& out) {
  std::vector<int> pids;
  std::regex re(R"(\(pid (\d+)\))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    pids.push_back(std::stoi((*it)[1]));
  }
  return pids;
}

// The pids in every "<what> (pid N)" of `out`, in order.
std::vector<int> PidsOf(const std::string& out, const std::string& what) {
  std::vector<int> pids;
  std::regex re(what + R"( \(pid (\d+)\))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    pids.push_back(std::stoi((*it)[1]));
  }
  return pids;
}

int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Lines of `text` that start with `prefix` and contain `needle`.
int CountLines(const std::string& text, const std::string& prefix, const std::string& needle) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0 && line.find(needle) != std::string::npos) ++n;
  }
  return n;
}

// Polls the file at `path` until `done(content)` or `timeout`; returns
// whether it got there.
bool AwaitLog(const std::string& path, const std::function<bool(const std::string&)>& done,
              absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done(ReadFile(path))) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// Starts `pscluster launch --workers=1 <launch_flags>` with its output in
// `log`. The chief's own --tf_config (it wins over the launcher's TF_CONFIG)
// names tasks that never answer, so it keeps probing, and the launcher keeps
// running, while the test acts. The launcher dies with the returned object,
// and its tasks with it (PR_SET_PDEATHSIG).
std::unique_ptr<launcher::Subprocess> StartLauncherWithWaitingChief(
    const std::vector<std::string>& launch_flags, const std::string& log) {
  const std::string tf = R"({"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
                             "worker": ["127.0.0.1:3"]}, "task": {"type": "chief"}})";
  launcher::SubprocessOptions o;
  o.argv = {BinPath("pscluster"), "launch", "--workers=1"};
  o.argv.insert(o.argv.end(), launch_flags.begin(), launch_flags.end());
  for (const char* flag : {"--", "--check_cluster", "--startup_timeout=600s"})
    o.argv.push_back(flag);
  o.argv.push_back("--tf_config=" + tf);
  o.stdout_path = log;
  o.stderr_path = "=stdout";
  auto launcher = launcher::Subprocess::Spawn(o);
  return launcher.ok() ? *std::move(launcher) : nullptr;
}

// Whether ps:0 serves and worker:0 served `n` times.
std::function<bool(const std::string&)> Serving(int worker_times) {
  return [worker_times](const std::string& log) {
    return CountOf(log, "ps:0 serving on") >= 1 &&
           CountOf(log, "worker:0 serving on") >= worker_times;
  };
}

// SIGTERMs the launcher and checks that it exits 143 and that no process it
// ever started (restarts included) still runs.
void ExpectSigtermStopsEverything(launcher::Subprocess& launcher, const std::string& log) {
  launcher.Signal(SIGTERM);
  auto exit = launcher.Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.ok()) << ReadFile(log);
  const std::string out = ReadFile(log);
  EXPECT_EQ(exit->ToString(), "exit 143") << out;
  EXPECT_THAT(out, HasSubstr("[launcher] got SIGTERM; stopping the cluster"));
  for (int pid : StartedPids(out)) EXPECT_NE(kill(pid, 0), 0) << "pid " << pid << " still runs";
}

TEST(LauncherTest, LaunchesTheClusterAndTheChiefFindsIt) {
  // --check_cluster: the chief only finds the cluster and exits (without it,
  // it runs a whole training job).
  auto r = RunProgram({BinPath("pscluster"), "launch", "--ps=1", "--workers=2", "--",
                       "--check_cluster", "--startup_timeout=30s"},
                      {}, absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  EXPECT_THAT(r->out, HasSubstr("[chief:0] "));
  EXPECT_THAT(r->out, HasSubstr("cluster ready: 3 tasks answer"));
  EXPECT_THAT(r->out, HasSubstr("[ps:0] "));
  EXPECT_THAT(r->out, HasSubstr("[worker:1] "));
  EXPECT_THAT(r->out, HasSubstr("token required"));  // every task got the generated token
  // The workers share the cores by default (they oversubscribed them before).
  EXPECT_THAT(r->out, HasSubstr(absl::StrCat("[launcher] 2 workers share ",
                                             std::thread::hardware_concurrency(),
                                             " cores: --intra_op_threads=")));
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
  // The chief's own check (chief --check_job), before any task started.
  EXPECT_THAT(r->err, HasSubstr("chief: --startup_timeout must not be negative"));
  EXPECT_THAT(r->out, Not(HasSubstr("[launcher] started")));
}

TEST(LauncherTest, BadArgumentsExitTwo) {
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{BinPath("pscluster")},
        std::vector<std::string>{BinPath("pscluster"), "start"},
        std::vector<std::string>{BinPath("pscluster"), "launch", "--ps=0"},
        std::vector<std::string>{BinPath("pscluster"), "launch", "--workers=100"},
        std::vector<std::string>{BinPath("pscluster"), "launch", "--stop_grace=-2s"},
        std::vector<std::string>{BinPath("pscluster"), "launch", "--max_restarts=-1"},
        std::vector<std::string>{BinPath("pscluster"), "launch", "--token_file=/nonexistent"}}) {
    auto r = RunProgram(argv, {}, absl::Seconds(60));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.ToString(), "exit 2") << argv.back() << ": " << r->err;
    EXPECT_FALSE(r->err.empty());
  }
}

// The study's knobs: checked before any task starts, naming the flag.
TEST(LauncherTest, ExperimentKnobsAreCheckedBeforeAnythingStarts) {
  struct Case {
    std::vector<std::string> argv;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{BinPath("pscluster"), "launch", "--workers=3", "--straggler=3:2", "--", "--epochs=1"},
       "--straggler=3:2: there is no worker 3"},
      {{BinPath("pscluster"), "launch", "--straggler=1:0.5", "--", "--epochs=1"},
       "--straggler=1:0.5: the factor must be in [1, 1000]"},
      {{BinPath("pscluster"), "launch", "--workers=2", "--", "--replicas_to_aggregate=3"},
       "--replicas_to_aggregate=3 is more than the 2 workers"},
      {{BinPath("pscluster"), "launch", "--", "--replicas_to_aggregate=-1"},
       "--replicas_to_aggregate=-1: must be >= 0"},
      {{BinPath("pscluster"), "launch", "--", "--eval_every_steps=-5"},
       "--eval_every_steps=-5: must be >= 0"},
      {{BinPath("worker"), "--straggler_factor=0.5"},
       "--straggler_factor=0.5: must be in [1, 1000]"},
      // This issue's flags: each bad value exits 2 naming the flag.
      {{BinPath("pscluster"), "launch", "--", "--evaluator_wait=-1s"},
       "--evaluator_wait must not be negative"},
      {{BinPath("pscluster"), "health", "127.0.0.1:1", "--timeout=0s"},
       "--timeout must be positive"},
      {{BinPath("ps_server"), "--metrics_port=70000",
        "--tf_config={\"cluster\": {\"ps\": "
        "[\"127.0.0.1:1\"], \"worker\": [\"127.0.0.1:2\"]}, \"task\": {\"type\": \"ps\"}}"},
       "--metrics_port=70000: must be in [0, 65535]"},
      // --wire_dtype (issue 20): a bad name, and a strategy without ps tasks.
      {{BinPath("pscluster"), "launch", "--", "--wire_dtype=fp8"},
       "--wire_dtype=fp8: \"fp8\": expected float32, bfloat16 or float16"},
      {{BinPath("pscluster"), "launch", "--strategy=multi_worker_mirrored", "--",
        "--wire_dtype=bfloat16"},
       "--wire_dtype=bfloat16 is for --strategy=parameter_server"},
      {{BinPath("worker"), "--standalone", "--wire_dtype=float16"},
       "--standalone trains alone: --wire_dtype"},
      // --push_overlap and --bucket_bytes (issue 20).
      {{BinPath("pscluster"), "launch", "--strategy=multi_worker_mirrored", "--", "--push_overlap"},
       "--push_overlap is for --strategy=parameter_server"},
      {{BinPath("pscluster"), "launch", "--", "--push_overlap", "--bucket_bytes=-1"},
       "--bucket_bytes=-1: must be 0 (the default) to 1 GiB"},
      {{BinPath("worker"), "--standalone", "--push_overlap"},
       "--standalone trains alone: --push_overlap"},
      // --topk_ratio (issue 20): out of (0, 1), a strategy without ps tasks.
      {{BinPath("pscluster"), "launch", "--", "--topk_ratio=1"},
       "--topk_ratio=1: the fraction of each gradient's elements a push carries must be in (0, 1)"},
      {{BinPath("pscluster"), "launch", "--", "--topk_ratio=-0.5"}, "--topk_ratio=-0.5"},
      {{BinPath("pscluster"), "launch", "--strategy=mirrored", "--", "--topk_ratio=0.01"},
       "--topk_ratio=0.01 is for --strategy=parameter_server"},
      {{BinPath("worker"), "--standalone", "--topk_ratio=0.01"},
       "--standalone trains alone: --topk_ratio"},
  };
  for (const Case& c : cases) {
    auto r = RunProgram(c.argv, {}, absl::Seconds(60));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.ToString(), "exit 2") << c.message << ": " << r->err;
    EXPECT_THAT(r->err, HasSubstr(c.message));
    EXPECT_THAT(r->out + r->err, Not(HasSubstr("[ps:0]"))) << "a task was started";
  }
}

bool HaveFashionMnist();

// The launcher's own flags only: a daemon flag it would drop exits 2, and
// --dry_run prints the plan and the chief's job and starts no task.
TEST(LauncherTest, DaemonFlagsAreRefusedAndDryRunStartsNothing) {
  for (const char* flag :
       {"--bind=0.0.0.0", "--allow_insecure", "--tls_ca=/x.pem", "--metrics_port=9100"}) {
    auto r = RunProgram({BinPath("pscluster"), "launch", flag, "--", "--epochs=1"}, {},
                        absl::Seconds(60));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.ToString(), "exit 2") << flag;
    EXPECT_THAT(r->err, HasSubstr("is a daemon's flag that pscluster launch does not use"));
  }
  auto token = RunProgram({BinPath("pscluster"), "launch", "--token_file=/nonexistent"}, {},
                          absl::Seconds(60));
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(token->exit.ToString(), "exit 2");
  EXPECT_THAT(token->err, HasSubstr("--token_file=/nonexistent"));
  EXPECT_THAT(token->err, Not(HasSubstr("auth_token_file")));
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  auto plan =
      RunProgram({BinPath("pscluster"), "launch", "--dry_run", "--workers=2", "--", "--epochs=1"},
                 {}, absl::Seconds(60));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->exit.ToString(), "exit 0") << plan->err;
  for (const char* task : {"ps:0 at 127.0.0.1:", "worker:1 at 127.0.0.1:", "chief:0 at"}) {
    EXPECT_THAT(plan->out, HasSubstr(task));
  }
  EXPECT_THAT(plan->out, HasSubstr("TF_CONFIG={\"cluster\""));
  EXPECT_THAT(plan->out, HasSubstr("job ok: seed_cnn"));
  EXPECT_THAT(plan->out, Not(HasSubstr("[ps:0]"))) << "a task was started";
  EXPECT_THAT(plan->out, Not(HasSubstr("started ")));
}

// --help lists the launcher's flags, not the daemons' linked into it.
TEST(LauncherTest, HelpListsOnlyTheLaunchersFlags) {
  auto r = RunProgram({BinPath("pscluster"), "--help"}, {}, absl::Seconds(30));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->err;
  for (const char* own : {"--workers", "--evaluator_grace", "--metrics", "--straggler"}) {
    EXPECT_THAT(r->out, HasSubstr(own));
  }
  for (const char* daemon : {"--bind", "--allow_insecure", "--tf_config", "--shutdown_grace",
                             "--metrics_port", "--startup_timeout"}) {
    EXPECT_THAT(r->out, Not(HasSubstr(std::string(daemon) + " ("))) << daemon;
  }
}

// pscluster health: SERVING from a running daemon (exit 0); a port nobody
// serves is one line and exit 1 within the timeout; a bad address exit 2.
TEST(LauncherTest, HealthAsksTheDaemonsHealthService) {
  ClusterSpec spec(1, 1);
  const std::string dir = MakeTempDir("health");
  auto ps = Daemon::Start("ps_server", spec.TfConfig(cluster::TaskType::kPs, 0), {}, dir);
  ASSERT_TRUE(ps.ok()) << ps.status();
  const std::string address = spec.Address(cluster::TaskType::kPs, 0);
  auto up =
      RunProgram({BinPath("pscluster"), "health", address, "--timeout=30s"}, {}, absl::Seconds(60));
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(up->exit.ToString(), "exit 0") << up->err << (*ps)->Log();
  EXPECT_THAT(up->out, HasSubstr(address + ": SERVING"));
  (*ps)->process().Signal(SIGTERM);
  ASSERT_TRUE((*ps)->process().Wait(absl::Seconds(30)).ok());
  const std::string nobody = absl::StrCat("127.0.0.1:", PickFreePort());
  auto down =
      RunProgram({BinPath("pscluster"), "health", nobody, "--timeout=1s"}, {}, absl::Seconds(30));
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(down->exit.ToString(), "exit 1");
  EXPECT_THAT(down->err, HasSubstr("pscluster: " + nobody + ": "));
  EXPECT_EQ(CountOf(down->err, "\n"), 1) << down->err;
  auto bad = RunProgram({BinPath("pscluster"), "health", "no-port"}, {}, absl::Seconds(30));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit.ToString(), "exit 2") << bad->err;
}

TEST(LauncherTest, KilledLauncherLeavesNoOrphans) {
  const std::string dir = MakeTempDir("launcher");
  // The chief's own --tf_config (it wins over the launcher's TF_CONFIG) names
  // tasks that never answer, so it keeps probing while the test acts.
  const std::string tf = R"({"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
                             "worker": ["127.0.0.1:3"]}, "task": {"type": "chief"}})";
  launcher::SubprocessOptions o;
  o.argv = {BinPath("pscluster"),     "launch",           "--workers=1", "--", "--check_cluster",
            "--startup_timeout=600s", "--tf_config=" + tf};
  o.stdout_path = dir + "/out";
  o.stderr_path = "=stdout";
  auto launcher = launcher::Subprocess::Spawn(o);
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
  launcher::SubprocessOptions o;
  o.argv = {BinPath("pscluster"),     "launch",           "--workers=1", "--", "--check_cluster",
            "--startup_timeout=600s", "--tf_config=" + tf};
  o.stdout_path = dir + "/out";
  o.stderr_path = "=stdout";
  auto launcher = launcher::Subprocess::Spawn(o);
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

TEST(LauncherTest, NegativeMaxRestartsExitsTwoNamingTheFlag) {
  auto r = RunProgram({BinPath("pscluster"), "launch", "--restart_failed", "--max_restarts=-1"}, {},
                      absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 2") << r->err;
  EXPECT_THAT(r->err, HasSubstr("--max_restarts must not be negative"));
  EXPECT_THAT(r->out, Not(HasSubstr("started")));  // nothing was launched
}

TEST(LauncherTest, RestartFailedRestartsAKilledWorker) {
  const std::string log = MakeTempDir("launcher-restart") + "/out";
  auto launcher = StartLauncherWithWaitingChief({"--restart_failed"}, log);
  ASSERT_NE(launcher, nullptr);
  ASSERT_TRUE(AwaitLog(log, Serving(1), absl::Seconds(60))) << ReadFile(log);
  const std::vector<int> first = PidsOf(ReadFile(log), "started worker:0");
  ASSERT_EQ(first.size(), 1u) << ReadFile(log);
  ASSERT_EQ(kill(first[0], SIGKILL), 0);

  auto restarted = [](const std::string& out) {
    return !PidsOf(out, "restarted worker:0").empty() && Serving(2)(out);
  };
  ASSERT_TRUE(AwaitLog(log, restarted, absl::Seconds(60))) << ReadFile(log);
  const std::string out = ReadFile(log);
  const std::vector<int> second = PidsOf(out, "restarted worker:0");
  ASSERT_EQ(second.size(), 1u) << out;
  EXPECT_NE(second[0], first[0]);
  EXPECT_EQ(kill(second[0], 0), 0) << "the restarted worker is not running";
  EXPECT_THAT(out, HasSubstr("[launcher] worker:0 exited: killed by signal 9; restarting (1/3)"));
  // The new incarnation's output keeps the task's prefix.
  EXPECT_EQ(CountLines(out, "[worker:0] ", "worker:0 serving on"), 2) << out;
  EXPECT_EQ(launcher->Poll(), std::nullopt);

  ExpectSigtermStopsEverything(*launcher, log);
  // The final stop reaches the current incarnation.
  EXPECT_THAT(ReadFile(log), HasSubstr("[launcher] worker:0 stopped: exit 0"));
}

TEST(LauncherTest, WithoutRestartFailedAKilledWorkerStaysDown) {
  const std::string log = MakeTempDir("launcher-norestart") + "/out";
  auto launcher = StartLauncherWithWaitingChief({}, log);
  ASSERT_NE(launcher, nullptr);
  ASSERT_TRUE(AwaitLog(log, Serving(1), absl::Seconds(60))) << ReadFile(log);
  const std::vector<int> worker = PidsOf(ReadFile(log), "started worker:0");
  ASSERT_EQ(worker.size(), 1u) << ReadFile(log);
  ASSERT_EQ(kill(worker[0], SIGKILL), 0);

  // The exit line ends right after the reason: no restart is scheduled.
  auto exited = [](const std::string& out) {
    return out.find("[launcher] worker:0 exited: killed by signal 9\n") != std::string::npos;
  };
  ASSERT_TRUE(AwaitLog(log, exited, absl::Seconds(60))) << ReadFile(log);
  EXPECT_EQ(launcher->Poll(), std::nullopt) << "the launcher stopped with the worker";
  const std::vector<int> ps = PidsOf(ReadFile(log), "started ps:0");
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(kill(ps[0], 0), 0) << "ps:0 stopped with the worker";

  ExpectSigtermStopsEverything(*launcher, log);
  const std::string out = ReadFile(log);
  EXPECT_THAT(out, Not(HasSubstr("restart")));
  EXPECT_EQ(CountOf(out, "worker:0 serving on"), 1) << out;
  EXPECT_THAT(out, Not(HasSubstr("worker:0 stopped")));  // it was already down
}

TEST(LauncherTest, MaxRestartsExhaustedLeavesTheWorkerDown) {
  const std::string log = MakeTempDir("launcher-giveup") + "/out";
  auto launcher = StartLauncherWithWaitingChief({"--restart_failed", "--max_restarts=1"}, log);
  ASSERT_NE(launcher, nullptr);
  ASSERT_TRUE(AwaitLog(log, Serving(1), absl::Seconds(60))) << ReadFile(log);
  const std::vector<int> first = PidsOf(ReadFile(log), "started worker:0");
  ASSERT_EQ(first.size(), 1u) << ReadFile(log);
  ASSERT_EQ(kill(first[0], SIGKILL), 0);

  auto restarted = [](const std::string& out) {
    return !PidsOf(out, "restarted worker:0").empty() && Serving(2)(out);
  };
  ASSERT_TRUE(AwaitLog(log, restarted, absl::Seconds(60))) << ReadFile(log);
  const std::vector<int> second = PidsOf(ReadFile(log), "restarted worker:0");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_THAT(ReadFile(log),
              HasSubstr("[launcher] worker:0 exited: killed by signal 9; restarting (1/1)"));
  ASSERT_EQ(kill(second[0], SIGKILL), 0);

  auto given_up = [](const std::string& out) {
    return out.find(
               "[launcher] worker:0 exited: killed by signal 9; giving up after 1 "
               "restart(s)") != std::string::npos;
  };
  ASSERT_TRUE(AwaitLog(log, given_up, absl::Seconds(60))) << ReadFile(log);
  EXPECT_EQ(launcher->Poll(), std::nullopt) << "the launcher stopped with the worker";

  ExpectSigtermStopsEverything(*launcher, log);
  const std::string out = ReadFile(log);
  EXPECT_EQ(CountOf(out, "restarted worker:0"), 1) << out;
  EXPECT_EQ(CountOf(out, "worker:0 serving on"), 2) << out;
  EXPECT_THAT(out, Not(HasSubstr("worker:0 stopped")));  // it was already down
}

// The scalars of every event file in `dir`, as "tag@step".
std::vector<std::string> ScalarsIn(const std::string& dir) {
  std::vector<std::string> scalars;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().find("tfevents") == std::string::npos) continue;
    auto events = summary::ReadEventFile(it->path().string());
    EXPECT_TRUE(events.ok()) << events.status();
    if (!events.ok()) continue;
    for (const summary::ScalarEvent& e : events->scalars) {
      scalars.push_back(absl::StrCat(e.tag, "@", e.step));
    }
  }
  return scalars;
}

bool HaveFashionMnist() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

TEST(LauncherTest, TheEvaluatorEvaluatesTheFinalCheckpointAndTheLaunchEndsWithIt) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = MakeTempDir("launcher-evaluator");
  // 2 epochs of 5 steps, a checkpoint every 5: ckpt-5 and ckpt-10 (final).
  // --eval_out and --poll_interval are the evaluator's own flags, passed
  // with the chief's.
  auto r = RunProgram(
      {BinPath("pscluster"), "launch", "--workers=1", "--evaluator", "--", "--model=mlp",
       "--epochs=2", "--steps_per_epoch=5", "--max_train_examples=1280", "--intra_op_threads=1",
       "--checkpoint_dir=" + dir + "/ckpt", "--checkpoint_every_steps=5",
       "--logdir=" + dir + "/logs", "--eval_out=" + dir + "/eval.jsonl", "--poll_interval=100ms",
       "--startup_timeout=60s"},
      {}, absl::Seconds(150));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  EXPECT_THAT(r->out, HasSubstr("[launcher] started evaluator:0"));
  EXPECT_THAT(r->out, HasSubstr("[chief:0] test_loss: "));
  EXPECT_EQ(CountLines(r->out, "[evaluator:0] ", "evaluator: step 10 (1 shard): loss "), 1)
      << r->out;
  EXPECT_EQ(
      CountLines(r->out, "[evaluator:0] ", "evaluator: evaluated the final checkpoint (step 10)"),
      1)
      << r->out;
  EXPECT_THAT(r->out, HasSubstr("[launcher] evaluator:0 exited: exit 0"));
  EXPECT_THAT(r->out, Not(HasSubstr("evaluator:0 stopped")));
  // The chief waited for the evaluator's report of the final step (as it
  // must on Kubernetes, where the other pods go once it succeeds) before it
  // exited. (Not compared with the evaluator's own line: the evaluator
  // tells the chief before it logs, and the launcher reads the two tasks'
  // lines from two pipes, so their order in `out` is not fixed.)
  const size_t waited = r->out.find("chief: the evaluator evaluated step 10");
  ASSERT_NE(waited, std::string::npos) << r->out;
  EXPECT_LT(waited, r->out.find("[launcher] chief:0 exited")) << r->out;
  // The evaluator was started after the workers and before the chief.
  const size_t worker = r->out.find("started worker:0");
  const size_t evaluator = r->out.find("started evaluator:0");
  const size_t chief = r->out.find("started chief:0");
  EXPECT_LT(worker, evaluator);
  EXPECT_LT(evaluator, chief);

  // TensorBoard: the evaluator's run beside the chief's.
  const std::vector<std::string> scalars = ScalarsIn(dir + "/logs/eval");
  EXPECT_THAT(scalars, ::testing::Contains("evaluation/accuracy@10")) << r->out;
  EXPECT_THAT(scalars, ::testing::Contains("evaluation/loss@10"));
  EXPECT_THAT(ScalarsIn(dir + "/logs/validation"),
              ::testing::Contains("evaluation_accuracy_vs_iterations@10"));
  // One JSON line per evaluation, the last one of the final step.
  std::vector<nlohmann::json> lines;
  std::istringstream in(ReadFile(dir + "/eval.jsonl"));
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_FALSE(lines.empty()) << r->out;
  EXPECT_EQ(lines.back()["step"], 10);
  EXPECT_EQ(lines.back()["examples"], 5000);
  EXPECT_GT(lines.back()["accuracy"].get<double>(), 0.1);  // better than chance after 10 steps
  for (int pid : StartedPids(r->out)) EXPECT_NE(kill(pid, 0), 0) << "pid " << pid << " still runs";
}

// On a terminal (a pty from util-linux's script(1)) the chief's Keras bar
// is redrawn in place under the launcher: "\r[chief:0] Epoch ..." with no
// newline between redraws, while other tasks' lines still start lines.
TEST(LauncherTest, OnATerminalTheChiefsBarIsRedrawnInPlace) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (!std::filesystem::exists("/usr/bin/script")) GTEST_SKIP() << "no script(1)";
  const std::string dir = MakeTempDir("launch_pty");
  const std::string command = BinPath("pscluster") +
                              " launch --workers=1 -- --model=mlp --epochs=2 --steps_per_epoch=30 "
                              "--unit_steps=2 --max_train_examples=3840 --intra_op_threads=1";
  auto r =
      RunProgram({"/usr/bin/script", "-qec", command, dir + "/pty.out"}, {}, absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  const std::string pty = ReadFile(dir + "/pty.out");
  // Redraws of epoch 1 follow one another on one line, each after a \r.
  EXPECT_GE(CountOf(pty, "\r[chief:0] Epoch 1/2 "), 2) << pty;
  EXPECT_THAT(pty, HasSubstr("[==============================] - ETA: 0s")) << pty;
  // The epoch's last draw ends the line; the next epoch starts in place.
  EXPECT_THAT(pty, ::testing::ContainsRegex("val_accuracy: [0-9.]+\r?\n\r\\[chief:0\\] Epoch 2/2"));
  // Every other task's line starts a line of its own.
  EXPECT_EQ(CountOf(pty, "[worker:0]"), CountOf(pty, "\n[worker:0]")) << pty;
}

// `pscluster launch ... | grep -m1 ...`: the launcher's reader goes away
// once the cluster runs. It
// ignores SIGPIPE, sees the closed pipe, stops every task and exits: no
// process is left behind (every task has the test's token file on its
// command line, which is what is looked for).
TEST(LauncherTest, AClosedOutputPipeStopsTheClusterAndLeavesNoProcess) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = MakeTempDir("launch_pipe");
  const std::string token = dir + "/token";
  WriteFile(token, "0123456789abcdef0123456789abcdef0123456789abcdef\n");
  chmod(token.c_str(), 0600);
  const std::string command = BinPath("pscluster") + " launch --workers=1 --token_file=" + token +
                              " -- --epochs=50 --steps_per_epoch=400 | grep -m1 'cluster ready';"
                              " echo \"launcher=${PIPESTATUS[0]}\"";
  const absl::Time start = absl::Now();
  auto r = RunProgram({"/bin/bash", "-c", command}, {}, absl::Seconds(120));
  ASSERT_TRUE(r.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(90)) << "the launcher ran on without a reader";
  // The reader left once the cluster ran; the launcher stopped on the pipe.
  EXPECT_THAT(r->out, HasSubstr("cluster ready")) << r->err;
  EXPECT_THAT(r->out, HasSubstr("launcher=141")) << r->out << r->err;
  bool none = false;
  for (int i = 0; i < 300 && !none; ++i) {  // up to ~30 s for the tasks' SIGTERM
    auto left = RunProgram({"/usr/bin/pgrep", "-f", token}, {}, absl::Seconds(10));
    ASSERT_TRUE(left.ok());
    none = left->exit.ToString() == "exit 1";
    if (!none) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(none) << "a task outlived the launcher";
}

TEST(LauncherTest, AnEvaluatorThatDoesNotFinishIsStoppedAfterTheGrace) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = MakeTempDir("launcher-evaluator-grace");
  // --check_cluster: the chief only finds the cluster and exits 0; no
  // checkpoint ever comes, so the evaluator waits until it is stopped.
  auto r = RunProgram({BinPath("pscluster"), "launch", "--workers=1", "--evaluator",
                       "--evaluator_grace=1s", "--", "--check_cluster", "--startup_timeout=60s",
                       "--model=mlp", "--checkpoint_dir=" + dir + "/ckpt"},
                      {}, absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  EXPECT_THAT(r->out, HasSubstr("[launcher] waiting up to 1s for evaluator:0 to finish"));
  EXPECT_THAT(r->out, HasSubstr("[launcher] evaluator:0 did not finish within 1s; stopping it"));
  EXPECT_THAT(r->out, HasSubstr("[launcher] evaluator:0 stopped: exit 0"));
  for (int pid : StartedPids(r->out)) EXPECT_NE(kill(pid, 0), 0) << "pid " << pid << " still runs";
}

TEST(LauncherTest, EvaluatorWithoutACheckpointDirExitsTwo) {
  auto r = RunProgram({BinPath("pscluster"), "launch", "--evaluator", "--", "--epochs=1"}, {},
                      absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 2") << r->err;
  EXPECT_THAT(r->err, HasSubstr("--evaluator needs --checkpoint_dir in the chief flags"));
  EXPECT_THAT(r->out, Not(HasSubstr("started")));  // nothing was launched

  r = RunProgram({BinPath("pscluster"), "launch", "--evaluator", "--evaluator_grace=-1s", "--",
                  "--checkpoint_dir=/tmp/x"},
                 {}, absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 2") << r->err;
  EXPECT_THAT(r->err, HasSubstr("--evaluator_grace must not be negative"));
}

// The evaluator binary alone: its role under --dry_run, and exit 2 for a
// TF_CONFIG of another role or a bad flag.
TEST(EvaluatorBinaryTest, DryRunPrintsItsRoleAndBadFlagsExitTwo) {
  const std::string cluster = R"("cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
                                 "worker": ["127.0.0.1:3"], "evaluator": ["127.0.0.1:4"]})";
  const std::string evaluator = "{" + cluster + R"(, "task": {"type": "evaluator"}})";
  auto r = RunProgram({BinPath("evaluator"), "--dry_run"}, {{"TF_CONFIG", evaluator}},
                      absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->err;
  auto json = nlohmann::json::parse(r->out);
  EXPECT_EQ(json["task_type"], "evaluator");
  EXPECT_EQ(json["task_index"], 0);
  EXPECT_EQ(json["address"], "127.0.0.1:4");

  const std::string worker = "{" + cluster + R"(, "task": {"type": "worker"}})";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--checkpoint_dir=/tmp/x", "--tf_config=" + worker},
       "TF_CONFIG: task.type is \"worker\" but evaluator runs \"evaluator\" tasks"},
      {{"--model=mlp"}, "--checkpoint_dir is required"},
      {{"--checkpoint_dir=/tmp/x", "--poll_interval=0s"}, "--poll_interval=0: must be > 0"},
      {{"--checkpoint_dir=/tmp/x", "--batch_size=0"}, "--batch_size=0"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> argv = {BinPath("evaluator")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    r = RunProgram(argv, {}, absl::Seconds(60));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit.ToString(), "exit 2") << flags[0] << ": " << r->err;
    EXPECT_THAT(r->err, HasSubstr(message));
  }
}

}  // namespace
}  // namespace testing
}  // namespace psc
