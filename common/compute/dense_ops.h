// The dense ops: registered kernels (kernel_registry.h) on every backend,
// called through ComputeBackend::Run, as elementwise_ops.h. x is [N,K] or
// [N,H,W,C] with H*W*C = K (flattened in HWC order), the kernel w [K,M]
// (Keras's (in, out)), the bias [M]; every tensor is float32. Their
// references and cases: common/ops/dense_op_defs.cc.
#ifndef PSC_COMMON_COMPUTE_DENSE_OPS_H_
#define PSC_COMMON_COMPUTE_DENSE_OPS_H_

#include "absl/status/status.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace dense {

inline constexpr char kDense[] = "Dense";
inline constexpr char kDenseBackwardData[] = "DenseBackwardData";
inline constexpr char kDenseBackwardWeights[] = "DenseBackwardWeights";

// y [N,M] = relu?(flatten(x)·w + b); b null for no bias (input 2 is
// optional).
inline absl::Status Dense(ComputeBackend* be, const DeviceTensor& x, const DeviceTensor& w,
                          const DeviceTensor* b, bool relu, DeviceTensor* y) {
  OpAttrs a;
  a.relu = relu;
  const DeviceTensor* in[] = {&x, &w, b};
  DeviceTensor* out[] = {y};
  return be->Run(kDense, in, a, out);
}

// dx (x's shape: its own gives [N,K] or [N,H,W,C]) = dy·wᵀ.
inline absl::Status DenseBackwardData(ComputeBackend* be, const DeviceTensor& dy,
                                      const DeviceTensor& w, DeviceTensor* dx) {
  const DeviceTensor* in[] = {&dy, &w};
  DeviceTensor* out[] = {dx};
  return be->Run(kDenseBackwardData, in, OpAttrs(), out);
}

// dw [K,M] = flatten(x)ᵀ·dy, db [M] = the sum over the batch of dy; db
// null for none (output 1 is optional).
inline absl::Status DenseBackwardWeights(ComputeBackend* be, const DeviceTensor& x,
                                         const DeviceTensor& dy, DeviceTensor* dw,
                                         DeviceTensor* db) {
  const DeviceTensor* in[] = {&x, &dy};
  DeviceTensor* out[] = {dw, db};
  return be->Run(kDenseBackwardWeights, in, OpAttrs(), out);
}

}  // namespace dense
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_DENSE_OPS_H_
