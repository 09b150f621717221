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
#include "absl/strings/str_cat.h"
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

// The kernels' check of dx [N,H,W,C] against x_height and x_width where
// they are set: INVALID_ARGUMENT naming the op otherwise.
inline absl::Status CheckDataExtent(const OpAttrs& a, const DeviceTensor& dx) {
  if ((a.x_height == 0 && a.x_width == 0) ||
      (dx.shape().size() == 4 && dx.shape()[1] == a.x_height && dx.shape()[2] == a.x_width)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(kConv2DBackwardData, ": dx has shape ",
                                                 ShapeText(dx.shape()), ", want height ",
                                                 a.x_height, " and width ", a.x_width));
}

}  // namespace conv
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CONV_OPS_H_
