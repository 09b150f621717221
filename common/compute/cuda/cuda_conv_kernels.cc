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
  PSC_RETURN_IF_ERROR(conv::CheckConv2D(x, w, b, a, *y));
  const int64_t n = x.shape()[0], h = x.shape()[1], wd = x.shape()[2], ch = x.shape()[3];
  const int64_t k = w.shape()[3];
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
  PSC_RETURN_IF_ERROR(conv::CheckConv2DBackwardData(dy, w, a, *dx));
  const Shape& xs = dx->shape();
  const int64_t n = xs[0], h = xs[1], wd = xs[2], ch = xs[3];
  const int64_t k = w.shape()[3];
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
  PSC_RETURN_IF_ERROR(conv::CheckConv2DBackwardWeights(x, dy, a, *dw, db));
  const int64_t n = x.shape()[0], h = x.shape()[1], wd = x.shape()[2], ch = x.shape()[3];
  const int64_t k = dy.shape()[3];
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

// The ops' rule (conv::Accepts), and dimensions cuDNN counts in int.
bool Accepts(const OpSpec& spec) { return ConvShapeOf(spec).ok(); }

}  // namespace

absl::StatusOr<ConvShape> ConvShapeOf(const OpSpec& spec) {
  const char* op = spec.op.c_str();
  PSC_RETURN_IF_ERROR(CheckWindow(op, spec.window, spec.input));
  const Shape& x = spec.input;
  int64_t k = 1;
  if (!spec.kernel.empty()) {
    k = spec.kernel.size() == 4 ? spec.kernel[3] : 0;
    PSC_RETURN_IF_ERROR(CheckConvKernel(op, "kernel", spec.window, x[3], k, spec.kernel));
  }
  return MakeConvShape(op, x[0], x[1], x[2], x[3], k, spec.window);
}

absl::StatusOr<std::shared_ptr<CudaConv>> RegisterCudaConvKernels(CudaKernelContext* context,
                                                                  const CudaContext* shared,
                                                                  KernelRegistry* registry) {
  static constexpr KernelEntry<ConvState> kKernels[] = {
      {conv::kConv2D, 3, 1, Conv2DKernel, {/*inputs=*/0b100, 0}, Accepts},
      {conv::kConv2DBackwardData, 2, 1, Conv2DBackwardDataKernel, {}, Accepts},
      {conv::kConv2DBackwardWeights,
       2,
       2,
       Conv2DBackwardWeightsKernel,
       {0, /*outputs=*/0b10},
       Accepts},
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
