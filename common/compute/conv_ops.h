// The convolution ops: registered kernels (kernel_registry.h) on every
// backend, called through ComputeBackend::Run, as elementwise_ops.h. x is
// [N,H,W,C], the kernel w [KH,KW,C/groups,K] (Keras's HWIO, Window::Kernel)
// with KH x KW the window's size, the bias [K]; y [N,OH,OW,K] with OH, OW
// as Window::Output. The window (OpAttrs::window) holds the strides,
// padding, dilation and groups (backend.h). Every tensor is float32. Their
// references and cases: common/ops/conv_op_defs.cc.
#ifndef PSC_COMMON_COMPUTE_CONV_OPS_H_
#define PSC_COMMON_COMPUTE_CONV_OPS_H_

#include "absl/status/status.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace conv {

inline constexpr char kConv2D[] = "Conv2D";
inline constexpr char kConv2DBackwardData[] = "Conv2DBackwardData";
inline constexpr char kConv2DBackwardWeights[] = "Conv2DBackwardWeights";

// y = relu?(conv(x, w) + b); b null for no bias (input 2 is optional).
// Attributes: window, relu.
inline absl::Status Conv2D(ComputeBackend* be, const DeviceTensor& x, const DeviceTensor& w,
                           const DeviceTensor* b, const Window& window, bool relu,
                           DeviceTensor* y) {
  OpAttrs a;
  a.window = window;
  a.relu = relu;
  const DeviceTensor* in[] = {&x, &w, b};
  DeviceTensor* out[] = {y};
  return be->Run(kConv2D, in, a, out);
}

// dx [N,H,W,C] = the gradient w.r.t. x of sum(conv(x, w) * dy), given
// dy [N,OH,OW,K]; dx's shape gives H and W (so do the attributes x_height
// and x_width, which the kernels check when they are set). Input positions
// no window reads get 0. Attributes: window, x_height, x_width.
inline absl::Status Conv2DBackwardData(ComputeBackend* be, const DeviceTensor& dy,
                                       const DeviceTensor& w, const Window& window,
                                       DeviceTensor* dx) {
  OpAttrs a;
  a.window = window;
  if (dx->shape().size() == 4) {
    a.x_height = dx->shape()[1];
    a.x_width = dx->shape()[2];
  }
  const DeviceTensor* in[] = {&dy, &w};
  DeviceTensor* out[] = {dx};
  return be->Run(kConv2DBackwardData, in, a, out);
}

// dw [KH,KW,C/groups,K] and db [K] (null: none; output 1 is optional),
// given x and dy. Attribute: window.
inline absl::Status Conv2DBackwardWeights(ComputeBackend* be, const DeviceTensor& x,
                                          const DeviceTensor& dy, const Window& window,
                                          DeviceTensor* dw, DeviceTensor* db) {
  OpAttrs a;
  a.window = window;
  const DeviceTensor* in[] = {&x, &dy};
  DeviceTensor* out[] = {dw, db};
  return be->Run(kConv2DBackwardWeights, in, a, out);
}

// Whether a capability query's convolution is one the ops define: the
// window has an output on the input [N,H,W,C] and the kernel, where the
// query has one, is the window's from C to its K channels. Every
// backend's convolution kernels accept at least this (Accepts).
inline bool Accepts(const OpSpec& s) {
  if (!CheckWindow(s.op.c_str(), s.window, s.input).ok()) return false;
  return s.kernel.empty() ||
         (s.kernel.size() == 4 &&
          CheckConvKernel(s.op.c_str(), "kernel", s.window, s.input[3], s.kernel[3], s.kernel)
              .ok());
}

// The checks every backend's kernels make of their tensors before they
// run (INVALID_ARGUMENT naming the op and tensor otherwise): float32, the
// window's output on x, the kernel the window's from C to K channels, the
// bias and its gradient [K], dx of the attributes' height and width where
// they are set.
absl::Status CheckConv2D(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor* b,
                         const OpAttrs& a, const DeviceTensor& y);
absl::Status CheckConv2DBackwardData(const DeviceTensor& dy, const DeviceTensor& w,
                                     const OpAttrs& a, const DeviceTensor& dx);
absl::Status CheckConv2DBackwardWeights(const DeviceTensor& x, const DeviceTensor& dy,
                                        const OpAttrs& a, const DeviceTensor& dw,
                                        const DeviceTensor* db);

}  // namespace conv
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CONV_OPS_H_
