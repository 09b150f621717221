// What a unit's failures with their workers alive call for. A push the
// servers refused for its values or shapes, or a diverged step
// (INVALID_ARGUMENT), is the job's own: redoing it from a checkpoint would
// meet it again, so the job ends at once with that status. Everything else
// is the servers' failure, FAILED_PRECONDITION included (a restarted
// server's "not configured yet", "restored: pull again", a worker's "a
// unit is already running"): the chief restores them and redoes the work
// (recovery.h). The sync step a refusal leaves unable to complete fails
// the other workers FAILED_PRECONDITION (ps_server/step_refusals.h), but
// the refusing worker's INVALID_ARGUMENT comes with it in the same unit.
//
// So is a worker's failure to read its streamed training files (a file
// missing, changed since it was counted, or a bad record: its message holds
// job::kStreamError).
//
// Pure; unit-tested without a cluster.
#ifndef PSC_CHIEF_UNIT_FAILURE_H_
#define PSC_CHIEF_UNIT_FAILURE_H_

#include <vector>

#include "absl/status/status.h"

namespace psc {
namespace chief {

// Of two failures of one unit, the one to report: the first that is not
// CANCELLED, else the second.
const absl::Status& MoreInformative(const absl::Status& first, const absl::Status& second);

// Of a unit's failures (of slots whose workers answer), the job's error: the
// first INVALID_ARGUMENT or data-file failure, whichever failure arrived
// first; OK when there is none.
absl::Status JobErrorOf(const std::vector<absl::Status>& failures);

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_UNIT_FAILURE_H_
