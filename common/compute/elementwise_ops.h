// The elementwise ops: registered kernels (kernel_registry.h) on every
// backend, called through ComputeBackend::Run. Each function below names
// its op, packs its tensors and attributes in the op's order and runs it;
// its comment is the op's contract, and common/ops/elementwise_op_defs.cc
// its shape rule and double-precision reference. Every tensor is float32
// (INVALID_ARGUMENT otherwise) and every output is allocated with the
// input's shape.
#ifndef PSC_COMMON_COMPUTE_ELEMENTWISE_OPS_H_
#define PSC_COMMON_COMPUTE_ELEMENTWISE_OPS_H_

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"
#include "common/compute/transpose_math.h"

namespace psc {
namespace compute {
namespace elementwise {

// The registered names.
inline constexpr char kActivate[] = "Activate";
inline constexpr char kActivateBackward[] = "ActivateBackward";
inline constexpr char kAdd[] = "Add";
inline constexpr char kCopy[] = "Copy";
inline constexpr char kScale[] = "Scale";
inline constexpr char kMultiply[] = "Multiply";
inline constexpr char kExtremum[] = "Extremum";
inline constexpr char kExtremumGradient[] = "ExtremumGradient";
inline constexpr char kReluBackward[] = "ReluBackward";
inline constexpr char kCopyBlock[] = "CopyBlock";
inline constexpr char kTranspose[] = "Transpose";
inline constexpr char kCast[] = "Cast";

// y = f(x) elementwise, any shape (y's); softmax over the last axis. y may
// be x. Attributes: activation, alpha.
inline absl::Status Activate(ComputeBackend* be, Activation f, float alpha, const DeviceTensor& x,
                             DeviceTensor* y) {
  OpAttrs a;
  a.activation = f;
  a.alpha = alpha;
  const DeviceTensor* in[] = {&x};
  DeviceTensor* out[] = {y};
  return be->Run(kActivate, in, a, out);
}

// dx = dy * f'(x), from the activation's output y: relu and leaky_relu
// (alpha > 0) 1 where y > 0, else 0 or alpha; sigmoid y * (1 - y); tanh
// 1 - y * y. For gelu and silu (GradientFromInput) `y` is the input x.
// dx may be dy. Inputs y, dy; attributes activation, alpha.
inline absl::Status ActivateBackward(ComputeBackend* be, Activation f, float alpha,
                                     const DeviceTensor& y, const DeviceTensor& dy,
                                     DeviceTensor* dx) {
  OpAttrs a;
  a.activation = f;
  a.alpha = alpha;
  const DeviceTensor* in[] = {&y, &dy};
  DeviceTensor* out[] = {dx};
  return be->Run(kActivateBackward, in, a, out);
}

// y = a + b elementwise; a, b and y of one shape. y may be a or b.
inline absl::Status Add(ComputeBackend* be, const DeviceTensor& a, const DeviceTensor& b,
                        DeviceTensor* y) {
  const DeviceTensor* in[] = {&a, &b};
  DeviceTensor* out[] = {y};
  return be->Run(kAdd, in, OpAttrs(), out);
}

// y = x, of one shape. y may not be x.
inline absl::Status Copy(ComputeBackend* be, const DeviceTensor& x, DeviceTensor* y) {
  const DeviceTensor* in[] = {&x};
  DeviceTensor* out[] = {y};
  return be->Run(kCopy, in, OpAttrs(), out);
}

// y = s * x elementwise, of one shape. y may be x. Attribute: scalar.
inline absl::Status Scale(ComputeBackend* be, const DeviceTensor& x, float s, DeviceTensor* y) {
  OpAttrs a;
  a.scalar = s;
  const DeviceTensor* in[] = {&x};
  DeviceTensor* out[] = {y};
  return be->Run(kScale, in, a, out);
}

// y = a * b elementwise; a, b and y of one shape. y may be a.
inline absl::Status Multiply(ComputeBackend* be, const DeviceTensor& a, const DeviceTensor& b,
                             DeviceTensor* y) {
  const DeviceTensor* in[] = {&a, &b};
  DeviceTensor* out[] = {y};
  return be->Run(kMultiply, in, OpAttrs(), out);
}

// y = max(a, b) (max) or min(a, b) elementwise, of one shape. y may be a
// or b. Attribute: max.
inline absl::Status Extremum(ComputeBackend* be, bool max, const DeviceTensor& a,
                             const DeviceTensor& b, DeviceTensor* y) {
  OpAttrs attrs;
  attrs.max = max;
  const DeviceTensor* in[] = {&a, &b};
  DeviceTensor* out[] = {y};
  return be->Run(kExtremum, in, attrs, out);
}

// da = dy where a wins (a > b for max, a < b for min), dy / 2 where they
// tie, 0 elsewhere: Extremum's gradient to a (to b with a and b swapped),
// as JAX's max and min share a tie. da may be dy. Attribute: max.
inline absl::Status ExtremumGradient(ComputeBackend* be, bool max, const DeviceTensor& a,
                                     const DeviceTensor& b, const DeviceTensor& dy,
                                     DeviceTensor* da) {
  OpAttrs attrs;
  attrs.max = max;
  const DeviceTensor* in[] = {&a, &b, &dy};
  DeviceTensor* out[] = {da};
  return be->Run(kExtremumGradient, in, attrs, out);
}

// dx = dy where y > 0, else 0; y is the output of a ReLU fused into a
// Conv2D or Dense. dx may be dy.
inline absl::Status ReluBackward(ComputeBackend* be, const DeviceTensor& y, const DeviceTensor& dy,
                                 DeviceTensor* dx) {
  const DeviceTensor* in[] = {&y, &dy};
  DeviceTensor* out[] = {dx};
  return be->Run(kReluBackward, in, OpAttrs(), out);
}

// y = y_in with a block of x's columns written over a block of its own:
// both tensors seen as row-major matrices of `rows` rows (x of x_cols
// columns, y of y_cols), for every row r, columns [x_first, x_first +
// cols) of x go to columns [y_first, y_first + cols) of y, the rest of y
// is y_in's. The call below passes y as y_in, so the rest of y is left as
// it is (Concatenate, Flatten, ZeroPadding2D, Cropping2D). INVALID_ARGUMENT
// if either tensor is not rows x its columns, a block leaves its matrix,
// y_in is not of y's shape, or y is x. Inputs x, y_in; attribute block.
inline absl::Status CopyBlock(ComputeBackend* be, const DeviceTensor& x, int64_t x_cols,
                              int64_t x_first, DeviceTensor* y, int64_t y_cols, int64_t y_first,
                              int64_t rows, int64_t cols) {
  OpAttrs a;
  a.block = {rows, cols, x_cols, x_first, y_cols, y_first};
  const DeviceTensor* in[] = {&x, y};
  DeviceTensor* out[] = {y};
  return be->Run(kCopyBlock, in, a, out);
}

// y = x with its axes permuted: y's axis i is x's axis perm[i], y of
// shape [x.shape[perm[0]], ...] (Keras's Permute, and a softmax over
// another axis than the last; the executor holds a (steps, channels)
// example as [N,1,steps,channels], layer_graph.h). Rank 1 to
// kMaxTransposeRank. y may not be x. Attribute: perm.
inline constexpr int kMaxTransposeRank = TransposePlan::kMaxRank;
inline absl::Status Transpose(ComputeBackend* be, const DeviceTensor& x, std::vector<int> perm,
                              DeviceTensor* y) {
  OpAttrs a;
  a.perm = std::move(perm);
  const DeviceTensor* in[] = {&x};
  DeviceTensor* out[] = {y};
  return be->Run(kTranspose, in, a, out);
}

// The shared checks of Transpose: x and y float32, `perm` a permutation of
// x's axes, y of the permuted shape, y not x. INVALID_ARGUMENT naming the
// op. *plan: the index map (transpose_math.h).
absl::Status CheckTranspose(const DeviceTensor& x, const std::vector<int>& perm,
                            const DeviceTensor& y, TransposePlan* plan);

// y = x converted to y's dtype, any shape (y's, x's element count): float32,
// bfloat16 and float16 each way (and float32 to float32, a copy), rounded
// to nearest, ties to even; NaN and infinities kept, a float beyond
// float16's range becomes infinity, as Keras's cast does. The only op whose
// tensors' dtypes differ by contract (kernel_registry.h's KernelDtypes).
// Attribute: dtype (y's, for the reference).
// The checks every backend's Cast kernel makes: both floats, as many
// elements, two tensors. INVALID_ARGUMENT naming the op otherwise.
absl::Status CheckCast(const DeviceTensor& x, const DeviceTensor& y);
inline absl::Status Cast(ComputeBackend* be, const DeviceTensor& x, DeviceTensor* y) {
  OpAttrs a;
  a.dtype = y->dtype();
  const DeviceTensor* in[] = {&x};
  DeviceTensor* out[] = {y};
  return be->Run(kCast, in, a, out);
}

}  // namespace elementwise
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_ELEMENTWISE_OPS_H_
