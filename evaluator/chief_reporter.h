// Tells the chief (its Coordinator service, with the cluster token) that an
// evaluator is there, and which checkpoint it evaluated: the chief of a
// cluster with an evaluator waits for the final one before it exits (chief
// --evaluator_wait), also when its TF_CONFIG leaves the evaluator out
// (docker-compose's evaluator profile) and the evaluator announced itself.
#ifndef PSC_EVALUATOR_CHIEF_REPORTER_H_
#define PSC_EVALUATOR_CHIEF_REPORTER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/base/backoff.h"
#include "common/job/evaluation.h"
#include "common/rpc/security.h"
#include "proto/coordinator.grpc.pb.h"

namespace psc {
namespace evaluator {

// Thread-safe (its members are constant): Announce runs beside Report.
class ChiefReporter {
 public:
  ChiefReporter(const std::string& chief_address, const rpc::SecurityOptions& security,
                int task_index);

  // Registers as evaluator:<index> (Coordinator.Register) under
  // `incarnation` (not 0), so that the chief waits for the final
  // evaluation. UNAVAILABLE and DEADLINE_EXCEEDED (the chief not up yet)
  // are retried until `patience` has passed or `stop` returns true
  // (checked every 200 ms at most); the chief's status otherwise.
  absl::Status Announce(uint64_t incarnation, absl::Duration patience,
                        const std::function<bool()>& stop) const;

  // Reports `step`; UNAVAILABLE and DEADLINE_EXCEEDED (the chief not up
  // yet, or restarting) are retried until `patience` has passed. The
  // chief's status otherwise.
  absl::Status Report(int64_t step, const job::SplitMetrics& metrics, absl::Duration patience);

 private:
  using Attempt =
      std::function<grpc::Status(proto::Coordinator::Stub* stub, grpc::ClientContext* context)>;

  std::unique_ptr<proto::Coordinator::Stub> NewStub() const;
  // One RPC (`attempt`, on a new channel each time, `method` naming it in
  // errors) with `attempt_deadline` each, UNAVAILABLE and DEADLINE_EXCEEDED
  // retried `spacing` apart until `patience` has passed or `stop` returns
  // true.
  absl::Status Call(const char* method, const Attempt& attempt, absl::Duration attempt_deadline,
                    const base::BackoffOptions& spacing, absl::Duration patience,
                    const std::function<bool()>& stop) const;

  const rpc::SecurityOptions security_;
  const std::string address_;
  const int task_index_;
};

// Announces the evaluator to the chief in the background (the chief may
// start after it; ChiefReporter::Announce for up to 10 minutes) and logs
// the outcome as `program`. Stops, and is joined, when destroyed: within
// about 1.2 s (an attempt of 1 s and a 200 ms slice). Thread-compatible.
class ChiefAnnouncer {
 public:
  // `reporter` must outlive the announcer.
  ChiefAnnouncer(const ChiefReporter* reporter, const char* program);
  ~ChiefAnnouncer();
  ChiefAnnouncer(const ChiefAnnouncer&) = delete;
  ChiefAnnouncer& operator=(const ChiefAnnouncer&) = delete;

 private:
  std::atomic<bool> stop_{false};  // before thread_, which reads it
  std::thread thread_;
};

}  // namespace evaluator
}  // namespace psc

#endif  // PSC_EVALUATOR_CHIEF_REPORTER_H_
