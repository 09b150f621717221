// SplitMix64 (Steele, Lea and Flood 2014), fully specified here so that
// every seeded draw (the batch plan, the initial values, dropout) is the
// same on every platform.
#ifndef PSC_COMMON_BASE_SPLITMIX64_H_
#define PSC_COMMON_BASE_SPLITMIX64_H_

#include <cstdint>

namespace psc {
namespace base {

// SplitMix64's output function: a bijective 64-bit mix.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}

  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return Mix64(state_);
  }
  // Uniform in [0, 1), from the top 53 bits.
  double UnitDouble() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  // Uniform in [0, n), n >= 1, without modulo bias: draws below 2^64 mod n
  // are rejected.
  uint64_t Uniform(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n.
    for (;;) {
      const uint64_t r = Next();
      if (r >= threshold) return r % n;
    }
  }

 private:
  uint64_t state_;
};

}  // namespace base
}  // namespace psc

#endif  // PSC_COMMON_BASE_SPLITMIX64_H_
