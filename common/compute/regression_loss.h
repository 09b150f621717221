// Keras 3's regression losses of an output of U units against float
// targets, with their gradients, computed on the host in double for every
// backend (as binary_cross_entropy.h, and for the same reason: the
// executor copies n x U floats out and their gradient back, where a kernel
// per backend would buy nothing at these sizes).
//
// Per example, as keras.losses computes it (a mean over the last axis):
//   mean_squared_error   mean_j (o_j - t_j)^2
//   mean_absolute_error  mean_j |o_j - t_j|         (gradient sign(o - t),
//                                                     0 where they are equal,
//                                                     as JAX's abs)
//   huber                mean_j of 0.5 e^2 where |e| <= delta, else
//                        delta |e| - 0.5 delta^2     (e = o_j - t_j)
// Each example's loss times its weight is summed into `loss_sum`, and the
// gradient scaled by weight * grad_scale, as SoftmaxCrossEntropy does.
#ifndef PSC_COMMON_COMPUTE_REGRESSION_LOSS_H_
#define PSC_COMMON_COMPUTE_REGRESSION_LOSS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/compute/backend.h"

namespace psc {
namespace compute {

// outputs: n x units (an [n, units] tensor's values); options.targets the
// same size; options.kind a regression (IsRegression); doutputs: n x units
// (written). INVALID_ARGUMENT for sizes that do not agree (units < 1, a
// size that is not n x units, weights other than none or n), a delta that
// is not > 0, or a kind that is not a regression.
absl::Status RegressionLoss(absl::Span<const float> outputs, int64_t units,
                            const LossOptions& options, absl::Span<float> doutputs,
                            double* loss_sum);

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_REGRESSION_LOSS_H_
