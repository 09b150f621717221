// Waiting for the cluster to come up: the chief probes every task, retrying
// with exponential backoff, until all answer or a deadline passes.
// Transport-free: probing goes through TaskProber, time through Clock.
#ifndef PSC_CHIEF_CLUSTER_WAITER_H_
#define PSC_CHIEF_CLUSTER_WAITER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/base/backoff.h"
#include "common/base/clock.h"
#include "common/cluster/cluster_config.h"

namespace psc {
namespace chief {

// Asks one task whether it is up. Must be thread-safe.
class TaskProber {
 public:
  virtual ~TaskProber() = default;
  // OK when `task` answers as what TF_CONFIG says it is, and accepts our
  // token. UNAVAILABLE, DEADLINE_EXCEEDED or CANCELLED: not up yet, worth
  // retrying. UNAUTHENTICATED, PERMISSION_DENIED, UNIMPLEMENTED or
  // FAILED_PRECONDITION (another task or kind of daemon at that address):
  // retrying will not help.
  virtual absl::Status Probe(const cluster::TaskAddress& task, absl::Duration timeout) = 0;
};

struct ClusterWaitOptions {
  absl::Duration timeout = absl::Seconds(60);       // the whole wait
  absl::Duration probe_timeout = absl::Seconds(2);  // one probe
  base::BackoffOptions backoff;
  // Polled between probes and during backoff; true stops the wait early.
  std::function<bool()> cancelled;
};

struct TaskWaitState {
  cluster::TaskAddress task;
  absl::Status status = absl::UnavailableError("not probed");
  int attempts = 0;
  absl::Duration answered_after;  // since the wait began, when status is OK
};

struct ClusterWaitResult {
  std::vector<TaskWaitState> tasks;
  absl::Duration elapsed;
  bool cancelled = false;

  bool all_ready() const;
  // OK when every task answered. Else DEADLINE_EXCEEDED (some did not answer
  // in time), FAILED_PRECONDITION (a task answered but cannot be used, e.g. a
  // wrong token) or CANCELLED, naming each missing task and its address.
  absl::Status ToStatus(absl::Duration timeout) const;
  // One line per task: name, address, and "ok" or what went wrong.
  std::string Table() const;
};

// Probes `tasks` until each answered, one failed permanently (the wait stops
// at once), or `timeout` passed. A task that answered is not probed again. Every task is probed at
// least once, even with a zero timeout.
ClusterWaitResult WaitForCluster(const std::vector<cluster::TaskAddress>& tasks, TaskProber& prober,
                                 base::Clock& clock, const ClusterWaitOptions& options);

// The tasks the chief waits for before training: every ps and worker.
std::vector<cluster::TaskAddress> TasksToWaitFor(const cluster::ClusterConfig& cluster);

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_CLUSTER_WAITER_H_
