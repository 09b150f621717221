#include "launcher/experiment_flags.h"

#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "launcher/flag_args.h"

namespace psc {
namespace launcher {

absl::StatusOr<Straggler> ParseStraggler(absl::string_view spec, int num_workers) {
  const std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(spec, absl::MaxSplits(':', 1));
  Straggler s;
  if (!absl::SimpleAtoi(parts.first, &s.worker) || !absl::SimpleAtod(parts.second, &s.factor) ||
      !std::isfinite(s.factor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--straggler=", spec,
                     ": expected INDEX:FACTOR, e.g. 2:3 (worker 2 runs 3x "
                     "slower)"));
  }
  if (s.worker < 0 || s.worker >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("--straggler=", spec, ": there is no worker ",
                                                   s.worker, " (--workers=", num_workers, ": 0 to ",
                                                   num_workers - 1, ")"));
  }
  if (s.factor < 1 || s.factor > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--straggler=", spec, ": the factor must be in [1, 1000] (1 = not slowed)"));
  }
  return s;
}

absl::Status CheckReplicasToAggregate(const std::vector<std::string>& chief_flags,
                                      int num_workers) {
  const std::optional<std::string> given = LastFlagValue(chief_flags, "replicas_to_aggregate");
  if (!given.has_value()) return absl::OkStatus();
  int r = 0;
  if (!absl::SimpleAtoi(*given, &r)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replicas_to_aggregate=", *given, ": not an integer"));
  }
  if (r > num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--replicas_to_aggregate=", r, " is more than the ", num_workers,
        " workers (--workers): no step could complete; at most --workers, fewer makes the "
        "others backups"));
  }
  return absl::OkStatus();
}

}  // namespace launcher
}  // namespace psc
