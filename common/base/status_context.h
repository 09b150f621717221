// Adding context to a status without changing what it means: the code stays
// (a device's RESOURCE_EXHAUSTED stays RESOURCE_EXHAUSTED, a peer's
// UNAVAILABLE stays retryable), only the message gains "<what>: " in front.
// Where a caller deliberately turns an error into another code (a user's
// file that fails to parse is INVALID_ARGUMENT, exit 2), it builds the new
// status itself and says so in a comment.
#ifndef PSC_COMMON_BASE_STATUS_CONTEXT_H_
#define PSC_COMMON_BASE_STATUS_CONTEXT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psc {
namespace base {

// `status` with "<what>: " before its message; the code and payloads kept.
// OK stays OK (and `what` is not used).
absl::Status Prefix(const absl::Status& status, absl::string_view what);

}  // namespace base
}  // namespace psc

#endif  // PSC_COMMON_BASE_STATUS_CONTEXT_H_
