// Tells the chief (its Coordinator service, with the cluster token) that an
// evaluator is there, and which checkpoint it evaluated: the chief of a
// cluster with an evaluator waits for the final one before it exits (chief
// --evaluator_wait), also when its TF_CONFIG leaves the evaluator out
// (docker-compose's evaluator profile) and the evaluator announced itself.
#ifndef PSC_EVALUATOR_CHIEF_REPORTER_H_
#define PSC_EVALUATOR_CHIEF_REPORTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

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
  // evaluation. UNAVAILABLE (the chief not up yet) is retried until
  // `patience` has passed or `stop` returns true (checked every 200 ms at
  // most); the chief's status otherwise.
  absl::Status Announce(uint64_t incarnation, absl::Duration patience,
                        const std::function<bool()>& stop);

  // Reports `step`; UNAVAILABLE (the chief not up yet, or restarting) is
  // retried until `patience` has passed. The chief's status otherwise.
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

}  // namespace evaluator
}  // namespace psc

#endif  // PSC_EVALUATOR_CHIEF_REPORTER_H_
