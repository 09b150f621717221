// A worker's heartbeats to the chief's Coordinator service: it registers
// (with an incarnation drawn at start, so that a restart is a new one), then
// every interval sends a Report (the unit running, its steps so far, the
// error a failed unit ended with) or, when idle, a Heartbeat. The chief's
// membership declares a registered worker lost when they stop
// (chief/membership.h). A chief that does not answer yet is retried; one
// that answers NOT_FOUND (it restarted and forgot this worker) gets a new
// registration.
//
// Lifecycle: Start (a thread) -> Stop (joins it). Thread-safe.
#ifndef PSC_WORKER_HEARTBEAT_H_
#define PSC_WORKER_HEARTBEAT_H_

#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"
#include "worker/worker_core.h"

namespace psc {
namespace worker {

// The Coordinator service as the worker calls it. Implementations are
// thread-safe; each call is one attempt.
class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;
  virtual absl::Status Register(const proto::RegisterRequest& request) = 0;
  virtual absl::Status Heartbeat(const proto::HeartbeatRequest& request) = 0;
  virtual absl::Status Report(const proto::ReportRequest& request) = 0;
};

class Heartbeat {
 public:
  using ProgressSource = std::function<WorkerCore::Progress()>;

  // Not owned: `client`. `progress` says what the worker is doing.
  Heartbeat(CoordinatorClient* client, int task_index, uint64_t incarnation,
            absl::Duration interval, ProgressSource progress);
  ~Heartbeat();  // Stop()

  void Start();
  void Stop();

  // One round, as the thread does it every interval (tests call it).
  // Returns the status of the call made.
  absl::Status Beat();

 private:
  CoordinatorClient* const client_;
  const int task_index_;
  const uint64_t incarnation_;
  const absl::Duration interval_;
  const ProgressSource progress_;
  bool registered_ = false;  // touched by Beat only
  bool reported_idle_ = false;
  absl::Notification stop_;
  std::thread thread_;
};

// A random, non-zero incarnation for this process.
uint64_t NewIncarnation();

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_HEARTBEAT_H_
