// Makes Debian's absl::Mutex, absl::CondVar and absl::Notification visible
// to ThreadSanitizer. Debian's Abseil is not built with TSan, so its locks
// synchronize through atomics and futexes TSan never sees, and every access
// guarded by an absl::Mutex looks like a race (215 reports in the cores'
// unit tests, all of that kind). Linked into the test binaries of a
// PSC_SANITIZE=thread build only (they are linked with -rdynamic, so that
// Abseil's own calls land here too), this file defines those functions:
// each one tells TSan what the real one does (lock, unlock, wait) through
// its mutex annotations, and calls the real one (dlsym(RTLD_NEXT)). What
// the annotations cannot express is listed in tests/sanitizers/tsan.supp.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

template <typename Fn>
Fn Real(const char* symbol) {
  void* f = dlsym(RTLD_NEXT, symbol);
  if (f == nullptr) {
    std::fprintf(stderr, "absl_mutex_tsan: no %s in the loaded libraries\n", symbol);
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

// Abseil's functions call each other (LockWhenWithTimeout calls
// LockWhenWithDeadline, Notify calls Lock): only the outermost call is
// annotated, or TSan would count one lock twice.
thread_local int depth = 0;
struct Outermost {
  Outermost() : outer(depth++ == 0) {}
  ~Outermost() { --depth; }
  const bool outer;
};

// Binds `real` to the library's function; a nested call goes straight to it.
#define PSC_REAL(type, symbol, ...)            \
  static const auto real = Real<type>(symbol); \
  const Outermost psc_outermost;               \
  if (!psc_outermost.outer) return real(__VA_ARGS__)

// A wait that releases `mu` and holds it again when it returns: what the
// thread wrote before is published, what others wrote under `mu` is seen
// after, and whatever the wait does inside (it evaluates conditions on
// guarded data) is not an access of this thread.
template <typename F>
auto Wait(absl::Mutex* mu, F&& wait) {
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  auto r = wait();
  __tsan_mutex_post_lock(mu, 0, 0);
  return r;
}

// Notification: the release edge of its flag, which a waiter may read
// without taking the mutex (HasBeenNotified is inline: that acquiring load
// is instrumented, and pairs with the __tsan_release on the same address).
static_assert(sizeof(absl::Mutex) == 8 && sizeof(absl::Notification) == 16,
              "absl::Notification's layout changed: update absl_mutex_tsan.cc");
const void* FlagOf(const absl::Notification* n) {
  return reinterpret_cast<const char*>(n) + sizeof(absl::Mutex);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  PSC_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv", this);
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::Unlock() {
  PSC_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv", this);
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderLock() {
  PSC_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv", this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

void Mutex::ReaderUnlock() {
  PSC_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv", this);
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

bool Mutex::TryLock() {
  PSC_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv", this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool got = real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (got ? 0 : __tsan_mutex_try_lock_failed), 0);
  return got;
}

bool Mutex::ReaderTryLock() {
  PSC_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv", this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_read_lock);
  const bool got = real(this);
  __tsan_mutex_post_lock(this,
                         __tsan_mutex_try_read_lock | (got ? 0 : __tsan_mutex_try_lock_failed), 0);
  return got;
}

void Mutex::LockWhen(const Condition& cond) {
  PSC_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE",
           this, cond);
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  PSC_REAL(void (*)(Mutex*, const Condition&),
           "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE", this, cond);
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this, cond);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

// The timed LockWhen variants return holding the lock either way.
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  PSC_REAL(bool (*)(Mutex*, const Condition&, Duration),
           "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE", this,
           cond, timeout);
  __tsan_mutex_pre_lock(this, 0);
  const bool r = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, 0, 0);
  return r;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  PSC_REAL(bool (*)(Mutex*, const Condition&, Time),
           "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE", this, cond,
           deadline);
  __tsan_mutex_pre_lock(this, 0);
  const bool r = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return r;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  PSC_REAL(bool (*)(Mutex*, const Condition&, Duration),
           "_ZN4absl7debian35Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE",
           this, cond, timeout);
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const bool r = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return r;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  PSC_REAL(bool (*)(Mutex*, const Condition&, Time),
           "_ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE", this,
           cond, deadline);
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const bool r = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return r;
}

// Await is called holding the lock exclusively (pscluster never awaits
// under a reader lock).
void Mutex::Await(const Condition& cond) {
  PSC_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE",
           this, cond);
  Wait(this, [&] {
    real(this, cond);
    return 0;
  });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  PSC_REAL(bool (*)(Mutex*, const Condition&, Duration),
           "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE", this, cond,
           timeout);
  return Wait(this, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  PSC_REAL(bool (*)(Mutex*, const Condition&, Time),
           "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE", this, cond,
           deadline);
  return Wait(this, [&] { return real(this, cond, deadline); });
}

Mutex::~Mutex() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN4absl7debian35MutexD2Ev");
  const Outermost outermost;
  if (outermost.outer) __tsan_mutex_destroy(this, 0);
  real(this);
}

void CondVar::Wait(Mutex* mu) {
  PSC_REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE", this, mu);
  ::Wait(mu, [&] {
    real(this, mu);
    return 0;
  });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  PSC_REAL(bool (*)(CondVar*, Mutex*, Duration),
           "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE", this, mu,
           timeout);
  return ::Wait(mu, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  PSC_REAL(bool (*)(CondVar*, Mutex*, Time),
           "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE", this, mu, deadline);
  return ::Wait(mu, [&] { return real(this, mu, deadline); });
}

void Notification::Notify() {
  PSC_REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv", this);
  __tsan_release(const_cast<void*>(FlagOf(this)));
  real(this);
}

void Notification::WaitForNotification() const {
  PSC_REAL(void (*)(const Notification*), "_ZNK4absl7debian312Notification19WaitForNotificationEv",
           this);
  real(this);
  __tsan_acquire(const_cast<void*>(FlagOf(this)));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  PSC_REAL(bool (*)(const Notification*, Duration),
           "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE", this,
           timeout);
  const bool r = real(this, timeout);
  if (r) __tsan_acquire(const_cast<void*>(FlagOf(this)));
  return r;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  PSC_REAL(bool (*)(const Notification*, Time),
           "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE", this,
           deadline);
  const bool r = real(this, deadline);
  if (r) __tsan_acquire(const_cast<void*>(FlagOf(this)));
  return r;
}

ABSL_NAMESPACE_END
}  // namespace absl
