// What a unit's failure with its worker alive calls for. A refused push
// (a non-finite gradient, a wrong shape), a diverged step or a sync step
// that can no longer complete is the job's own: redoing it from a
// checkpoint would meet it again, so the job ends at once with that
// status. Anything else (a server that restarted, does not answer, or
// timed out) is the servers' failure: the chief restores them and redoes
// the work (recovery.h).
//
// Pure; unit-tested without a cluster.
#ifndef PSC_CHIEF_UNIT_FAILURE_H_
#define PSC_CHIEF_UNIT_FAILURE_H_

#include "absl/status/status.h"

namespace psc {
namespace chief {

enum class UnitFailure { kJob, kServers };

// `failure` of a unit whose worker answers. `servers_answer`: every server
// answers, configured (none restarted). INVALID_ARGUMENT is always the
// job's; FAILED_PRECONDITION is the job's while every server answers (a
// restarted server's "not configured yet" or "restored: pull again" is
// FAILED_PRECONDITION too); everything else is the servers'.
// `collective`: multi_worker_mirrored, where FAILED_PRECONDITION (a
// replica at another step) is regrouped: only INVALID_ARGUMENT is the
// job's.
UnitFailure ClassifyUnitFailure(const absl::Status& failure, bool servers_answer,
                                bool collective);

// Of two failures of one unit, the one to report: the first that is not
// CANCELLED (the chief cancels the others' units after a job error), else
// the second.
const absl::Status& MoreInformative(const absl::Status& first, const absl::Status& second);

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_UNIT_FAILURE_H_
