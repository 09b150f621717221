#include "common/collective/store_wait.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace psc {
namespace collective {

std::string AbortKey(const std::string& prefix) { return prefix + "abort"; }

absl::StatusOr<std::string> WaitForKey(KeyValueStore* store, const std::string& key,
                                       const std::string& abort_key, absl::Duration timeout,
                                       const std::function<bool()>& cancelled,
                                       absl::Duration slice) {
  if (abort_key.empty() && !cancelled) return store->Get(key, timeout);
  slice = std::max(slice, absl::Milliseconds(1));
  // Bounded: each round waits one slice of the timeout (the last one the
  // rest), so there are at most timeout / slice + 1 rounds.
  const int64_t rounds =
      absl::IDivDuration(std::max(timeout, absl::ZeroDuration()), slice, &timeout) + 1;
  const absl::Duration rest = timeout;
  for (int64_t round = 0; round < rounds; ++round) {
    absl::StatusOr<std::string> value = store->Get(key, round + 1 < rounds ? slice : rest);
    if (value.ok() || !absl::IsDeadlineExceeded(value.status())) return value;
    if (cancelled && cancelled()) {
      return absl::CancelledError(absl::StrCat("cancelled while waiting for \"", key, "\""));
    }
    if (abort_key.empty()) continue;
    absl::StatusOr<std::string> reason = store->Get(abort_key, absl::ZeroDuration());
    if (reason.ok()) {
      return absl::AbortedError(
          absl::StrCat("the group was abandoned while waiting for \"", key, "\": ", *reason));
    }
  }
  return absl::DeadlineExceededError(absl::StrCat("store key \"", key, "\" was not set in time"));
}

}  // namespace collective
}  // namespace psc
