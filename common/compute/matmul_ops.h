// The batched matrix product: a registered kernel (kernel_registry.h) on
// every backend, called through ComputeBackend::Run, as elementwise_ops.h.
// Keras's Dot (batch_dot) and its gradients are this op with other
// transposes. Every tensor is float32 and row-major; its shapes give only
// the examples (the first dimension of each, the same) and the element
// counts: a holds batch x M x K values ([M,K] per matrix, or [K,M]
// transposed), b batch x K x N ([K,N], or [N,K] transposed), y batch x M x
// N, where batch is a whole number of matrices per example (one for Keras's
// Dot; MultiHeadAttention's heads for its scores). Its reference and cases:
// common/ops/matmul_op_defs.cc.
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
inline constexpr char kL2Normalize[] = "L2Normalize";
inline constexpr char kL2NormalizeGradient[] = "L2NormalizeGradient";
// Keras's epsilon (backend.epsilon()): a vector's scale is at most its
// inverse.
inline constexpr float kNormalizeEpsilon = 1e-7f;

// The shared checks: float32 tensors of the same examples, and M, K, N >=
// 1 such that a holds batch x M x K values, b batch x K x N and y batch x M
// x N for one batch, a whole number of matrices per example (no overflow).
// INVALID_ARGUMENT naming `op` and the tensor; *batch gets the batch.
absl::Status CheckBatchMatMul(const char* op, const DeviceTensor& a, const DeviceTensor& b,
                              const OpAttrs::MatMul& mm, const DeviceTensor& y, int64_t* batch);

// Any a of at least two dimensions (kernel_registry.h's Accepts).
inline bool Accepts(const OpSpec& s) { return s.input.size() >= 2; }

// y[i] = op(a[i])·op(b[i]) for each matrix i, op the transpose where the
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

// The normalization ops' checks: x (and dy, dx) float32 holding batch x M
// x K values (attrs.matmul's m and k; transpose_a: each example stored
// [K,M]), epsilon > 0. INVALID_ARGUMENT naming `op` and the tensor.
absl::Status CheckL2Normalize(const char* op, const DeviceTensor& x, const OpAttrs& attrs,
                              const DeviceTensor& y, int64_t* batch);

// Dot(normalize=True)'s operands (normalize_math.h): y = each of x's
// vectors along K scaled to unit L2 norm (the scale capped at 1 / epsilon),
// x an operand of BatchMatMul as its `a` (transpose_a: stored [K,M]).
inline absl::Status L2Normalize(ComputeBackend* be, const DeviceTensor& x, int64_t m, int64_t k,
                                bool transposed, DeviceTensor* y) {
  OpAttrs attrs;
  attrs.matmul = {m, k, 1, transposed, false};
  attrs.epsilon = kNormalizeEpsilon;
  const DeviceTensor* in[] = {&x};
  DeviceTensor* out[] = {y};
  return be->Run(kL2Normalize, in, attrs, out);
}

// dx from dy, the gradient of L2Normalize's y (x: its input).
inline absl::Status L2NormalizeGradient(ComputeBackend* be, const DeviceTensor& x,
                                        const DeviceTensor& dy, int64_t m, int64_t k,
                                        bool transposed, DeviceTensor* dx) {
  OpAttrs attrs;
  attrs.matmul = {m, k, 1, transposed, false};
  attrs.epsilon = kNormalizeEpsilon;
  const DeviceTensor* in[] = {&x, &dy};
  DeviceTensor* out[] = {dx};
  return be->Run(kL2NormalizeGradient, in, attrs, out);
}

// Any x of at least one dimension.
inline bool AcceptsNormalize(const OpSpec& s) { return !s.input.empty(); }

}  // namespace matmul
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_MATMUL_OPS_H_
