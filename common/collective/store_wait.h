// Waiting for a rendezvous key that may never come: a group whose member
// is lost is abandoned by the chief, which sets the group's abort key, so
// the members still waiting give up at once instead of at their timeout.
#ifndef PSC_COMMON_COLLECTIVE_STORE_WAIT_H_
#define PSC_COMMON_COLLECTIVE_STORE_WAIT_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective/collective.h"

namespace psc {
namespace collective {

// The abort key of the group named by `prefix`.
std::string AbortKey(const std::string& prefix);

// The value of `key`, waiting up to `timeout` in slices of `slice`; between
// slices, ABORTED with the abort key's value (the chief's reason) once
// `abort_key` is set (empty: no abort key), and CANCELLED once `cancelled`
// (may be empty) returns true. DEADLINE_EXCEEDED naming the key when the
// timeout passes.
absl::StatusOr<std::string> WaitForKey(KeyValueStore* store, const std::string& key,
                                       const std::string& abort_key, absl::Duration timeout,
                                       const std::function<bool()>& cancelled = nullptr,
                                       absl::Duration slice = absl::Milliseconds(500));

}  // namespace collective
}  // namespace psc

#endif  // PSC_COMMON_COLLECTIVE_STORE_WAIT_H_
