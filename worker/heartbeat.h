// A worker's heartbeats to the chief's Coordinator service: it registers
// (with an incarnation drawn at start, so that a restart is a new one), then
// every interval sends a Report (the unit running, its steps so far, the
// error a failed unit ended with) or, when idle, a Heartbeat. The chief's
// membership declares a registered worker lost when they stop
// (chief/membership.h). A chief that does not answer yet is retried; one
// that answers NOT_FOUND (it restarted and forgot this worker) gets a new
// registration.
//
// A worker beyond the chief's TF_CONFIG (docs/guide/membership.md) joins
// instead of registering: one started with --join from the start, one whose
// TF_CONFIG lists it beyond the chief's workers once Register answers
// OUT_OF_RANGE. It asks for its own index as the seat, and joins again
// when the chief forgets it. A join refused for good (the seat is another
// worker's, every seat is taken, the job ended, a wrong token) is handed
// to `refused`, which ends the worker.
//
// Lifecycle: Start (a thread) -> Stop (joins it). Thread-safe.
#ifndef PSC_WORKER_HEARTBEAT_H_
#define PSC_WORKER_HEARTBEAT_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  virtual absl::StatusOr<proto::JoinResponse> Join(const proto::JoinRequest& request) = 0;
  virtual absl::StatusOr<proto::LeaveResponse> Leave(const proto::LeaveRequest& request) = 0;
};

// Whether a refused join or leave is final (retrying cannot help), as
// opposed to a chief that does not answer (yet).
bool IsFinalRefusal(const absl::Status& s);

class Heartbeat {
 public:
  using ProgressSource = std::function<WorkerCore::Progress()>;

  // Not owned: `client`. `progress` says what the worker is doing.
  // `address`: where the chief reaches this worker, for a join ("" : it
  // never joins); `joined`: it joined already (--join), so it joins again
  // instead of registering. `refused` (may be null) gets a final refusal.
  // `forgotten` (may be null) runs before a joined worker joins again
  // after the chief forgot it (a restarted chief, which never gave it the
  // unit it may still run: the worker ends that unit).
  Heartbeat(CoordinatorClient* client, int task_index, uint64_t incarnation,
            absl::Duration interval, ProgressSource progress, std::string address = "",
            bool joined = false, std::function<void(const absl::Status&)> refused = nullptr,
            std::function<void()> forgotten = nullptr);

  // A join answered ALREADY_EXISTS (its address is a worker the chief heard
  // from within --heartbeat_timeout: itself before a quick restart) is
  // tried again each beat for this long (in beats of `interval`), then
  // refused for good.
  static constexpr absl::Duration kAddressInUseWait = absl::Minutes(5);
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
  const std::string address_;
  const std::function<void(const absl::Status&)> refused_;
  const std::function<void()> forgotten_;
  int64_t address_in_use_beats_ = 0;  // ALREADY_EXISTS in a row; touched by Beat only
  bool joins_ = false;                // joins instead of registering; touched by Beat only
  bool registered_ = false;           // touched by Beat only
  bool reported_idle_ = false;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_HEARTBEAT_H_
