#include "common/compute/cuda/cuda_conv_kernels.h"

#include <utility>

#include "common/base/status_macros.h"
#include "common/compute/conv_ops.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_status.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

// The kernels' state: the backend's context and the algorithm choices.
struct ConvState {
  CudaKernelContext* cuda;
  std::shared_ptr<CudaConv> conv;
};

absl::Status Conv2DKernel(ConvState& s, KernelInputs in, const OpAttrs& a, KernelOutputs out) {
  constexpr const char* kOp = conv::kConv2D;
  const DeviceTensor &x = *in[0], &w = *in[1];
  const DeviceTensor* b = in[2];
  DeviceTensor* y = out[0];
  const Window& window = a.window;
  CudaKernelContext& c = *s.cuda;
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "x", x));
  PSC_RETURN_IF_ERROR(CheckWindow(kOp, window, x.shape()));
  PSC_RETURN_IF_ERROR(WantRank(kOp, "w", w, 4));
  const int64_t n = x.shape()[0], h = x.shape()[1], wd = x.shape()[2], ch = x.shape()[3];
  const int64_t k = w.shape()[3];
  PSC_RETURN_IF_ERROR(CheckConvKernel(kOp, "w", window, ch, k, w.shape()));
  if (b != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "b", *b, {k}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "y", *y, window.Output(x.shape(), k)));
  if (y->size() == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(c.Enter());
  if (ch == 0) {  // no input channels: the bias alone
    PSC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(c.DataOf(*y), 0, y->size() * sizeof(float), c.stream()));
  } else {
    PSC_ASSIGN_OR_RETURN(ConvShape shape, MakeConvShape(kOp, n, h, wd, ch, k, window));
    PSC_RETURN_IF_ERROR(s.conv->Forward(shape, c.DataOf(x), c.DataOf(w), c.DataOf(*y)));
  }
  if (b == nullptr && !a.relu) return absl::OkStatus();
  PSC_CUDA_RETURN_IF_ERROR(BiasActivation(c.DataOf(*y), b == nullptr ? nullptr : c.DataOf(*b),
                                          y->size(), k, a.relu, c.stream()));
  return absl::OkStatus();
}

absl::Status Conv2DBackwardDataKernel(ConvState& s, KernelInputs in, const OpAttrs& a,
                                      KernelOutputs out) {
  constexpr const char* kOp = conv::kConv2DBackwardData;
  const DeviceTensor &dy = *in[0], &w = *in[1];
  DeviceTensor* dx = out[0];
  const Window& window = a.window;
  CudaKernelContext& c = *s.cuda;
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dy", dy));
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dx", *dx));
  PSC_RETURN_IF_ERROR(WantRank(kOp, "dx", *dx, 4));
  PSC_RETURN_IF_ERROR(CheckWindow(kOp, window, dx->shape()));
  PSC_RETURN_IF_ERROR(WantRank(kOp, "w", w, 4));
  const Shape& xs = dx->shape();
  const int64_t n = xs[0], h = xs[1], wd = xs[2], ch = xs[3];
  const int64_t k = w.shape()[3];
  PSC_RETURN_IF_ERROR(CheckConvKernel(kOp, "w", window, ch, k, w.shape()));
  PSC_RETURN_IF_ERROR(conv::CheckDataExtent(a, *dx));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, window.Output(xs, k)));
  if (dx->size() == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(c.Enter());
  if (k == 0) {  // no output channels: no gradient
    PSC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(c.DataOf(*dx), 0, dx->size() * sizeof(float), c.stream()));
    return absl::OkStatus();
  }
  PSC_ASSIGN_OR_RETURN(ConvShape shape, MakeConvShape(kOp, n, h, wd, ch, k, window));
  return s.conv->BackwardData(shape, c.DataOf(dy), c.DataOf(w), c.DataOf(*dx));
}

absl::Status Conv2DBackwardWeightsKernel(ConvState& s, KernelInputs in, const OpAttrs& a,
                                         KernelOutputs out) {
  constexpr const char* kOp = conv::kConv2DBackwardWeights;
  const DeviceTensor &x = *in[0], &dy = *in[1];
  DeviceTensor *dw = out[0], *db = out[1];
  const Window& window = a.window;
  CudaKernelContext& c = *s.cuda;
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "x", x));
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dw", *dw));
  PSC_RETURN_IF_ERROR(CheckWindow(kOp, window, x.shape()));
  PSC_RETURN_IF_ERROR(WantRank(kOp, "dy", dy, 4));
  const int64_t n = x.shape()[0], h = x.shape()[1], wd = x.shape()[2], ch = x.shape()[3];
  const int64_t k = dy.shape()[3];
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, window.Output(x.shape(), k)));
  PSC_RETURN_IF_ERROR(CheckConvKernel(kOp, "dw", window, ch, k, dw->shape()));
  if (db != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "db", *db, {k}));
  if (k == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(c.Enter());
  if (dw->size() > 0 && n == 0) {  // no examples: no gradient
    PSC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(c.DataOf(*dw), 0, dw->size() * sizeof(float), c.stream()));
  } else if (dw->size() > 0) {
    PSC_ASSIGN_OR_RETURN(ConvShape shape, MakeConvShape(kOp, n, h, wd, ch, k, window));
    PSC_RETURN_IF_ERROR(s.conv->BackwardFilter(shape, c.DataOf(x), c.DataOf(dy), c.DataOf(*dw)));
  }
  if (db == nullptr) return absl::OkStatus();
  return c.ColumnSums(c.DataOf(dy), dy.size() / k, k, c.DataOf(*db));
}

}  // namespace

absl::StatusOr<std::shared_ptr<CudaConv>> RegisterCudaConvKernels(CudaKernelContext* context,
                                                                  const CudaContext* shared,
                                                                  KernelRegistry* registry) {
  static constexpr KernelEntry<ConvState> kKernels[] = {
      {conv::kConv2D, 3, 1, Conv2DKernel, {/*inputs=*/0b100, 0}},
      {conv::kConv2DBackwardData, 2, 1, Conv2DBackwardDataKernel},
      {conv::kConv2DBackwardWeights, 2, 2, Conv2DBackwardWeightsKernel, {0, /*outputs=*/0b10}},
  };
  auto state = std::make_shared<ConvState>();
  state->cuda = context;
  state->conv = std::make_shared<CudaConv>(shared);
  PSC_RETURN_IF_ERROR(RegisterKernels<ConvState>(state, kKernels, registry));
  return state->conv;
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
