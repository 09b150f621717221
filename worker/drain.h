// A worker leaves a running job drained (docs/guide/membership.md): asked
// to stop (SIGTERM) while the chief runs its job, it asks the chief's
// Coordinator to leave (Leave), goes on serving the unit it runs, and polls
// until the chief answers that it is out of the job (it took it out at
// the end of the unit); the worker then exits 0.
#ifndef PSC_WORKER_DRAIN_H_
#define PSC_WORKER_DRAIN_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "worker/heartbeat.h"

namespace psc {
namespace worker {

struct DrainOptions {
  absl::Duration timeout = absl::Minutes(1);  // --drain_timeout
  absl::Duration poll = absl::Milliseconds(200);
  // UNAVAILABLE this many times in a row: the chief is gone (returned).
  int max_unanswered = 5;
};

// Leaves the job as worker:`index` of `incarnation`. OK once the chief
// took it out (or the job ended); the chief's refusal (FAILED_PRECONDITION:
// the last worker, or sync where the others would not split the batch;
// NOT_FOUND: the chief does not know this worker, so no unit of it runs);
// UNAVAILABLE when the chief does not answer max_unanswered times in a row;
// DEADLINE_EXCEEDED after options.timeout without an answer, naming the
// last error.
absl::Status Drain(CoordinatorClient* chief, int index, uint64_t incarnation,
                   const DrainOptions& options, base::Clock* clock);

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_DRAIN_H_
