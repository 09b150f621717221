#include "common/compute/cuda/cuda_elementwise_kernels.h"

#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/cuda/cuda_handles.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_status.h"
#include "common/compute/elementwise_ops.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

// math::Activate numbers the activations as compute::Activation does.
static_assert(
    static_cast<int>(Activation::kRelu) == 0 && static_cast<int>(Activation::kSigmoid) == 1 &&
    static_cast<int>(Activation::kTanh) == 2 && static_cast<int>(Activation::kLeakyRelu) == 3 &&
    static_cast<int>(Activation::kExponential) == 11 && static_cast<int>(Activation::kGelu) == 12 &&
    static_cast<int>(Activation::kSilu) == 13 && static_cast<int>(Activation::kSoftmax) == 14);

absl::Status ActivateKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                            KernelOutputs out) {
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(elementwise::kActivate, "x", x));
  PSC_RETURN_IF_ERROR(WantShape(elementwise::kActivate, "y", *y, x.shape()));
  PSC_RETURN_IF_ERROR(c.Elementwise(elementwise::kActivate, x));
  if (a.activation == Activation::kSoftmax) {  // over the last axis
    const int64_t cols = x.shape().empty() ? 1 : x.shape().back();
    PSC_CUDA_RETURN_IF_ERROR(cuda::Softmax(c.DataOf(x), c.DataOf(*y),
                                           cols == 0 ? 0 : x.size() / cols, cols, c.stream()));
    return absl::OkStatus();
  }
  PSC_CUDA_RETURN_IF_ERROR(cuda::Activate(static_cast<int>(a.activation), a.alpha, c.DataOf(x),
                                          c.DataOf(*y), x.size(), c.stream()));
  return absl::OkStatus();
}

absl::Status ActivateBackwardKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                                    KernelOutputs out) {
  constexpr const char* kOp = elementwise::kActivateBackward;
  const DeviceTensor &y = *in[0], &dy = *in[1];
  DeviceTensor* dx = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "y", y));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, y.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, y.shape()));
  PSC_RETURN_IF_ERROR(c.Elementwise(kOp, y));
  if (a.activation == Activation::kSoftmax) {
    const int64_t cols = y.shape().empty() ? 1 : y.shape().back();
    PSC_CUDA_RETURN_IF_ERROR(cuda::SoftmaxBackward(c.DataOf(y), c.DataOf(dy), c.DataOf(*dx),
                                                   cols == 0 ? 0 : y.size() / cols, cols,
                                                   c.stream()));
    return absl::OkStatus();
  }
  PSC_CUDA_RETURN_IF_ERROR(cuda::ActivateBackward(static_cast<int>(a.activation), a.alpha,
                                                  c.DataOf(y), c.DataOf(dy), c.DataOf(*dx),
                                                  y.size(), c.stream()));
  return absl::OkStatus();
}

// The checks of an op over a, b and y of one shape.
absl::Status CheckBinary(CudaKernelContext& c, const char* op, KernelInputs in, KernelOutputs out) {
  PSC_RETURN_IF_ERROR(WantFloat(op, "a", *in[0]));
  PSC_RETURN_IF_ERROR(WantShape(op, "b", *in[1], in[0]->shape()));
  PSC_RETURN_IF_ERROR(WantShape(op, "y", *out[0], in[0]->shape()));
  return c.Elementwise(op, *in[0]);
}

absl::Status AddKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&, KernelOutputs out) {
  PSC_RETURN_IF_ERROR(CheckBinary(c, elementwise::kAdd, in, out));
  PSC_CUDA_RETURN_IF_ERROR(
      cuda::Add(c.DataOf(*in[0]), c.DataOf(*in[1]), c.DataOf(*out[0]), in[0]->size(), c.stream()));
  return absl::OkStatus();
}

absl::Status MultiplyKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                            KernelOutputs out) {
  PSC_RETURN_IF_ERROR(CheckBinary(c, elementwise::kMultiply, in, out));
  PSC_CUDA_RETURN_IF_ERROR(cuda::Multiply(c.DataOf(*in[0]), c.DataOf(*in[1]), c.DataOf(*out[0]),
                                          in[0]->size(), c.stream()));
  return absl::OkStatus();
}

absl::Status ExtremumKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                            KernelOutputs out) {
  PSC_RETURN_IF_ERROR(CheckBinary(c, elementwise::kExtremum, in, out));
  PSC_CUDA_RETURN_IF_ERROR(cuda::Extremum(a.max, c.DataOf(*in[0]), c.DataOf(*in[1]),
                                          c.DataOf(*out[0]), in[0]->size(), c.stream()));
  return absl::OkStatus();
}

absl::Status ExtremumGradientKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& attrs,
                                    KernelOutputs out) {
  constexpr const char* kOp = elementwise::kExtremumGradient;
  const DeviceTensor &a = *in[0], &b = *in[1], &dy = *in[2];
  DeviceTensor* da = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "a", a));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "b", b, a.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, a.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "da", *da, a.shape()));
  PSC_RETURN_IF_ERROR(c.Elementwise(kOp, a));
  PSC_CUDA_RETURN_IF_ERROR(cuda::ExtremumGradient(attrs.max, c.DataOf(a), c.DataOf(b), c.DataOf(dy),
                                                  c.DataOf(*da), a.size(), c.stream()));
  return absl::OkStatus();
}

absl::Status ScaleKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                         KernelOutputs out) {
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(elementwise::kScale, "x", x));
  PSC_RETURN_IF_ERROR(WantShape(elementwise::kScale, "y", *y, x.shape()));
  PSC_RETURN_IF_ERROR(c.Elementwise(elementwise::kScale, x));
  PSC_CUDA_RETURN_IF_ERROR(cuda::Scale(c.DataOf(x), a.scalar, c.DataOf(*y), x.size(), c.stream()));
  return absl::OkStatus();
}

absl::Status CopyKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&, KernelOutputs out) {
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(elementwise::kCopy, "x", x));
  PSC_RETURN_IF_ERROR(WantShape(elementwise::kCopy, "y", *y, x.shape()));
  if (&x == y) return absl::InvalidArgumentError("Copy: y is x");
  PSC_RETURN_IF_ERROR(c.Elementwise(elementwise::kCopy, x));
  PSC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(c.DataOf(*y), c.DataOf(x), x.size() * sizeof(float),
                                           cudaMemcpyDeviceToDevice, c.stream()));
  return absl::OkStatus();
}

// Any of float32, bfloat16 and float16 into any (kernel_registry.h's
// KernelDtypes::kAny), element by element (every CUDA tensor is plain).
absl::Status CastKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&, KernelOutputs out) {
  constexpr const char* kOp = elementwise::kCast;
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(elementwise::CheckCast(x, *y));
  PSC_RETURN_IF_ERROR(c.Elementwise(kOp, x));
  PSC_CUDA_RETURN_IF_ERROR(cuda::Cast(c.MemoryOf(x), CastCode(x.dtype()), c.MemoryOf(*y),
                                      CastCode(y->dtype()), x.size(), c.stream()));
  return absl::OkStatus();
}

// y_in copied into y where y is not it, then the block, as one 2-D copy.
absl::Status CopyBlockKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                             KernelOutputs out) {
  constexpr const char* kOp = elementwise::kCopyBlock;
  const DeviceTensor &x = *in[0], &y_in = *in[1];
  DeviceTensor* y = out[0];
  const OpAttrs::Block& k = a.block;
  PSC_RETURN_IF_ERROR(
      CheckCopyBlock(x, k.x_cols, k.x_first, *y, k.y_cols, k.y_first, k.rows, k.cols));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "y_in", y_in, y->shape()));
  PSC_RETURN_IF_ERROR(c.Enter());
  if (&y_in != y && y->size() > 0) {
    PSC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(c.DataOf(*y), c.DataOf(y_in),
                                             y->size() * sizeof(float), cudaMemcpyDeviceToDevice,
                                             c.stream()));
  }
  if (k.rows == 0 || k.cols == 0) return absl::OkStatus();
  PSC_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(c.DataOf(*y) + k.y_first, k.y_cols * sizeof(float),
                                             c.DataOf(x) + k.x_first, k.x_cols * sizeof(float),
                                             k.cols * sizeof(float), k.rows,
                                             cudaMemcpyDeviceToDevice, c.stream()));
  return absl::OkStatus();
}

absl::Status TransposeKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                             KernelOutputs out) {
  elementwise::TransposePlan plan;
  PSC_RETURN_IF_ERROR(elementwise::CheckTranspose(*in[0], a.perm, *out[0], &plan));
  PSC_RETURN_IF_ERROR(c.Enter());
  PSC_CUDA_RETURN_IF_ERROR(cuda::Transpose(c.DataOf(*in[0]), c.DataOf(*out[0]), plan, c.stream()));
  return absl::OkStatus();
}

// ReluBackward's state: cuDNN's ReLU and a 4-D description of the
// elements per shape (cudnnActivationBackward wants one).
struct ReluState {
  CudaKernelContext* cuda;
  ActivationDesc relu;
  std::map<std::pair<int64_t, int64_t>, TensorDesc> flat;

  // [rows, cols, 1, 1], NCHW.
  absl::StatusOr<cudnnTensorDescriptor_t> FlatDesc(int64_t rows, int64_t cols) {
    TensorDesc& d = flat[{rows, cols}];
    if (!d) {
      PSC_ASSIGN_OR_RETURN(TensorDesc made, MakeTensorDesc());
      PSC_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(made.get(), CUDNN_TENSOR_NCHW,
                                                           CUDNN_DATA_FLOAT, static_cast<int>(rows),
                                                           static_cast<int>(cols), 1, 1));
      d = std::move(made);
    }
    return d.get();
  }
};

absl::Status ReluBackwardKernel(ReluState& s, KernelInputs in, const OpAttrs&, KernelOutputs out) {
  constexpr const char* kOp = elementwise::kReluBackward;
  const DeviceTensor &y = *in[0], &dy = *in[1];
  DeviceTensor* dx = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "y", y));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, y.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, y.shape()));
  if (y.size() == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(s.cuda->Elementwise(kOp, y));  // cuDNN counts in int
  // An elementwise op: any 4-D description of the elements will do.
  const int64_t rows = y.shape().empty() ? 1 : y.shape()[0];
  PSC_ASSIGN_OR_RETURN(cudnnTensorDescriptor_t desc, s.FlatDesc(rows, y.size() / rows));
  const float one = 1.0f, zero = 0.0f;
  CudaKernelContext& c = *s.cuda;
  // ReLU's gradient passes where the output is positive, which is where
  // the input is: y stands in for x. In place (dx == dy) is allowed.
  PSC_CUDNN_RETURN_IF_ERROR(cudnnActivationBackward(c.cudnn(), s.relu.get(), &one, desc,
                                                    c.DataOf(y), desc, c.DataOf(dy), desc,
                                                    c.DataOf(y), &zero, desc, c.DataOf(*dx)));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCudaElementwiseKernels(CudaKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CudaKernelContext> kKernels[] = {
      {elementwise::kActivate, 1, 1, ActivateKernel},
      {elementwise::kActivateBackward, 2, 1, ActivateBackwardKernel},
      {elementwise::kAdd, 2, 1, AddKernel},
      {elementwise::kMultiply, 2, 1, MultiplyKernel},
      {elementwise::kExtremum, 2, 1, ExtremumKernel},
      {elementwise::kExtremumGradient, 3, 1, ExtremumGradientKernel},
      {elementwise::kScale, 1, 1, ScaleKernel},
      {elementwise::kCopy, 1, 1, CopyKernel},
      {elementwise::kCopyBlock, 2, 1, CopyBlockKernel},
      {elementwise::kCast, 1, 1, CastKernel, {}, nullptr, KernelDtypes::kAny},
      {elementwise::kTranspose, 1, 1, TransposeKernel},
  };
  PSC_RETURN_IF_ERROR(RegisterKernels<CudaKernelContext>(context, kKernels, registry));
  static constexpr KernelEntry<ReluState> kRelu[] = {
      {elementwise::kReluBackward, 2, 1, ReluBackwardKernel},
  };
  auto relu = std::make_shared<ReluState>();
  relu->cuda = context;
  PSC_ASSIGN_OR_RETURN(relu->relu, MakeActivationDesc());
  PSC_CUDNN_RETURN_IF_ERROR(cudnnSetActivationDescriptor(relu->relu.get(), CUDNN_ACTIVATION_RELU,
                                                         CUDNN_NOT_PROPAGATE_NAN, 0.0));
  return RegisterKernels<ReluState>(std::move(relu), kRelu, registry);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
