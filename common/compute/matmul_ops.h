// The batched matrix product: a registered kernel (kernel_registry.h) on
// every backend, called through ComputeBackend::Run, as elementwise_ops.h.
// Keras's Dot (batch_dot) and its gradients are this op with other
// transposes. Every tensor is float32 and row-major; its shapes give only
// the batch (the first dimension of each) and the element counts: a holds
// batch x M x K values ([M,K] per example, or [K,M] transposed), b batch x
// K x N ([K,N], or [N,K] transposed), y batch x M x N. Its reference and
// cases: common/ops/matmul_op_defs.cc.
#ifndef PSC_COMMON_COMPUTE_MATMUL_OPS_H_
#define PSC_COMMON_COMPUTE_MATMUL_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace matmul {

inline constexpr char kBatchMatMul[] = "BatchMatMul";

// The shared checks: float32 tensors with one batch, and M, K, N >= 1 whose
// products with it are a's, b's and y's element counts (no overflow).
// INVALID_ARGUMENT naming `op` and the tensor; *batch gets the batch.
absl::Status CheckBatchMatMul(const char* op, const DeviceTensor& a, const DeviceTensor& b,
                              const OpAttrs::MatMul& mm, const DeviceTensor& y, int64_t* batch);

// Any a of at least two dimensions (kernel_registry.h's Accepts).
inline bool Accepts(const OpSpec& s) { return s.input.size() >= 2; }

// y[i] = op(a[i])·op(b[i]) for each example i, op the transpose where the
// attributes say so.
inline absl::Status BatchMatMul(ComputeBackend* be, const DeviceTensor& a, const DeviceTensor& b,
                                int64_t m, int64_t k, int64_t n, bool transpose_a, bool transpose_b,
                                DeviceTensor* y) {
  OpAttrs attrs;
  attrs.matmul = {m, k, n, transpose_a, transpose_b};
  const DeviceTensor* in[] = {&a, &b};
  DeviceTensor* out[] = {y};
  return be->Run(kBatchMatMul, in, attrs, out);
}

}  // namespace matmul
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_MATMUL_OPS_H_
