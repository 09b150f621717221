#include "chief/unit_failure.h"

#include "absl/strings/match.h"
#include "common/job/record_stream.h"

namespace psc {
namespace chief {

absl::Status JobErrorOf(const std::vector<absl::Status>& failures) {
  for (const absl::Status& s : failures) {
    if (absl::IsInvalidArgument(s) || absl::StrContains(s.message(), job::kStreamError)) return s;
  }
  return absl::OkStatus();
}

const absl::Status& MoreInformative(const absl::Status& first, const absl::Status& second) {
  if (!first.ok() && !absl::IsCancelled(first)) return first;
  return second.ok() ? first : second;
}

}  // namespace chief
}  // namespace psc
