#include "common/base/shutdown.h"

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <ctime>

#include "absl/time/time.h"

namespace psc {
namespace base {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void IgnoreBrokenPipes() { signal(SIGPIPE, SIG_IGN); }

void ShutdownSignal::Request(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (requested_) return;
  requested_ = true;
  reason_ = reason;
}

bool ShutdownSignal::requested() const {
  absl::MutexLock lock(&mu_);
  return requested_;
}

std::string ShutdownSignal::Wait() {
  const sigset_t set = TerminationSignals();
  // Poll both sources: sigtimedwait for the signals (a short slice), the
  // flag for in-process requests. 50 ms bounds the added shutdown latency.
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&requested_), absl::Milliseconds(25))) {
        return reason_;
      }
    }
    timespec slice{0, 25 * 1000 * 1000};
    int sig = sigtimedwait(&set, nullptr, &slice);
    if (sig > 0) {
      Request(sig == SIGTERM ? "SIGTERM" : "SIGINT");
    }
  }
}

}  // namespace base
}  // namespace psc
