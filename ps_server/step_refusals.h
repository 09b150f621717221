// Sync: the pushes refused for the step being gathered (INVALID_ARGUMENT: a
// non-finite gradient, a wrong shape). A refused replica never sends
// another gradient for that step, so when the live workers left cannot
// make up replicas_to_aggregate the step can never complete: the Shard then
// fails the pulls that wait for it at once, with FAILED_PRECONDITION naming
// the refusing worker, the step and the first refusal's status, instead of
// letting them wait --max_pull_wait. With backup workers (replicas_to_
// aggregate below the live workers) one refusal leaves the step able to
// complete without it.
//
// Thread-compatible: the Shard calls it under its metadata lock.
#ifndef PSC_PS_SERVER_STEP_REFUSALS_H_
#define PSC_PS_SERVER_STEP_REFUSALS_H_

#include <cstdint>
#include <set>

#include "absl/status/status.h"

namespace psc {
namespace ps_server {

class StepRefusals {
 public:
  // Worker `worker`'s gradient for `step` was refused with `status`.
  // Refusals of another step are forgotten (the accumulator moved on).
  void Refuse(int64_t step, int worker, const absl::Status& status);

  // OK while `step` can still gather `replicas` gradients from `live`
  // workers; else FAILED_PRECONDITION saying why.
  absl::Status Blocked(int64_t step, int32_t replicas, int live) const;

  // After a restore: the steps are counted again.
  void Clear();

 private:
  int64_t step_ = -1;
  std::set<int> workers_;
  int first_worker_ = -1;
  absl::Status first_;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_STEP_REFUSALS_H_
