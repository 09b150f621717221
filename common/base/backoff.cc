#include "common/base/backoff.h"

#include <algorithm>

namespace psc {
namespace base {

Backoff::Backoff(BackoffOptions options, uint64_t seed)
    : options_(options), current_(options.initial), rng_state_(seed | 1) {}

absl::Duration Backoff::Next() {
  absl::Duration delay = current_;
  current_ = std::min(options_.max, current_ * options_.multiplier);
  if (options_.jitter > 0) {
    // xorshift64*: a tiny deterministic generator is all jitter needs.
    rng_state_ ^= rng_state_ >> 12;
    rng_state_ ^= rng_state_ << 25;
    rng_state_ ^= rng_state_ >> 27;
    const uint64_t r = rng_state_ * 2685821657736338717ULL;
    const double u = static_cast<double>(r >> 11) / static_cast<double>(1ULL << 53);  // [0, 1)
    delay = delay * (1.0 - options_.jitter + 2.0 * options_.jitter * u);
  }
  return std::min(delay, options_.max);
}

void Backoff::Reset() { current_ = options_.initial; }

}  // namespace base
}  // namespace psc
