// The launcher's experiment knobs, checked before any task starts
// (bad values exit 2 naming the flag):
//   --straggler=INDEX:FACTOR  worker INDEX runs FACTOR times slower (its
//                             --straggler_factor; worker/replica_trainer.h);
//   the chief's --replicas_to_aggregate against --workers (a larger R could
//                             never complete a step).
// Pure functions; thread-safe.
#ifndef PSC_LAUNCHER_EXPERIMENT_FLAGS_H_
#define PSC_LAUNCHER_EXPERIMENT_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psc {
namespace launcher {

struct Straggler {
  int worker = 0;
  double factor = 1;
};

// "INDEX:FACTOR" with INDEX in [0, num_workers) and FACTOR in [1, 1000].
// INVALID_ARGUMENT naming --straggler otherwise.
absl::StatusOr<Straggler> ParseStraggler(absl::string_view spec, int num_workers);

// INVALID_ARGUMENT naming --replicas_to_aggregate when the chief's flags
// (after --) set it above `num_workers` or not to an integer; its other
// checks are the chief's own (--check_job).
absl::Status CheckReplicasToAggregate(const std::vector<std::string>& chief_flags, int num_workers);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_EXPERIMENT_FLAGS_H_
