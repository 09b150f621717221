#include "common/compute/cuda/cuda_pooling_kernels.h"

#include <cstdint>

#include "common/base/status_macros.h"
#include "common/compute/cuda/cuda_kernel_math.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_status.h"
#include "common/compute/pooling_ops.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

math::PoolGeometry PoolGeometryOf(const Shape& x, const Window& window) {
  const WindowExtent rows = window.Rows(x[1]), cols = window.Cols(x[2]);
  return {x[0],
          x[1],
          x[2],
          x[3],
          rows.out,
          cols.out,
          window.height,
          window.width,
          window.stride_h,
          window.stride_w,
          rows.before,
          cols.before};
}

// The checks of a pooling op: the window, y of its output shape; then the
// device entered.
absl::StatusOr<math::PoolGeometry> PoolCheck(CudaKernelContext& c, const char* op,
                                             const DeviceTensor& x, const Window& window,
                                             const DeviceTensor& y) {
  PSC_RETURN_IF_ERROR(WantFloat(op, "x", x));
  PSC_RETURN_IF_ERROR(CheckPoolWindow(op, window, x.shape()));
  PSC_RETURN_IF_ERROR(WantShape(op, "y", y, window.Output(x.shape(), x.shape()[3])));
  PSC_RETURN_IF_ERROR(c.Elementwise(op, x));
  return PoolGeometryOf(x.shape(), window);
}

// The same for a backward pass: dy of y's shape, dx of x's.
absl::StatusOr<math::PoolGeometry> PoolBackwardCheck(CudaKernelContext& c, const char* op,
                                                     const DeviceTensor& x, const DeviceTensor& dy,
                                                     const Window& window, const DeviceTensor& dx) {
  PSC_RETURN_IF_ERROR(WantFloat(op, "x", x));
  PSC_RETURN_IF_ERROR(CheckPoolWindow(op, window, x.shape()));
  PSC_RETURN_IF_ERROR(WantShape(op, "dy", dy, window.Output(x.shape(), x.shape()[3])));
  PSC_RETURN_IF_ERROR(WantShape(op, "dx", dx, x.shape()));
  PSC_RETURN_IF_ERROR(c.Elementwise(op, x));
  return PoolGeometryOf(x.shape(), window);
}

absl::Status MaxPoolKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                           KernelOutputs out) {
  PSC_ASSIGN_OR_RETURN(math::PoolGeometry g,
                       PoolCheck(c, pooling::kMaxPool, *in[0], a.window, *out[0]));
  PSC_CUDA_RETURN_IF_ERROR(cuda::MaxPool(c.DataOf(*in[0]), c.DataOf(*out[0]), g, c.stream()));
  return absl::OkStatus();
}

absl::Status MaxPoolBackwardKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                                   KernelOutputs out) {
  const DeviceTensor &x = *in[0], &dy = *in[1];
  DeviceTensor* dx = out[0];
  PSC_ASSIGN_OR_RETURN(math::PoolGeometry g,
                       PoolBackwardCheck(c, pooling::kMaxPoolBackward, x, dy, a.window, *dx));
  if (dx->size() == 0) return absl::OkStatus();
  PSC_ASSIGN_OR_RETURN(void* argmax, c.KernelScratch(dy.size() * sizeof(int32_t)));
  PSC_CUDA_RETURN_IF_ERROR(cuda::MaxPoolBackward(
      c.DataOf(x), c.DataOf(dy), static_cast<int32_t*>(argmax), c.DataOf(*dx), g, c.stream()));
  return absl::OkStatus();
}

absl::Status AvgPoolKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                           KernelOutputs out) {
  PSC_ASSIGN_OR_RETURN(math::PoolGeometry g,
                       PoolCheck(c, pooling::kAvgPool, *in[0], a.window, *out[0]));
  PSC_CUDA_RETURN_IF_ERROR(cuda::AvgPool(c.DataOf(*in[0]), c.DataOf(*out[0]), g, c.stream()));
  return absl::OkStatus();
}

absl::Status AvgPoolBackwardKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                                   KernelOutputs out) {
  PSC_ASSIGN_OR_RETURN(math::PoolGeometry g, PoolBackwardCheck(c, pooling::kAvgPoolBackward, *in[0],
                                                               *in[1], a.window, *out[0]));
  PSC_CUDA_RETURN_IF_ERROR(
      cuda::AvgPoolBackward(c.DataOf(*in[1]), c.DataOf(*out[0]), g, c.stream()));
  return absl::OkStatus();
}

absl::Status GlobalPoolKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                              KernelOutputs out) {
  constexpr const char* kOp = pooling::kGlobalPool;
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "x", x));
  PSC_RETURN_IF_ERROR(WantRank(kOp, "x", x, 4));
  const int64_t n = x.shape()[0], hw = x.shape()[1] * x.shape()[2], ch = x.shape()[3];
  PSC_RETURN_IF_ERROR(WantShape(kOp, "y", *y, {n, ch}));
  PSC_RETURN_IF_ERROR(c.Elementwise(kOp, x));
  PSC_CUDA_RETURN_IF_ERROR(cuda::GlobalPool(c.DataOf(x), c.DataOf(*y), n, hw, ch,
                                            a.pooling == GlobalPooling::kMax, c.stream()));
  return absl::OkStatus();
}

absl::Status GlobalPoolBackwardKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                                      KernelOutputs out) {
  constexpr const char* kOp = pooling::kGlobalPoolBackward;
  const DeviceTensor &x = *in[0], &dy = *in[1];
  DeviceTensor* dx = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "x", x));
  PSC_RETURN_IF_ERROR(WantRank(kOp, "x", x, 4));
  const int64_t n = x.shape()[0], hw = x.shape()[1] * x.shape()[2], ch = x.shape()[3];
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, {n, ch}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, x.shape()));
  PSC_RETURN_IF_ERROR(c.Elementwise(kOp, x));
  PSC_CUDA_RETURN_IF_ERROR(cuda::GlobalPoolBackward(c.DataOf(x), c.DataOf(dy), c.DataOf(*dx), n, hw,
                                                    ch, a.pooling == GlobalPooling::kMax,
                                                    c.stream()));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCudaPoolingKernels(CudaKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CudaKernelContext> kKernels[] = {
      {pooling::kMaxPool, 1, 1, MaxPoolKernel, {}, pooling::AcceptsWindow},
      {pooling::kMaxPoolBackward, 2, 1, MaxPoolBackwardKernel, {}, pooling::AcceptsWindow},
      {pooling::kAvgPool, 1, 1, AvgPoolKernel, {}, pooling::AcceptsWindow},
      {pooling::kAvgPoolBackward, 2, 1, AvgPoolBackwardKernel, {}, pooling::AcceptsWindow},
      {pooling::kGlobalPool, 1, 1, GlobalPoolKernel, {}, pooling::AcceptsImage},
      {pooling::kGlobalPoolBackward, 2, 1, GlobalPoolBackwardKernel, {}, pooling::AcceptsImage},
  };
  return RegisterKernels<CudaKernelContext>(context, kKernels, registry);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
