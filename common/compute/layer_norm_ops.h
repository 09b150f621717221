// The layer normalization ops (Keras's LayerNormalization): registered
// kernels (kernel_registry.h) on every backend, called through
// ComputeBackend::Run, as elementwise_ops.h. x is seen as rows of `cols`
// values, the trailing axes the layer normalizes over: rows is the count of
// the statistics' tensors (mean, rstd: [rows]) and cols = x.size() / rows.
// gamma and beta hold cols values (any shape), or are null (scale=False,
// center=False). Every tensor is float32. The math: layer_norm_math.h;
// references and cases: common/ops/layer_norm_op_defs.cc.
#ifndef PSC_COMMON_COMPUTE_LAYER_NORM_OPS_H_
#define PSC_COMMON_COMPUTE_LAYER_NORM_OPS_H_

#include "absl/status/status.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace layer_norm {

inline constexpr char kLayerNorm[] = "LayerNorm";
inline constexpr char kLayerNormBackward[] = "LayerNormBackward";

// y (x's shape), and each row's mean and rstd = 1 / sqrt(variance +
// epsilon), which LayerNormBackward takes. Inputs x, gamma, beta (both
// optional); attribute epsilon.
inline absl::Status LayerNorm(ComputeBackend* be, const DeviceTensor& x, const DeviceTensor* gamma,
                              const DeviceTensor* beta, float epsilon, DeviceTensor* y,
                              DeviceTensor* mean, DeviceTensor* rstd) {
  OpAttrs a;
  a.epsilon = epsilon;
  a.row_size = mean->size() > 0 ? x.size() / mean->size() : 0;
  const DeviceTensor* in[] = {&x, gamma, beta};
  DeviceTensor* out[] = {y, mean, rstd};
  return be->Run(kLayerNorm, in, a, out);
}

// From x, dy, gamma (null for none) and LayerNorm's mean and rstd: dx,
// and dgamma and dbeta summed over the rows (each null where not wanted:
// every output is optional).
inline absl::Status LayerNormBackward(ComputeBackend* be, const DeviceTensor& x,
                                      const DeviceTensor& dy, const DeviceTensor* gamma,
                                      const DeviceTensor& mean, const DeviceTensor& rstd,
                                      DeviceTensor* dx, DeviceTensor* dgamma, DeviceTensor* dbeta) {
  OpAttrs a;
  a.row_size = mean.size() > 0 ? x.size() / mean.size() : 0;
  const DeviceTensor* in[] = {&x, &dy, gamma, &mean, &rstd};
  DeviceTensor* out[] = {dx, dgamma, dbeta};
  return be->Run(kLayerNormBackward, in, a, out);
}

// The shared checks: the tensors' dtypes, counts and shapes as above (dy
// and dx of x's shape, rstd of mean's, epsilon > 0 for the forward);
// *rows and *cols. `scale`, `shift`: gamma or dgamma, beta or dbeta (may be
// null); `stats`: mean and rstd. INVALID_ARGUMENT naming `op`.
absl::Status CheckLayerNorm(const char* op, const DeviceTensor& x, const DeviceTensor* scale,
                            const DeviceTensor* shift, const DeviceTensor& mean,
                            const DeviceTensor& rstd, int64_t* rows, int64_t* cols);

}  // namespace layer_norm
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_LAYER_NORM_OPS_H_
