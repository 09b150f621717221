#include "chief/cluster_waiter.h"

#include <map>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

using ::testing::HasSubstr;

// Answers per task name: UNAVAILABLE until the fake time reaches the task's
// start time, then `after` (OK by default). Records every probe.
class FakeProber : public TaskProber {
 public:
  explicit FakeProber(base::FakeClock* clock) : clock_(clock) {}
  void StartsAt(const std::string& task, absl::Time when, absl::Status after = absl::OkStatus()) {
    absl::MutexLock lock(&mu_);
    start_[task] = {when, after};
  }
  absl::Status Probe(const cluster::TaskAddress& task, absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    ++probes_[task.Name()];
    clock_->Advance(absl::Milliseconds(1));  // a refused connection takes a moment
    auto it = start_.find(task.Name());
    if (it == start_.end() || clock_->Now() < it->second.first) {
      return absl::UnavailableError("connection refused");
    }
    return it->second.second;
  }
  int probes(const std::string& task) {
    absl::MutexLock lock(&mu_);
    return probes_[task];
  }

 private:
  base::FakeClock* clock_;
  absl::Mutex mu_;
  std::map<std::string, std::pair<absl::Time, absl::Status>> start_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> probes_ ABSL_GUARDED_BY(mu_);
};

std::vector<cluster::TaskAddress> ThreeTasks() {
  return {{cluster::TaskType::kPs, 0, {"127.0.0.1", 5001}},
          {cluster::TaskType::kWorker, 0, {"127.0.0.1", 5002}},
          {cluster::TaskType::kWorker, 1, {"127.0.0.1", 5003}}};
}

ClusterWaitOptions Options(absl::Duration timeout) {
  ClusterWaitOptions o;
  o.timeout = timeout;
  o.backoff = {absl::Milliseconds(100), 2.0, absl::Seconds(1), 0.0};
  return o;
}

TEST(ClusterWaiterTest, AllUpAtOnce) {
  base::FakeClock clock;
  FakeProber prober(&clock);
  for (const auto& t : ThreeTasks()) prober.StartsAt(t.Name(), clock.Now());
  ClusterWaitResult r = WaitForCluster(ThreeTasks(), prober, clock, Options(absl::Seconds(5)));
  EXPECT_TRUE(r.all_ready());
  EXPECT_TRUE(r.ToStatus(absl::Seconds(5)).ok());
  EXPECT_EQ(prober.probes("worker:1"), 1);
  EXPECT_THAT(r.Table(), HasSubstr("worker:1     127.0.0.1:5003               ok"));
}

TEST(ClusterWaiterTest, LateTasksAreFoundWithBackoffAndAnsweredTasksAreNotReprobed) {
  base::FakeClock clock;
  FakeProber prober(&clock);
  const absl::Time t0 = clock.Now();
  prober.StartsAt("ps:0", t0);
  prober.StartsAt("worker:0", t0 + absl::Seconds(1));
  prober.StartsAt("worker:1", t0 + absl::Seconds(3));
  ClusterWaitResult r = WaitForCluster(ThreeTasks(), prober, clock, Options(absl::Seconds(10)));
  ASSERT_TRUE(r.all_ready()) << r.Table();
  EXPECT_EQ(prober.probes("ps:0"), 1);
  // Backoff 0.1, 0.2, 0.4, 0.8, 1, 1...: a handful of probes, not hundreds.
  EXPECT_GE(prober.probes("worker:1"), 4);
  EXPECT_LE(prober.probes("worker:1"), 8);
  EXPECT_GE(r.tasks[2].answered_after, absl::Seconds(3));
  EXPECT_LT(r.elapsed, absl::Seconds(5));
}

TEST(ClusterWaiterTest, MissingTaskAtTheDeadlineIsNamedWithItsAddress) {
  base::FakeClock clock;
  FakeProber prober(&clock);
  prober.StartsAt("ps:0", clock.Now());
  prober.StartsAt("worker:0", clock.Now());
  ClusterWaitResult r = WaitForCluster(ThreeTasks(), prober, clock, Options(absl::Seconds(5)));
  EXPECT_FALSE(r.all_ready());
  EXPECT_GE(r.elapsed, absl::Seconds(5));
  EXPECT_LT(r.elapsed, absl::Seconds(6));
  absl::Status s = r.ToStatus(absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("1 of 3 tasks did not answer within 5s"));
  EXPECT_THAT(s.message(),
              HasSubstr("worker:1 at 127.0.0.1:5003 (UNAVAILABLE: connection refused)"));
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("worker:0")));
  EXPECT_THAT(r.Table(), HasSubstr("MISSING UNAVAILABLE"));
}

TEST(ClusterWaiterTest, PermanentErrorsStopProbingThatTaskAtOnce) {
  base::FakeClock clock;
  FakeProber prober(&clock);
  prober.StartsAt("ps:0", clock.Now());
  prober.StartsAt("worker:0", clock.Now(), absl::UnauthenticatedError("wrong cluster token"));
  // worker:1 never answers: the wait still ends at once, since it cannot succeed.
  ClusterWaitResult r = WaitForCluster(ThreeTasks(), prober, clock, Options(absl::Seconds(30)));
  EXPECT_EQ(prober.probes("worker:0"), 1);
  EXPECT_LT(r.elapsed, absl::Seconds(1));
  absl::Status s = r.ToStatus(absl::Seconds(30));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("worker:0 at 127.0.0.1:5002 (UNAUTHENTICATED: wrong cluster token)"));
  EXPECT_THAT(r.Table(), HasSubstr("UNUSABLE UNAUTHENTICATED"));
}

TEST(ClusterWaiterTest, ZeroTimeoutStillProbesEveryTaskOnce) {
  base::FakeClock clock;
  FakeProber prober(&clock);
  ClusterWaitResult r = WaitForCluster(ThreeTasks(), prober, clock, Options(absl::ZeroDuration()));
  for (const auto& t : ThreeTasks()) EXPECT_EQ(prober.probes(t.Name()), 1);
  EXPECT_FALSE(r.all_ready());
}

TEST(ClusterWaiterTest, CancellationStopsTheWait) {
  base::FakeClock clock;
  FakeProber prober(&clock);
  const absl::Time stop_at = clock.Now() + absl::Seconds(2);
  ClusterWaitOptions o = Options(absl::Seconds(60));
  o.cancelled = [&] { return clock.Now() >= stop_at; };
  ClusterWaitResult r = WaitForCluster(ThreeTasks(), prober, clock, o);
  EXPECT_TRUE(r.cancelled);
  EXPECT_LT(r.elapsed, absl::Seconds(3));
  EXPECT_EQ(r.ToStatus(absl::Seconds(60)).code(), absl::StatusCode::kCancelled);
}

TEST(ClusterWaiterTest, WaitsForEveryPsAndWorkerButNotChiefOrEvaluator) {
  auto c = cluster::ClusterConfig::Parse(R"({"cluster": {"chief": ["c:1"], "evaluator": ["e:1"],
      "worker": ["w0:1", "w1:1"], "ps": ["p0:1", "p1:1"]}, "task": {"type": "chief"}})");
  ASSERT_TRUE(c.ok());
  std::vector<std::string> names;
  for (const auto& t : TasksToWaitFor(*c)) names.push_back(t.Name());
  EXPECT_THAT(names, ::testing::ElementsAre("ps:0", "ps:1", "worker:0", "worker:1"));
}

}  // namespace
}  // namespace chief
}  // namespace psc
