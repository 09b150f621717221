#include "chief/unit_failure.h"

namespace psc {
namespace chief {

UnitFailure ClassifyUnitFailure(const absl::Status& failure, bool servers_answer,
                                bool collective) {
  if (absl::IsInvalidArgument(failure)) return UnitFailure::kJob;
  if (absl::IsFailedPrecondition(failure) && servers_answer && !collective) {
    return UnitFailure::kJob;
  }
  return UnitFailure::kServers;
}

const absl::Status& MoreInformative(const absl::Status& first, const absl::Status& second) {
  if (!first.ok() && !absl::IsCancelled(first)) return first;
  return second.ok() ? first : second;
}

}  // namespace chief
}  // namespace psc
