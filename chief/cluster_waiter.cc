#include "chief/cluster_waiter.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace psc {
namespace chief {
namespace {

bool IsRetryable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsCancelled(s) ||
         absl::IsUnknown(s) || absl::IsResourceExhausted(s);
}

std::string StatusText(const absl::Status& s) {
  return absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message());
}

}  // namespace

bool ClusterWaitResult::all_ready() const {
  return std::all_of(tasks.begin(), tasks.end(),
                     [](const TaskWaitState& t) { return t.status.ok(); });
}

absl::Status ClusterWaitResult::ToStatus(absl::Duration timeout) const {
  if (all_ready()) return absl::OkStatus();
  std::vector<std::string> missing;
  bool permanent = false;
  for (const TaskWaitState& t : tasks) {
    if (t.status.ok()) continue;
    permanent = permanent || !IsRetryable(t.status);
    missing.push_back(absl::StrCat(t.task.Name(), " at ", t.task.address.ToString(), " (",
                                   StatusText(t.status), ")"));
  }
  const int ready = static_cast<int>(tasks.size() - missing.size());
  const std::string head =
      absl::StrCat(missing.size(), " of ", tasks.size(), " task", tasks.size() == 1 ? "" : "s");
  std::string list = absl::StrJoin(missing, "; ");
  if (cancelled) {
    return absl::CancelledError(
        absl::StrCat("stopped waiting for the cluster after ",
                     absl::FormatDuration(absl::Trunc(elapsed, absl::Milliseconds(1))), " (", ready,
                     " ready); missing: ", list));
  }
  if (permanent) {
    return absl::FailedPreconditionError(absl::StrCat(head, " cannot be used: ", list));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(head, " did not answer within ", absl::FormatDuration(timeout), ": ", list));
}

std::string ClusterWaitResult::Table() const {
  std::string out = absl::StrFormat("%-12s %-28s %s\n", "TASK", "ADDRESS", "STATUS");
  for (const TaskWaitState& t : tasks) {
    std::string status =
        t.status.ok()
            ? absl::StrFormat(
                  "ok (after %s, %d probe%s)",
                  absl::FormatDuration(absl::Trunc(t.answered_after, absl::Milliseconds(1))),
                  t.attempts, t.attempts == 1 ? "" : "s")
            : absl::StrCat(IsRetryable(t.status) ? "MISSING " : "UNUSABLE ", StatusText(t.status));
    absl::StrAppendFormat(&out, "%-12s %-28s %s\n", t.task.Name(), t.task.address.ToString(),
                          status);
  }
  return out;
}

ClusterWaitResult WaitForCluster(const std::vector<cluster::TaskAddress>& tasks, TaskProber& prober,
                                 base::Clock& clock, const ClusterWaitOptions& options) {
  ClusterWaitResult result;
  for (const cluster::TaskAddress& t : tasks) result.tasks.push_back({t});
  const absl::Time start = clock.Now();
  const absl::Time deadline = start + options.timeout;
  auto cancelled = [&] { return options.cancelled && options.cancelled(); };
  base::Backoff backoff(options.backoff);
  for (;;) {
    // One round: probe, in parallel, every task that has not answered and may still.
    std::vector<TaskWaitState*> round;
    for (TaskWaitState& t : result.tasks) {
      if (t.status.ok() || (t.attempts > 0 && !IsRetryable(t.status))) continue;
      round.push_back(&t);
    }
    const absl::Duration left = std::max(deadline - clock.Now(), absl::Milliseconds(100));
    const absl::Duration probe_timeout = std::min(options.probe_timeout, left);
    std::vector<std::thread> probes;
    for (TaskWaitState* t : round) {
      probes.emplace_back([&, t] {
        t->status = prober.Probe(t->task, probe_timeout);
        ++t->attempts;
        if (t->status.ok()) t->answered_after = clock.Now() - start;
      });
    }
    for (std::thread& p : probes) p.join();
    bool pending = false, unusable = false;
    for (const TaskWaitState* t : round) {
      pending = pending || (!t->status.ok() && IsRetryable(t->status));
      unusable = unusable || (!t->status.ok() && !IsRetryable(t->status));
    }
    // A task that cannot be used dooms the wait: say so now, not at the deadline.
    if (result.cancelled || !pending || unusable) break;
    if (cancelled()) {
      result.cancelled = true;
      break;
    }
    if (clock.Now() >= deadline) break;
    // Back off, in short slices so that cancellation is noticed quickly; the
    // last round runs at the deadline itself.
    const absl::Time wake = std::min(deadline, clock.Now() + backoff.Next());
    while (clock.Now() < wake && !cancelled()) {
      clock.SleepFor(std::min(wake - clock.Now(), absl::Milliseconds(50)));
    }
    if (cancelled()) {
      result.cancelled = true;
      break;
    }
  }
  result.elapsed = clock.Now() - start;
  return result;
}

std::vector<cluster::TaskAddress> TasksToWaitFor(const cluster::ClusterConfig& cluster) {
  std::vector<cluster::TaskAddress> out;
  for (cluster::TaskType type : {cluster::TaskType::kPs, cluster::TaskType::kWorker}) {
    for (const cluster::TaskAddress& t : cluster.tasks(type)) out.push_back(t);
  }
  return out;
}

}  // namespace chief
}  // namespace psc
