#include "worker/drain.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace psc {
namespace worker {

absl::Status Drain(CoordinatorClient* chief, int index, uint64_t incarnation,
                   const DrainOptions& options, base::Clock* clock) {
  proto::LeaveRequest request;
  request.mutable_task()->set_type("worker");
  request.mutable_task()->set_index(index);
  request.set_incarnation(incarnation);
  const absl::Time give_up = clock->Now() + options.timeout;
  absl::Status last = absl::OkStatus();
  int unanswered = 0;  // in a row
  for (;;) {
    absl::StatusOr<proto::LeaveResponse> r = chief->Leave(request);
    if (r.ok() && r->drained()) return absl::OkStatus();
    if (!r.ok() && (IsFinalRefusal(r.status()) || absl::IsNotFound(r.status()))) {
      return r.status();
    }
    // A chief that is gone (stopped with the cluster) runs no job to leave.
    unanswered = absl::IsUnavailable(r.status()) ? unanswered + 1 : 0;
    if (unanswered >= options.max_unanswered) return r.status();
    last = r.status();  // pending (OK), or a chief that does not answer now
    const absl::Time now = clock->Now();
    if (now >= give_up) {
      return absl::DeadlineExceededError(absl::StrCat(
          "worker:", index, " was not taken out of the job within --drain_timeout=",
          absl::FormatDuration(options.timeout),
          last.ok() ? " (its unit still runs)" : absl::StrCat(" (last: ", last.message(), ")")));
    }
    clock->SleepFor(std::min(options.poll, give_up - now));
  }
}

}  // namespace worker
}  // namespace psc
