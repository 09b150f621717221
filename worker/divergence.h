// A step whose loss or gradients are not finite: training diverged (a
// learning rate too high) or a non-finite value reached the model. pscluster
// stops the job at the first such step by default, where Keras needs the
// TerminateOnNaN callback: the worker reports it naming itself, the step,
// the variable and the likely cause (docs/reliability.md). Pure.
#ifndef PSC_WORKER_DIVERGENCE_H_
#define PSC_WORKER_DIVERGENCE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/tensor/tensor.h"

namespace psc {
namespace worker {

// What is not finite in a step: "the loss is nan; the gradient of
// 'dense/kernel' is nan at element 12 (and 3 more variables)". Empty when
// the loss and every gradient are finite.
std::string NonFiniteReport(double loss_sum, const std::vector<std::vector<float>>& grads,
                            const std::vector<tensor::VariableShape>& variables);

// The report of a step whose gradients are not finite at the smallest
// loss scale (optimizer::kMinLossScale): no scale makes them finite.
std::string OverflowAtTheSmallestScale();

// The job error for `report` of step `step` on worker `worker` at learning
// rate `learning_rate`: INVALID_ARGUMENT (a deterministic failure: the
// chief ends the job instead of recovering), with `detail` (the servers'
// refusal, say) appended when not OK.
absl::Status DivergedError(int worker, int64_t step, const std::string& report,
                           double learning_rate, const absl::Status& detail);

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_DIVERGENCE_H_
