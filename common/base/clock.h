// Time as an injected dependency, so that waits and backoff can be tested
// without sleeping (leveldb's Env pattern, reduced to what pscluster needs).
#ifndef PSC_COMMON_BASE_CLOCK_H_
#define PSC_COMMON_BASE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace psc {
namespace base {

// Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
  // Blocks the caller for `d` (returns at once for d <= 0).
  virtual void SleepFor(absl::Duration d) = 0;
};

// The system clock. Stateless; thread-safe.
class RealClock : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
};

// A clock that only moves when told to. SleepFor advances it at once, so
// code that backs off between retries runs instantly under test.
// Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void SleepFor(absl::Duration d) override { Advance(d); }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    if (d > absl::ZeroDuration()) now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace base
}  // namespace psc

#endif  // PSC_COMMON_BASE_CLOCK_H_
