// The compute backend interface every device implements: the CPU on oneDNN
// (cpu_backend.h) and the GPU on cuDNN/cuBLAS (cuda/, in the GPU plugin). A
// backend owns its tensors (DeviceTensor), each with a shape and a dtype
// (dtype.h); data crosses to and from the host only through
// CopyFromHost/CopyToHost, in the logical layouts below.
//
// Ops reach a backend by name through Run: the kernels it registers in its
// kernel registry (kernel_registry.h; the ops' typed calls are
// elementwise_ops.h, pooling_ops.h, batch_norm_ops.h, dense_ops.h,
// conv_ops.h and loss_ops.h, their meaning and reference common/ops/). Every op takes and makes
// float32 tensors and refuses a tensor of another dtype with INVALID_ARGUMENT; int32/int64 tensors
// hold ids. A backend answers a capability query (Supports), which soft device placement uses;
// every op is checked against a plain double-precision reference
// (compute/reference/reference_ops.h, in the tests).
//
// Logical layouts (those of Keras, so weights can be compared with it):
//   activations  [N, H, W, C]   row-major (NHWC); a dense input [N, K] may be
//                               given as [N, H, W, C] and is flattened in HWC order
//   conv kernel  [KH, KW, C, K] HWIO
//   dense kernel [K, M]         (in, out)
//   biases       [K]
//   batch norm   gamma, beta, mean, variance: [C], over the last axis
//
// Ops are pure functions of their inputs; a backend may cache primitives and
// scratch memory per shape. Outputs must be allocated with the right shape
// (INVALID_ARGUMENT otherwise). Backends are thread-compatible: one thread
// (one model replica) uses a backend at a time.
#ifndef PSC_COMMON_COMPUTE_BACKEND_H_
#define PSC_COMMON_COMPUTE_BACKEND_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/compute/dtype.h"

namespace psc {
namespace compute {

using Shape = std::vector<int64_t>;

// Elements of `shape`; -1 if a dimension is negative or the product
// overflows.
int64_t ShapeSize(const Shape& shape);
// "[2,3]", as error messages print a shape.
std::string ShapeText(const Shape& shape);

// A tensor in a backend's memory: its shape and dtype are fixed when it is
// allocated.
class DeviceTensor {
 public:
  virtual ~DeviceTensor() = default;
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t size() const { return ShapeSize(shape_); }  // elements
  // size() * DTypeSize(dtype()); ComputeBackend::Allocate checked it fits.
  size_t bytes() const { return static_cast<size_t>(size()) * DTypeSize(dtype_); }

 protected:
  DeviceTensor(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {}

 private:
  const Shape shape_;
  const DType dtype_;
};

// How a window treats the input's border, as Keras's `padding` argument.
enum class Padding { kValid, kSame };
const char* PaddingName(Padding padding);

// Where a window of `size` with `stride` lies along one input extent `in`:
//   valid: out = floor((in - size) / stride) + 1 (0 when in < size), no padding;
//   same:  out = ceil(in / stride), padded with
//          total = max((out - 1) * stride + size - in, 0), `before` = total / 2
//          (rounded down) and `after` = the rest,
// as TensorFlow and JAX (hence Keras) pad. Output i covers the input
// positions [i * stride - before, i * stride - before + size).
struct WindowExtent {
  int64_t out = 0;
  int64_t before = 0;
  int64_t after = 0;
};
WindowExtent WindowAlong(int64_t in, int64_t size, int64_t stride, Padding padding);

// A 2-D window: a convolution's kernel (its size is the kernel's) or a
// pooling window. Sizes, strides, dilations and groups are >= 1.
//
// A convolution may also be dilated (Keras's dilation_rate: tap i of the
// kernel reads input position i * dilation, so the window spans
// (size - 1) * dilation + 1 positions, which the padding rule sees) and
// grouped (Keras's groups: the input's C channels and the output's K split
// into `groups` consecutive blocks, output block g computed from input
// block g alone, so its kernel is [KH, KW, C / groups, K]). A
// DepthwiseConv2D with depth_multiplier M is groups = C, K = C * M: its
// Keras kernel [KH, KW, C, M] is that [KH, KW, 1, C * M] kernel's memory.
// Pooling has neither (both 1).
struct Window {
  int64_t height = 3, width = 3;
  int64_t stride_h = 1, stride_w = 1;
  Padding padding = Padding::kSame;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;

  // The input positions the window spans along each axis.
  int64_t SpanRows() const { return (height - 1) * dilation_h + 1; }
  int64_t SpanCols() const { return (width - 1) * dilation_w + 1; }
  WindowExtent Rows(int64_t in_h) const { return WindowAlong(in_h, SpanRows(), stride_h, padding); }
  WindowExtent Cols(int64_t in_w) const { return WindowAlong(in_w, SpanCols(), stride_w, padding); }
  // The output of x [N,H,W,C] with K channels: [N, OH, OW, K].
  Shape Output(const Shape& x, int64_t k) const;
  // A transposed convolution's output extent from `in` (Keras's
  // Conv2DTranspose without output_padding): in x stride, and "valid" adds
  // max(span - stride, 0); this window's convolution takes it back to `in`.
  int64_t TransposedRows(int64_t in) const { return Transposed(in, SpanRows(), stride_h); }
  int64_t TransposedCols(int64_t in) const { return Transposed(in, SpanCols(), stride_w); }
  // A convolution's kernel from C input to K output channels:
  // [KH, KW, C / groups, K].
  Shape Kernel(int64_t c, int64_t k) const { return {height, width, c / groups, k}; }
  // "3x3/1 same", with " dilation 2" and " groups 4" where not 1, for
  // messages and logs.
  std::string Text() const;
  bool operator==(const Window& o) const {
    return height == o.height && width == o.width && stride_h == o.stride_h &&
           stride_w == o.stride_w && padding == o.padding && dilation_h == o.dilation_h &&
           dilation_w == o.dilation_w && groups == o.groups;
  }
  bool operator<(const Window& o) const;

 private:
  int64_t Transposed(int64_t in, int64_t span, int64_t stride) const {
    return in * stride + (padding == Padding::kValid ? std::max<int64_t>(span - stride, 0) : 0);
  }
};
// Keras's defaults: a 3x3 "same" convolution with stride 1, a 2x2 pooling
// window with stride 2 and "valid" padding.
inline constexpr Window kConv3x3Same{3, 3, 1, 1, Padding::kSame};
inline constexpr Window kPool2x2{2, 2, 2, 2, Padding::kValid};

// The checks every backend makes of a window before it runs: sizes,
// strides, dilations and groups >= 1, x of rank 4 with an output of at
// least 1x1; INVALID_ARGUMENT naming `op` otherwise. A convolution also
// checks its kernel (CheckConvKernel); a pooling op, CheckPoolWindow.
absl::Status CheckWindow(const char* op, const Window& window, const Shape& x);
// CheckWindow, and no dilation or groups (a pooling window has neither).
absl::Status CheckPoolWindow(const char* op, const Window& window, const Shape& x);
// A convolution's kernel `what` from c to k channels: both divisible by
// the window's groups and the kernel of shape window.Kernel(c, k).
absl::Status CheckConvKernel(const char* op, const char* what, const Window& window, int64_t c,
                             int64_t k, const Shape& kernel);

// The activations Activate runs, as Keras 3 defines them (the math, one
// element at a time, is activation_math.h): leaky_relu(x) = x > 0 ? x :
// alpha * x; elu alpha (e^x - 1) below 0; selu; softplus; softsign;
// hard_sigmoid as Keras 3 (relu6(x + 3) / 6) and as Keras 2 (clip(0.2 x +
// 0.5, 0, 1)); a relu clipped at alpha (relu6, ReLU(max_value)); exp.
enum class Activation {
  kRelu,
  kSigmoid,
  kTanh,
  kLeakyRelu,
  kElu,
  kSelu,
  kSoftplus,
  kSoftsign,
  kHardSigmoid,
  kHardSigmoidKeras2,
  kClippedRelu,
  kExponential,
  // Not monotonic: their gradient is computed from their input, so they
  // are never applied in place on a Conv2D's or Dense's output.
  kGelu,  // exact: x (1 + erf(x / sqrt 2)) / 2, Keras's approximate=False
  kSilu,  // x sigmoid(x) (Keras's silu and swish)
  // Not elementwise: over the last axis of the logical shape (channels of
  // an [N,H,W,C] tensor), e^(x - max) / sum; its gradient, from the output,
  // y (dy - sum(dy y)) per row. Keras's softmax and Softmax(axis=-1).
  kSoftmax,
};
const char* ActivationName(Activation f);
// Whether ActivateBackward takes f's input instead of its output.
inline bool GradientFromInput(Activation f) {
  return f == Activation::kGelu || f == Activation::kSilu;
}

enum class GlobalPooling { kAverage, kMax };

// The checks every backend's ops make of their tensors: OK, or
// INVALID_ARGUMENT "<op>: <what> has shape [..], want [..]" (or "want rank
// r"), or "<op>: <what> is int32, want float32, bfloat16 or float16". WantShape and WantRank also
// want a float (float32, or bfloat16 or float16 in a kernel that takes
// them: ComputeBackend::Run gives the others float32); WantFloat checks only
// that.
absl::Status WantShape(const char* op, const char* what, const DeviceTensor& t, const Shape& want);
absl::Status WantRank(const char* op, const char* what, const DeviceTensor& t, size_t rank);
absl::Status WantFloat(const char* op, const char* what, const DeviceTensor& t);
// A variable or its gradient (a kernel, a bias), which stays float32 when
// the activations are bfloat16 or float16: OK when `t` is float32 or null.
absl::Status WantVariable(const char* op, const char* what, const DeviceTensor* t);
// The same for a tensor of another dtype (a loss's labels and totals):
// "<op>: <what> is float32, want int32", or the shape as WantShape.
absl::Status WantTensor(const char* op, const char* what, const DeviceTensor& t, DType dtype,
                        const Shape& want);
// CopyManyToHost's argument check (every backend makes it first).
absl::Status CheckCopyMany(absl::Span<const DeviceTensor* const> src,
                           absl::Span<const absl::Span<float>> dst);

// What SoftmaxCrossEntropy computes beyond the labels: Keras's
// cross-entropy losses with their options, and the batch's share of the
// reduction.
enum class LossKind {
  kSoftmaxCrossEntropy,  // (sparse_)categorical_crossentropy on logits
  kBinaryCrossEntropy,   // binary_crossentropy (binary_cross_entropy.h)
  // The regression losses of regression_loss.h, on float targets.
  kMeanSquaredError,
  kMeanAbsoluteError,
  kHuber,
};
// Whether `kind` takes float targets (LossOptions::targets), not class ids.
inline bool IsRegression(LossKind kind) {
  return kind == LossKind::kMeanSquaredError || kind == LossKind::kMeanAbsoluteError ||
         kind == LossKind::kHuber;
}

struct LossOptions {
  // dlogits are scaled by it: 1/n for the batch's mean
  // ("sum_over_batch_size"), 1 for reduction="sum".
  float grad_scale = 1.0f;
  // CategoricalCrossentropy's and BinaryCrossentropy's label_smoothing, in
  // [0, 1].
  float label_smoothing = 0.0f;
  // Per example (sample_weight, or class_weight of its label); empty: 1.
  absl::Span<const float> weights;
  // SoftmaxCrossEntropy ignores it; the Executor picks the loss by it.
  LossKind kind = LossKind::kSoftmaxCrossEntropy;
  // A regression loss's targets: n x the output's units, row-major (the
  // labels are then unused, one per example for the count).
  absl::Span<const float> targets;
  // Huber's delta (> 0).
  float huber_delta = 1.0f;
};

// The checks every backend's dense kernels make of x, a kernel w [K,M] and
// y, the tensor of the op's M columns (Dense's y, the backward ops' dy):
// all float32, y holding n rows of M values (n = y.size() / M) and x n rows
// of K (x.size() = n x K), and both with one batch (the same first
// dimension). Which axes hold a row is the shapes' business: x [N,K] or
// [N,H,W,C] flattened with y [N,M] (a Dense after a Flatten), or x [N,...,K]
// with y [N,...,M] (Keras's Dense on the last axis of a sequence, n = N x
// steps), or EinsumDense's [N,L,H,D] contracted over its last two axes.
// INVALID_ARGUMENT naming `op` otherwise.
absl::Status CheckDense(const char* op, const DeviceTensor& x, const DeviceTensor& w,
                        const DeviceTensor& y, int64_t* n, int64_t* k, int64_t* m);

// CopyBlock's argument checks (every backend makes them first).
absl::Status CheckCopyBlock(const DeviceTensor& x, int64_t x_cols, int64_t x_first,
                            const DeviceTensor& y, int64_t y_cols, int64_t y_first, int64_t rows,
                            int64_t cols);

// What a capability query asks: the op by its registered name (the
// constants of elementwise_ops.h, pooling_ops.h, batch_norm_ops.h,
// dense_ops.h, conv_ops.h, loss_ops.h), its main shapes (the
// forward op's input activation, and the kernel where there is one), and
// for convolutions and pooling the window.
struct OpSpec {
  std::string op;
  Shape input;
  Shape kernel;
  Window window = kConv3x3Same;
  // The dtype the op computes in where a kernel takes it as it is (a
  // convolution whose input and output share bfloat16 or float16); float32
  // otherwise.
  DType dtype = DType::kFloat32;
};

class KernelRegistry;  // kernel_registry.h
struct OpAttrs;
struct RegisteredKernel;

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  // "cpu:onednn", "gpu:0:cudnn", ...
  virtual std::string name() const = 0;

  // Whether the op with these shapes runs here: its shapes are ones this
  // backend holds (ShapesFit), and the op has a kernel here whose Accepts
  // takes them (any non-empty input where it has none). Ops return UNIMPLEMENTED (naming
  // the op and shape) for what they do not support.
  virtual bool Supports(const OpSpec& spec) const;

  // A tensor of `shape` and `dtype`, zero-filled. INVALID_ARGUMENT for a
  // negative dimension or a byte count that overflows; RESOURCE_EXHAUSTED if
  // memory runs out.
  absl::StatusOr<std::unique_ptr<DeviceTensor>> Allocate(const Shape& shape,
                                                         DType dtype = DType::kFloat32);
  // Whole-tensor copies, in the logical layout. INVALID_ARGUMENT, with
  // nothing copied, when the tensor's dtype is not the span's or the counts
  // differ; but floats go to and from a bfloat16 or float16 tensor,
  // converted on the host (rounded to nearest, ties to even, going in).
  absl::Status CopyFromHost(absl::Span<const float> src, DeviceTensor* dst);
  absl::Status CopyFromHost(absl::Span<const int32_t> src, DeviceTensor* dst);
  absl::Status CopyFromHost(absl::Span<const int64_t> src, DeviceTensor* dst);
  absl::Status CopyFromHost(absl::Span<const double> src, DeviceTensor* dst);
  absl::Status CopyToHost(const DeviceTensor& src, absl::Span<float> dst);
  absl::Status CopyToHost(const DeviceTensor& src, absl::Span<int32_t> dst);
  absl::Status CopyToHost(const DeviceTensor& src, absl::Span<int64_t> dst);
  absl::Status CopyToHost(const DeviceTensor& src, absl::Span<double> dst);

  // What a backend implements behind the calls above, which have checked the
  // shape (AllocateTensor) and that `bytes` is the tensor's bytes(), in its
  // dtype (the copies). Wrappers forward them; callers use the calls above.
  virtual absl::StatusOr<std::unique_ptr<DeviceTensor>> AllocateTensor(const Shape& shape,
                                                                       DType dtype) = 0;
  virtual absl::Status CopyBytesFromHost(const void* src, size_t bytes, DeviceTensor* dst) = 0;
  virtual absl::Status CopyBytesToHost(const DeviceTensor& src, void* dst, size_t bytes) = 0;

  // dst[i] = src[i] for every i, as one transfer where the backend has a
  // costly host round trip (CUDA: one copy to the host and one wait for all;
  // the default copies one by one). INVALID_ARGUMENT, with nothing written,
  // if the counts or any size differ, or a tensor is not float32.
  virtual absl::Status CopyManyToHost(absl::Span<const DeviceTensor* const> src,
                                      absl::Span<const absl::Span<float>> dst);

  // Plans these ops now (CUDA: chooses their convolution algorithms), so
  // that their first run does not pay for it. Optional: an op not prepared
  // is planned on first use. The default does nothing.
  virtual absl::Status Prepare(absl::Span<const OpSpec> specs);

  // The backend's kernels, by op name (kernel_registry.h; the ops and their
  // contracts are in the *_ops.h headers named above, their references in
  // common/ops/).
  virtual const KernelRegistry& kernels() const = 0;
  // Runs `op`'s kernel from kernels() on `in`, writing `out`:
  // UNIMPLEMENTED "<backend> has no kernel for <op>" when there is none,
  // INVALID_ARGUMENT when the tensor counts are not the op's or a tensor
  // the op does not make optional is null; otherwise the kernel's status. Wrappers forward it (and
  // may watch the op's name). A bfloat16 or float16 tensor given to a
  // kernel that takes only float32 (KernelDtypes::kFloat32) is cast into a
  // float32 copy for it, and each such output is written through one and
  // cast back (the backend's Cast kernel), so every op runs on a
  // mixed-precision model, computing in float32 and rounding its outputs.
  virtual absl::Status Run(absl::string_view op, absl::Span<const DeviceTensor* const> in,
                           const OpAttrs& attrs, absl::Span<DeviceTensor* const> out);

 protected:
  // The backend's own limits on a capability query's shapes (Supports):
  // by default every dimension of the input and the kernel at least 1.
  virtual bool ShapesFit(const OpSpec& spec) const;

 private:
  // Run's float32 copies of low-precision tensors, kept for the next call
  // of the same shapes; `busy` while a call uses one.
  struct CastCopy {
    std::unique_ptr<DeviceTensor> tensor;
    bool busy = false;
  };
  absl::StatusOr<CastCopy*> Float32Copy(const Shape& shape);
  absl::Status RunInFloat32(absl::string_view op, const RegisteredKernel& kernel,
                            absl::Span<const DeviceTensor* const> in, const OpAttrs& attrs,
                            absl::Span<DeviceTensor* const> out);
  std::vector<std::unique_ptr<CastCopy>> cast_copies_;
};

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_BACKEND_H_
