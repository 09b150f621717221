#include "common/compute/conv_ops.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace conv {

absl::Status CheckConv2D(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor* b,
                         const OpAttrs& a, const DeviceTensor& y) {
  constexpr const char* kOp = kConv2D;
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "x", x));
  PSC_RETURN_IF_ERROR(CheckWindow(kOp, a.window, x.shape()));
  PSC_RETURN_IF_ERROR(WantRank(kOp, "w", w, 4));
  const int64_t k = w.shape()[3];
  PSC_RETURN_IF_ERROR(CheckConvKernel(kOp, "w", a.window, x.shape()[3], k, w.shape()));
  if (b != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "b", *b, {k}));
  return WantShape(kOp, "y", y, a.window.Output(x.shape(), k));
}

absl::Status CheckConv2DBackwardData(const DeviceTensor& dy, const DeviceTensor& w,
                                     const OpAttrs& a, const DeviceTensor& dx) {
  constexpr const char* kOp = kConv2DBackwardData;
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dy", dy));
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dx", dx));
  PSC_RETURN_IF_ERROR(CheckWindow(kOp, a.window, dx.shape()));
  PSC_RETURN_IF_ERROR(WantRank(kOp, "w", w, 4));
  const int64_t k = w.shape()[3];
  PSC_RETURN_IF_ERROR(CheckConvKernel(kOp, "w", a.window, dx.shape()[3], k, w.shape()));
  if ((a.x_height != 0 || a.x_width != 0) &&
      (dx.shape()[1] != a.x_height || dx.shape()[2] != a.x_width)) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": dx has shape ", ShapeText(dx.shape()),
                                                   ", want height ", a.x_height, " and width ",
                                                   a.x_width));
  }
  return WantShape(kOp, "dy", dy, a.window.Output(dx.shape(), k));
}

absl::Status CheckConv2DBackwardWeights(const DeviceTensor& x, const DeviceTensor& dy,
                                        const OpAttrs& a, const DeviceTensor& dw,
                                        const DeviceTensor* db) {
  constexpr const char* kOp = kConv2DBackwardWeights;
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "x", x));
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dw", dw));
  PSC_RETURN_IF_ERROR(CheckWindow(kOp, a.window, x.shape()));
  PSC_RETURN_IF_ERROR(WantRank(kOp, "dy", dy, 4));
  const int64_t k = dy.shape()[3];
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, a.window.Output(x.shape(), k)));
  PSC_RETURN_IF_ERROR(CheckConvKernel(kOp, "dw", a.window, x.shape()[3], k, dw.shape()));
  if (db != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "db", *db, {k}));
  return absl::OkStatus();
}

}  // namespace conv
}  // namespace compute
}  // namespace psc
