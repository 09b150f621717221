// Tells the chief (its Coordinator service, with the cluster token) which
// checkpoint the evaluator evaluated: the chief of a cluster with an
// evaluator waits for the final one before it exits (chief --evaluator_wait).
#ifndef PSC_EVALUATOR_CHIEF_REPORTER_H_
#define PSC_EVALUATOR_CHIEF_REPORTER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/job/evaluation.h"
#include "common/rpc/security.h"
#include "proto/coordinator.grpc.pb.h"

namespace psc {
namespace evaluator {

// Thread-compatible.
class ChiefReporter {
 public:
  ChiefReporter(const std::string& chief_address, const rpc::SecurityOptions& security,
                int task_index);

  // Reports `step`; UNAVAILABLE (the chief not up yet, or restarting) is
  // retried until `patience` has passed. The chief's status otherwise.
  absl::Status Report(int64_t step, const job::SplitMetrics& metrics, absl::Duration patience);

 private:
  const rpc::SecurityOptions security_;
  const std::string address_;
  const int task_index_;
  const std::unique_ptr<proto::Coordinator::Stub> stub_;
};

}  // namespace evaluator
}  // namespace psc

#endif  // PSC_EVALUATOR_CHIEF_REPORTER_H_
