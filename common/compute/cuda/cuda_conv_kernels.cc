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

// The dtype a kernel computes in: its two activations' (the predicates
// below give it 16-bit ones only when they share the format), else
// INVALID_ARGUMENT naming them.
absl::StatusOr<DType> ActivationDtype(const char* op, const char* a_name, const DeviceTensor& a,
                                      const char* b_name, const DeviceTensor& b) {
  if (a.dtype() != b.dtype() && (IsLowPrecision(a.dtype()) || IsLowPrecision(b.dtype()))) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", a_name, " ", DTypeName(a.dtype()),
                                                   " and ", b_name, " ", DTypeName(b.dtype()),
                                                   " differ"));
  }
  return a.dtype();
}

// bfloat16 and float16 (cuda_conv.h) where the two activations share the
// format; otherwise ComputeBackend::Run gives float32 copies (a first
// layer's float32 input with a 16-bit output).
bool TakesConv16(KernelInputs in, const OpAttrs&, KernelOutputs out) {
  return SameDtype(in[0], out[0]);
}
bool TakesConvBackwardWeights16(KernelInputs in, const OpAttrs&, KernelOutputs) {
  return SameDtype(in[0], in[1]);
}

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
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "w", &w));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "b", b));
  const int64_t n = x.shape()[0], h = x.shape()[1], wd = x.shape()[2], ch = x.shape()[3];
  const int64_t k = w.shape()[3];
  PSC_ASSIGN_OR_RETURN(const DType t, ActivationDtype(kOp, "x", x, "y", *y));
  if (y->size() == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(c.Enter());
  if (ch == 0) {  // no input channels: the bias alone
    PSC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(c.MemoryOf(*y), 0, y->size() * DTypeSize(t), c.stream()));
  } else {
    PSC_ASSIGN_OR_RETURN(ConvShape shape, MakeConvShape(kOp, n, h, wd, ch, k, window));
    shape.dtype = t;
    PSC_RETURN_IF_ERROR(s.conv->Forward(shape, c.MemoryOf(x), c.DataOf(w), c.MemoryOf(*y)));
  }
  if (b == nullptr && !a.relu) return absl::OkStatus();
  // In a 16-bit format the bias and ReLU round cuDNN's rounded output
  // again, as TensorFlow's BiasAdd after a 16-bit Conv2D does.
  PSC_CUDA_RETURN_IF_ERROR(BiasActivationAs(c.MemoryOf(*y), CastCode(t),
                                            b == nullptr ? nullptr : c.DataOf(*b), y->size(), k,
                                            a.relu, c.stream()));
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
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "w", &w));
  const Shape& xs = dx->shape();
  const int64_t n = xs[0], h = xs[1], wd = xs[2], ch = xs[3];
  const int64_t k = w.shape()[3];
  PSC_ASSIGN_OR_RETURN(const DType t, ActivationDtype(kOp, "dy", dy, "dx", *dx));
  if (dx->size() == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(c.Enter());
  if (k == 0) {  // no output channels: no gradient
    PSC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(c.MemoryOf(*dx), 0, dx->size() * DTypeSize(t), c.stream()));
    return absl::OkStatus();
  }
  PSC_ASSIGN_OR_RETURN(ConvShape shape, MakeConvShape(kOp, n, h, wd, ch, k, window));
  shape.dtype = t;
  return s.conv->BackwardData(shape, c.MemoryOf(dy), c.DataOf(w), c.MemoryOf(*dx));
}

absl::Status Conv2DBackwardWeightsKernel(ConvState& s, KernelInputs in, const OpAttrs& a,
                                         KernelOutputs out) {
  constexpr const char* kOp = conv::kConv2DBackwardWeights;
  const DeviceTensor &x = *in[0], &dy = *in[1];
  DeviceTensor *dw = out[0], *db = out[1];
  const Window& window = a.window;
  CudaKernelContext& c = *s.cuda;
  PSC_RETURN_IF_ERROR(conv::CheckConv2DBackwardWeights(x, dy, a, *dw, db));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "dw", dw));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "db", db));
  const int64_t n = x.shape()[0], h = x.shape()[1], wd = x.shape()[2], ch = x.shape()[3];
  const int64_t k = dy.shape()[3];
  PSC_ASSIGN_OR_RETURN(const DType t, ActivationDtype(kOp, "x", x, "dy", dy));
  if (k == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(c.Enter());
  if (dw->size() > 0 && n == 0) {  // no examples: no gradient
    PSC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(c.DataOf(*dw), 0, dw->size() * sizeof(float), c.stream()));
  } else if (dw->size() > 0) {
    PSC_ASSIGN_OR_RETURN(ConvShape shape, MakeConvShape(kOp, n, h, wd, ch, k, window));
    shape.dtype = t;
    PSC_RETURN_IF_ERROR(
        s.conv->BackwardFilter(shape, c.MemoryOf(x), c.MemoryOf(dy), c.DataOf(*dw)));
  }
  if (db == nullptr) return absl::OkStatus();
  if (!IsLowPrecision(t)) return c.ColumnSums(c.DataOf(dy), dy.size() / k, k, c.DataOf(*db));
  // db in float32 from dy widened (the sums in double, as float32's).
  PSC_ASSIGN_OR_RETURN(void* dy32, c.KernelScratch(static_cast<size_t>(dy.size()) * sizeof(float)));
  PSC_CUDA_RETURN_IF_ERROR(
      Cast(c.MemoryOf(dy), CastCode(t), dy32, CastCode(DType::kFloat32), dy.size(), c.stream()));
  return c.ColumnSums(static_cast<const float*>(dy32), dy.size() / k, k, c.DataOf(*db));
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
  PSC_ASSIGN_OR_RETURN(ConvShape shape, MakeConvShape(op, x[0], x[1], x[2], x[3], k, spec.window));
  shape.dtype = spec.dtype;
  return shape;
}

absl::StatusOr<std::shared_ptr<CudaConv>> RegisterCudaConvKernels(CudaKernelContext* context,
                                                                  const CudaContext* shared,
                                                                  KernelRegistry* registry) {
  static constexpr KernelEntry<ConvState> kKernels[] = {
      {conv::kConv2D,
       3,
       1,
       Conv2DKernel,
       {/*inputs=*/0b100, 0},
       Accepts,
       KernelDtypes::kAny,
       TakesConv16,
       /*extra_rounding=*/0b1},  // y: rounded before its bias
      {conv::kConv2DBackwardData,
       2,
       1,
       Conv2DBackwardDataKernel,
       {},
       Accepts,
       KernelDtypes::kAny,
       TakesConv16},
      {conv::kConv2DBackwardWeights,
       2,
       2,
       Conv2DBackwardWeightsKernel,
       {0, /*outputs=*/0b10},
       Accepts,
       KernelDtypes::kAny,
       TakesConvBackwardWeights16,
       /*extra_rounding=*/0b01},  // dw: cuDNN's in the format; db from dy widened
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
