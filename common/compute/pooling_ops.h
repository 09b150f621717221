// The pooling ops: registered kernels (kernel_registry.h) on every backend,
// called through ComputeBackend::Run, as elementwise_ops.h. x is
// [N,H,W,C]; a window has no dilation or groups (CheckPoolWindow); every
// tensor is float32. Their references and cases: common/ops/pooling_op_defs.cc.
#ifndef PSC_COMMON_COMPUTE_POOLING_OPS_H_
#define PSC_COMMON_COMPUTE_POOLING_OPS_H_

#include "absl/status/status.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace pooling {

inline constexpr char kMaxPool[] = "MaxPool";
inline constexpr char kMaxPoolBackward[] = "MaxPoolBackward";
inline constexpr char kAvgPool[] = "AvgPool";
inline constexpr char kAvgPoolBackward[] = "AvgPoolBackward";
inline constexpr char kGlobalPool[] = "GlobalPool";
inline constexpr char kGlobalPoolBackward[] = "GlobalPoolBackward";

// Capability queries the pooling kernels accept (kernel_registry.h's
// Accepts): a window with an output on an [N,H,W,C] input and neither
// dilation nor groups (MaxPool, AvgPool and their gradients); any
// [N,H,W,C] input (GlobalPool and its gradient).
inline bool AcceptsWindow(const OpSpec& s) {
  return CheckPoolWindow(s.op.c_str(), s.window, s.input).ok();
}
inline bool AcceptsImage(const OpSpec& s) { return s.input.size() == 4; }

namespace internal {
inline absl::Status RunWindowed(ComputeBackend* be, const char* op, const Window& window,
                                absl::Span<const DeviceTensor* const> in, DeviceTensor* out) {
  OpAttrs a;
  a.window = window;
  DeviceTensor* outs[] = {out};
  return be->Run(op, in, a, outs);
}
inline absl::Status RunGlobal(ComputeBackend* be, const char* op, GlobalPooling kind,
                              absl::Span<const DeviceTensor* const> in, DeviceTensor* out) {
  OpAttrs a;
  a.pooling = kind;
  DeviceTensor* outs[] = {out};
  return be->Run(op, in, a, outs);
}
}  // namespace internal

// y [N,OH,OW,C] = the maximum over each window of x; padding never wins
// (every window holds at least one input element).
inline absl::Status MaxPool(ComputeBackend* be, const DeviceTensor& x, const Window& window,
                            DeviceTensor* y) {
  const DeviceTensor* in[] = {&x};
  return internal::RunWindowed(be, kMaxPool, window, in, y);
}
// dx [N,H,W,C]: each window's dy goes to its maximum (the first in
// row-major window order on ties) and overlapping windows add up; an
// element no window takes gets 0.
inline absl::Status MaxPoolBackward(ComputeBackend* be, const DeviceTensor& x,
                                    const DeviceTensor& dy, const Window& window,
                                    DeviceTensor* dx) {
  const DeviceTensor* in[] = {&x, &dy};
  return internal::RunWindowed(be, kMaxPoolBackward, window, in, dx);
}
// y [N,OH,OW,C] = the mean of each window's elements inside x (padding is
// not counted, as Keras's "same" average pooling).
inline absl::Status AvgPool(ComputeBackend* be, const DeviceTensor& x, const Window& window,
                            DeviceTensor* y) {
  const DeviceTensor* in[] = {&x};
  return internal::RunWindowed(be, kAvgPool, window, in, y);
}
// dx (x's shape): each window's dy divided by its count of elements inside
// x, added to each of them; 0 where no window reads. x gives the shape only.
inline absl::Status AvgPoolBackward(ComputeBackend* be, const DeviceTensor& x,
                                    const DeviceTensor& dy, const Window& window,
                                    DeviceTensor* dx) {
  const DeviceTensor* in[] = {&x, &dy};
  return internal::RunWindowed(be, kAvgPoolBackward, window, in, dx);
}
// y [N,C] = the mean or the maximum over H and W of x.
inline absl::Status GlobalPool(ComputeBackend* be, GlobalPooling kind, const DeviceTensor& x,
                               DeviceTensor* y) {
  const DeviceTensor* in[] = {&x};
  return internal::RunGlobal(be, kGlobalPool, kind, in, y);
}
// dx [N,H,W,C], given x and dy [N,C]: average, dy / (H * W) everywhere;
// max, dy at each channel's first maximum in row-major order, 0 elsewhere.
inline absl::Status GlobalPoolBackward(ComputeBackend* be, GlobalPooling kind,
                                       const DeviceTensor& x, const DeviceTensor& dy,
                                       DeviceTensor* dx) {
  const DeviceTensor* in[] = {&x, &dy};
  return internal::RunGlobal(be, kGlobalPoolBackward, kind, in, dx);
}

}  // namespace pooling
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_POOLING_OPS_H_
