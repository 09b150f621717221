// Exponential backoff between retries, capped, with optional jitter.
#ifndef PSC_COMMON_BASE_BACKOFF_H_
#define PSC_COMMON_BASE_BACKOFF_H_

#include <cstdint>

#include "absl/time/time.h"

namespace psc {
namespace base {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(50);
  double multiplier = 1.6;
  absl::Duration max = absl::Seconds(2);
  // Each delay is scaled by a factor drawn from [1 - jitter, 1 + jitter].
  double jitter = 0.2;
};

// Thread-compatible.
class Backoff {
 public:
  explicit Backoff(BackoffOptions options = {}, uint64_t seed = 1);
  // The delay before the next attempt; grows by `multiplier` up to `max`.
  absl::Duration Next();
  void Reset();

 private:
  BackoffOptions options_;
  absl::Duration current_;
  uint64_t rng_state_;
};

}  // namespace base
}  // namespace psc

#endif  // PSC_COMMON_BASE_BACKOFF_H_
