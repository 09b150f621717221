// The batch normalization ops: registered kernels (kernel_registry.h) on
// every backend, called through ComputeBackend::Run, as elementwise_ops.h.
// Over the last axis of x ([N,H,W,C] or [N,C]), as Keras's
// BatchNormalization(axis=-1); gamma, beta, mean and variance are [C];
// every tensor is float32. Their references and cases:
// common/ops/batch_norm_op_defs.cc.
#ifndef PSC_COMMON_COMPUTE_BATCH_NORM_OPS_H_
#define PSC_COMMON_COMPUTE_BATCH_NORM_OPS_H_

#include "absl/status/status.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace batch_norm {

inline constexpr char kBatchNorm[] = "BatchNorm";
inline constexpr char kBatchNormInference[] = "BatchNormInference";
inline constexpr char kBatchNormBackward[] = "BatchNormBackward";

// The capability queries the kernels accept (kernel_registry.h's Accepts):
// x of [N,C] or [N,H,W,C].
inline bool Accepts(const OpSpec& s) { return s.input.size() == 2 || s.input.size() == 4; }

// In training: per channel, the mean and the biased variance over every
// other axis into mean and variance, and y = (x - mean) / sqrt(variance +
// epsilon) * gamma + beta. y may not be x.
inline absl::Status BatchNorm(ComputeBackend* be, const DeviceTensor& x, const DeviceTensor& gamma,
                              const DeviceTensor& beta, float epsilon, DeviceTensor* y,
                              DeviceTensor* mean, DeviceTensor* variance) {
  OpAttrs a;
  a.epsilon = epsilon;
  const DeviceTensor* in[] = {&x, &gamma, &beta};
  DeviceTensor* out[] = {y, mean, variance};
  return be->Run(kBatchNorm, in, a, out);
}

// The same normalization with given statistics (the moving ones, at
// evaluation). y may be x.
inline absl::Status BatchNormInference(ComputeBackend* be, const DeviceTensor& x,
                                       const DeviceTensor& gamma, const DeviceTensor& beta,
                                       const DeviceTensor& mean, const DeviceTensor& variance,
                                       float epsilon, DeviceTensor* y) {
  OpAttrs a;
  a.epsilon = epsilon;
  const DeviceTensor* in[] = {&x, &gamma, &beta, &mean, &variance};
  DeviceTensor* out[] = {y};
  return be->Run(kBatchNormInference, in, a, out);
}

// BatchNorm's gradients (through the batch statistics, as autodiff of
// Keras's training forward gives them), given x, dy, gamma and the
// forward's mean and variance: with xhat = (x - mean) / sqrt(variance +
// epsilon) and M values per channel, dbeta = sum(dy), dgamma = sum(dy *
// xhat), dx = gamma / sqrt(variance + epsilon) * (dy - dbeta / M - xhat *
// dgamma / M). dx may be dy.
inline absl::Status BatchNormBackward(ComputeBackend* be, const DeviceTensor& x,
                                      const DeviceTensor& dy, const DeviceTensor& gamma,
                                      const DeviceTensor& mean, const DeviceTensor& variance,
                                      float epsilon, DeviceTensor* dx, DeviceTensor* dgamma,
                                      DeviceTensor* dbeta) {
  OpAttrs a;
  a.epsilon = epsilon;
  const DeviceTensor* in[] = {&x, &dy, &gamma, &mean, &variance};
  DeviceTensor* out[] = {dx, dgamma, dbeta};
  return be->Run(kBatchNormBackward, in, a, out);
}

}  // namespace batch_norm
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_BATCH_NORM_OPS_H_
