// Waiting for the end of a daemon's life: SIGTERM, SIGINT, or a request
// from inside the process (the Shutdown RPC).
#ifndef PSC_COMMON_BASE_SHUTDOWN_H_
#define PSC_COMMON_BASE_SHUTDOWN_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace psc {
namespace base {

// Blocks SIGTERM and SIGINT in the calling thread. Call first thing in main,
// before any thread starts, so every thread inherits the mask and the
// signals wait for ShutdownSignal::Wait instead of killing the process.
void BlockTerminationSignals();

// Ignores SIGPIPE for the whole process, so that a write to a peer that is
// gone fails with EPIPE instead of killing it: libraries write to sockets
// without MSG_NOSIGNAL (Gloo's TCP pairs do, when a collective peer dies or
// restarts). Every daemon and every test that runs collectives in-process
// calls it. Idempotent.
void IgnoreBrokenPipes();

// Thread-safe.
class ShutdownSignal {
 public:
  // Wakes Wait with `reason`. Later calls keep the first reason.
  void Request(const std::string& reason);
  // True once Request was called or a signal was taken by Wait.
  bool requested() const;
  // Blocks until SIGTERM or SIGINT arrives (when they are blocked, see
  // BlockTerminationSignals) or Request is called; returns the reason.
  std::string Wait();

 private:
  mutable absl::Mutex mu_;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  std::string reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace base
}  // namespace psc

#endif  // PSC_COMMON_BASE_SHUTDOWN_H_
