#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/launch_plan.h"
#include "launcher/line_prefixer.h"
#include "launcher/local_cluster.h"
#include "launcher/restart_policy.h"
#include "launcher/task_process.h"

namespace psc {
namespace launcher {
namespace {

TEST(LaunchPlanTest, EveryTaskGetsAValidTfConfigAndItsOwnPort) {
  auto plan = PlanLocalCluster({2, 3}, [](int n) -> absl::StatusOr<std::vector<int>> {
    std::vector<int> ports;
    for (int i = 0; i < n; ++i) ports.push_back(20000 + i);
    return ports;
  });
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 6u);
  std::vector<std::string> names;
  for (const PlannedTask& t : *plan) {
    names.push_back(t.Name());
    auto c = cluster::ClusterConfig::Parse(t.tf_config);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->task_type(), t.type);
    EXPECT_EQ(c->task_index(), t.index);
    EXPECT_EQ(c->self().address.ToString(), t.address);
    EXPECT_EQ(c->num_tasks(cluster::TaskType::kPs), 2);
    EXPECT_EQ(c->num_tasks(cluster::TaskType::kWorker), 3);
    EXPECT_TRUE(c->ValidateForTraining().ok());
  }
  EXPECT_THAT(
      names, ::testing::ElementsAre("ps:0", "ps:1", "worker:0", "worker:1", "worker:2", "chief:0"));
  EXPECT_EQ((*plan)[0].binary, "ps_server");
  EXPECT_EQ((*plan)[5].binary, "chief");
}

TEST(LaunchPlanTest, ACollectivePlanHasNoPs) {
  int next = 30000;
  auto port = [&next](int n) -> absl::StatusOr<std::vector<int>> {
    std::vector<int> p;
    for (int i = 0; i < n; ++i) p.push_back(next++);
    return p;
  };
  LaunchOptions o;
  o.num_ps = 0;
  o.num_workers = 3;
  o.collective = true;
  auto plan = PlanLocalCluster(o, port);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> names;
  for (const PlannedTask& t : *plan) {
    names.push_back(t.Name());
    auto c = cluster::ClusterConfig::Parse(t.tf_config);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(c->ValidateForTraining(cluster::ClusterConfig::Layout::kCollective).ok());
  }
  EXPECT_THAT(names, ::testing::ElementsAre("worker:0", "worker:1", "worker:2", "chief:0"));
  o.num_ps = 1;
  EXPECT_EQ(PlanLocalCluster(o, port).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LaunchPlanTest, RejectsBadCountsAndRepeatedPorts) {
  auto port = [](int n) -> absl::StatusOr<std::vector<int>> { return std::vector<int>(n, 20000); };
  EXPECT_EQ(PlanLocalCluster({0, 2}, port).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanLocalCluster({1, 0}, port).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanLocalCluster({1, 65}, port).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanLocalCluster({1, 1}, port).status().code(), absl::StatusCode::kInternal);
  auto failing = [](int) -> absl::StatusOr<std::vector<int>> {
    return absl::InternalError("no ports");
  };
  EXPECT_EQ(PlanLocalCluster({1, 1}, failing).status().message(), "no ports");
}

std::vector<int> Ports(int n) {
  std::vector<int> ports;
  for (int i = 0; i < n; ++i) ports.push_back(21000 + i);
  return ports;
}

TEST(LaunchPlanTest, TheEvaluatorStartsAfterTheWorkersAndEveryTaskKnowsIt) {
  LaunchOptions options;
  options.num_ps = 1;
  options.num_workers = 2;
  options.evaluator = true;
  auto plan =
      PlanLocalCluster(options, [](int n) -> absl::StatusOr<std::vector<int>> { return Ports(n); });
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> names;
  for (const PlannedTask& t : *plan) {
    names.push_back(t.Name());
    auto c = cluster::ClusterConfig::Parse(t.tf_config);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->task_type(), t.type);
    EXPECT_EQ(c->self().address.ToString(), t.address);
    ASSERT_EQ(c->num_tasks(cluster::TaskType::kEvaluator), 1);
    EXPECT_EQ(c->tasks(cluster::TaskType::kEvaluator)[0].address.ToString(), "127.0.0.1:21003");
    EXPECT_TRUE(c->ValidateForTraining().ok());
  }
  EXPECT_THAT(names,
              ::testing::ElementsAre("ps:0", "worker:0", "worker:1", "evaluator:0", "chief:0"));
  EXPECT_EQ((*plan)[3].binary, "evaluator");
  EXPECT_EQ((*plan)[3].address, "127.0.0.1:21003");
  EXPECT_EQ((*plan)[4].address, "127.0.0.1:21004");

  // Without it, no task lists one.
  options.evaluator = false;
  plan =
      PlanLocalCluster(options, [](int n) -> absl::StatusOr<std::vector<int>> { return Ports(n); });
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 4u);
  EXPECT_EQ(
      cluster::ClusterConfig::Parse((*plan)[0].tf_config)->num_tasks(cluster::TaskType::kEvaluator),
      0);
}

TEST(TaskArgvTest, TheEvaluatorGetsTheChiefFlagsButNotItsTfConfig) {
  RunOptions options;
  options.bin_dir = "/opt/bin";
  options.daemon_flags = {"--auth_token_file=/t"};
  options.chief_flags = {"--model=mlp", "--tf_config={}", "--checkpoint_dir=/c",
                         "--checkpoint_every_steps=5"};
  const PlannedTask ps{cluster::TaskType::kPs, 0, "127.0.0.1:1", "ps_server", "{}"};
  const PlannedTask evaluator{cluster::TaskType::kEvaluator, 0, "127.0.0.1:2", "evaluator", "{}"};
  const PlannedTask chief{cluster::TaskType::kChief, 0, "127.0.0.1:3", "chief", "{}"};
  EXPECT_THAT(TaskArgv(ps, options, true),
              ::testing::ElementsAre("/opt/bin/ps_server", "--auth_token_file=/t"));
  EXPECT_THAT(TaskArgv(evaluator, options, true),
              ::testing::ElementsAre("/opt/bin/evaluator", "--auth_token_file=/t",
                                     std::string("--undefok=") + kChiefOnlyFlags, "--model=mlp",
                                     "--checkpoint_dir=/c", "--checkpoint_every_steps=5"));
  EXPECT_THAT(
      TaskArgv(chief, options, true),
      ::testing::ElementsAre("/opt/bin/chief", "--auth_token_file=/t",
                             "--undefok=eval_out,poll_interval", "--model=mlp", "--tf_config={}",
                             "--checkpoint_dir=/c", "--checkpoint_every_steps=5"));
  // Without an evaluator the chief's command line is exactly its flags.
  EXPECT_THAT(TaskArgv(chief, options, false),
              ::testing::ElementsAre("/opt/bin/chief", "--auth_token_file=/t", "--model=mlp",
                                     "--tf_config={}", "--checkpoint_dir=/c",
                                     "--checkpoint_every_steps=5"));
  EXPECT_THAT(std::string(kChiefOnlyFlags), ::testing::HasSubstr("check_cluster"));
  EXPECT_THAT(std::string(kChiefOnlyFlags), ::testing::HasSubstr("startup_timeout"));
}

TEST(LinePrefixerTest, EmitsWholeLinesOnly) {
  std::vector<std::string> out;
  LinePrefixer p("[worker:0] ", [&](const std::string& s) { out.push_back(s); });
  p.Feed("hel");
  EXPECT_TRUE(out.empty());
  p.Feed("lo\nwor");
  p.Feed("ld\n\nlast");
  p.Flush();
  p.Flush();
  EXPECT_THAT(out, ::testing::ElementsAre("[worker:0] hello\n", "[worker:0] world\n",
                                          "[worker:0] \n", "[worker:0] last\n"));
}

TEST(LinePrefixerTest, InPlaceRedrawsAreEmittedAtOnceWithTheirCarriageReturn) {
  std::vector<std::string> out;
  LinePrefixer p(
      "[chief:0] ", [&](const std::string& s) { out.push_back(s); }, true);
  p.Feed("cluster ready\n\rEpoch 1/2 1/9 [=");
  p.Feed("==]");
  p.Feed("\rEpoch 1/2 9/9 [====] - val\n");
  EXPECT_THAT(
      out, ::testing::ElementsAre("[chief:0] cluster ready\n",
                                  "\r[chief:0] Epoch 1/2 1/9 [=", "\r[chief:0] Epoch 1/2 1/9 [===]",
                                  "\r[chief:0] Epoch 1/2 9/9 [====] - val\n"));
  // Not in place: a carriage return is an ordinary byte of the line.
  std::vector<std::string> plain;
  LinePrefixer q("[chief:0] ", [&](const std::string& s) { plain.push_back(s); });
  q.Feed("\rbar\rbar2\n");
  EXPECT_THAT(plain, ::testing::ElementsAre("[chief:0] \rbar\rbar2\n"));
}

ExitInfo Exited(int code) { return ExitInfo{true, code, 0}; }
ExitInfo Killed(int sig) { return ExitInfo{false, 0, sig}; }

TEST(RestartPolicyTest, RestartsOnlyFailedServersAndWorkersWithRestartsLeft) {
  const RestartPolicy on{true, 2};
  EXPECT_EQ(DecideOnExit(cluster::TaskType::kWorker, Killed(9), on, 0), ExitAction::kRestart);
  EXPECT_EQ(DecideOnExit(cluster::TaskType::kPs, Exited(1), on, 1), ExitAction::kRestart);
  EXPECT_EQ(DecideOnExit(cluster::TaskType::kWorker, Killed(9), on, 2), ExitAction::kGiveUp);
  // A clean exit (e.g. after a Shutdown RPC) is not a failure.
  EXPECT_EQ(DecideOnExit(cluster::TaskType::kWorker, Exited(0), on, 0), ExitAction::kLeaveDown);
  // The chief's exit ends the run.
  EXPECT_EQ(DecideOnExit(cluster::TaskType::kChief, Killed(9), on, 0), ExitAction::kLeaveDown);
  // Restarts off: every exit is only logged.
  EXPECT_EQ(DecideOnExit(cluster::TaskType::kWorker, Killed(9), RestartPolicy{false, 3}, 0),
            ExitAction::kLeaveDown);
  // The evaluator is restarted like a worker; when done, it exits 0 and stays down.
  EXPECT_EQ(DecideOnExit(cluster::TaskType::kEvaluator, Exited(1), on, 0), ExitAction::kRestart);
  EXPECT_EQ(DecideOnExit(cluster::TaskType::kEvaluator, Exited(0), on, 0), ExitAction::kLeaveDown);
  // No restarts allowed: the first failure gives up.
  EXPECT_EQ(DecideOnExit(cluster::TaskType::kPs, Exited(2), RestartPolicy{true, 0}, 0),
            ExitAction::kGiveUp);
}

TEST(RestartPolicyTest, DescribesTheExitAndTheDecision) {
  const RestartPolicy on{true, 3};
  EXPECT_EQ(DescribeExit("worker:1", Killed(9), ExitAction::kRestart, on, 0),
            "worker:1 exited: killed by signal 9; restarting (1/3)");
  EXPECT_EQ(DescribeExit("ps:0", Exited(1), ExitAction::kGiveUp, on, 3),
            "ps:0 exited: exit 1; giving up after 3 restart(s)");
  EXPECT_EQ(DescribeExit("worker:0", Exited(0), ExitAction::kLeaveDown, on, 0),
            "worker:0 exited: exit 0");
}

// Collects lines from reader threads. Thread-safe.
class Lines {
 public:
  void Add(const std::string& line) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    lines_.push_back(line);
  }
  std::vector<std::string> Get() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return lines_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

// Polls until the current incarnation of `p` ended, for at most `timeout`.
std::optional<ExitInfo> AwaitExit(TaskProcess& p, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (auto info = p.Poll()) return info;
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

// Polls until `lines` holds at least `n` lines, for at most `timeout`.
bool AwaitLines(Lines& lines, size_t n, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (lines.Get().size() < n) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

PlannedTask ShellTask() {
  return PlannedTask{cluster::TaskType::kWorker, 1, "127.0.0.1:1", "sh", "{}"};
}

TEST(TaskProcessTest, RestartGivesANewIncarnationWithTheSamePrefix) {
  const PlannedTask task = ShellTask();
  Lines lines;
  TaskProcess p(task, {"/bin/sh", "-c", "echo \"up $TF_CONFIG\"; exit 3"},
                [&lines](const std::string& l) { lines.Add(l); });
  EXPECT_EQ(p.pid(), 0);
  EXPECT_FALSE(p.Poll().has_value());
  for (int i = 1; i <= 2; ++i) {
    ASSERT_TRUE(p.Start().ok());
    EXPECT_EQ(p.starts(), i);
    EXPECT_GT(p.pid(), 0);
    auto exit = AwaitExit(p, absl::Seconds(30));
    ASSERT_TRUE(exit.has_value());
    EXPECT_EQ(exit->ToString(), "exit 3");
    EXPECT_EQ(p.Stop(absl::Seconds(30)).ToString(), "exit 3");  // already ended
  }
  p.JoinReaders();
  EXPECT_THAT(lines.Get(), ::testing::ElementsAre("[worker:1] up {}\n", "[worker:1] up {}\n"));
  p.JoinReaders();  // idempotent
}

TEST(TaskProcessTest, StartWhileRunningIsAPreconditionFailure) {
  const PlannedTask task = ShellTask();
  Lines lines;
  TaskProcess p(task, {"/bin/sh", "-c", "echo up; exec sleep 600"},
                [&lines](const std::string& l) { lines.Add(l); });
  ASSERT_TRUE(p.Start().ok());
  const pid_t first = p.pid();
  EXPECT_EQ(p.Start().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.pid(), first);
  ASSERT_TRUE(AwaitLines(lines, 1, absl::Seconds(30)));
  p.Signal(SIGKILL);
  auto exit = AwaitExit(p, absl::Seconds(30));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->ToString(), "killed by signal 9");
  // Killed: the next incarnation is a new process with a fresh reader.
  ASSERT_TRUE(p.Start().ok());
  EXPECT_NE(p.pid(), first);
  EXPECT_FALSE(p.Poll().has_value());
  ASSERT_TRUE(AwaitLines(lines, 2, absl::Seconds(30)));
  EXPECT_EQ(p.Stop(absl::Seconds(30)).ToString(), "killed by signal 15");
  p.JoinReaders();
  EXPECT_THAT(lines.Get(), ::testing::ElementsAre("[worker:1] up\n", "[worker:1] up\n"));
}

TEST(TaskProcessTest, AMissingBinaryIsInternalAndStartsNothing) {
  const PlannedTask task = ShellTask();
  TaskProcess p(task, {"/nonexistent/worker"}, [](const std::string&) {});
  EXPECT_EQ(p.Start().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(p.starts(), 0);
  EXPECT_EQ(p.pid(), 0);
}

TEST(TaskProcessTest, DestructorKillsTheRunningIncarnation) {
  const PlannedTask task = ShellTask();
  pid_t pid = 0;
  {
    TaskProcess p(task, {"/bin/sh", "-c", "exec sleep 600"}, [](const std::string&) {});
    ASSERT_TRUE(p.Start().ok());
    pid = p.pid();
  }
  EXPECT_NE(kill(pid, 0), 0) << "pid " << pid << " outlived its TaskProcess";
}

TEST(SharedIntraOpThreadsTest, TheCoresAreSharedAmongTheWorkers) {
  EXPECT_EQ(SharedIntraOpThreads(2, 2), 1);
  EXPECT_EQ(SharedIntraOpThreads(16, 4), 4);
  EXPECT_EQ(SharedIntraOpThreads(16, 3), 5);
  EXPECT_EQ(SharedIntraOpThreads(2, 8), 1);
  EXPECT_EQ(SharedIntraOpThreads(0, 2), 1);
}

}  // namespace
}  // namespace launcher
}  // namespace psc
