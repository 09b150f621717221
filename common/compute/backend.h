// The compute backend interface every device implements: the CPU on oneDNN
// (cpu_backend.h) and the GPU on cuDNN/cuBLAS (later). A backend owns its
// tensors (DeviceTensor); data crosses to and from the host only through
// CopyFromHost/CopyToHost, in the logical layouts below. Every op answers a
// capability query (Supports), which soft device placement uses, and every
// op is checked against a plain double-precision reference
// (compute/reference_ops.h, in the tests).
//
// Logical layouts (those of Keras, so weights can be compared with it):
//   activations  [N, H, W, C]   row-major (NHWC); a dense input [N, K] may be
//                               given as [N, H, W, C] and is flattened in HWC order
//   conv kernel  [3, 3, C, K]   HWIO
//   dense kernel [K, M]         (in, out)
//   biases       [K]
//
// Ops are pure functions of their inputs; a backend may cache primitives and
// scratch memory per shape. Outputs must be allocated with the right shape
// (INVALID_ARGUMENT otherwise). Backends are thread-compatible: one thread
// (one model replica) uses a backend at a time.
#ifndef PSC_COMMON_COMPUTE_BACKEND_H_
#define PSC_COMMON_COMPUTE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace psc {
namespace compute {

using Shape = std::vector<int64_t>;

// Elements of `shape`; -1 if a dimension is negative.
int64_t ShapeSize(const Shape& shape);
// "[2,3]", as error messages print a shape.
std::string ShapeText(const Shape& shape);

// A float32 tensor in a backend's memory.
class DeviceTensor {
 public:
  virtual ~DeviceTensor() = default;
  const Shape& shape() const { return shape_; }
  int64_t size() const { return ShapeSize(shape_); }

 protected:
  explicit DeviceTensor(Shape shape) : shape_(std::move(shape)) {}

 private:
  const Shape shape_;
};

enum class Op {
  kConv2D,  // 3x3, stride 1, padding "same", bias, optional fused ReLU
  kConv2DBackwardData,
  kConv2DBackwardWeights,  // kernel and bias gradients
  kReluBackward,
  kMaxPool2x2,  // 2x2, stride 2, floor
  kMaxPool2x2Backward,
  kDense,  // bias, optional fused ReLU
  kDenseBackwardData,
  kDenseBackwardWeights,  // kernel and bias gradients
  kSoftmaxCrossEntropy,   // fused loss and gradient, sparse labels
  kActivation,            // relu, sigmoid, tanh, leaky_relu, elementwise
  kActivationBackward,
  kGlobalPool,  // average or max over H and W
  kGlobalPoolBackward,
  kMultiply,    // elementwise (Dropout's mask)
  kAvgPool2x2,  // 2x2, stride 2, floor
  kAvgPool2x2Backward,
};
const char* OpName(Op op);

// The activations Activate runs. Keras's: leaky_relu(x) = x > 0 ? x : alpha * x.
enum class Activation { kRelu, kSigmoid, kTanh, kLeakyRelu };
const char* ActivationName(Activation f);

enum class GlobalPooling { kAverage, kMax };

// The shape checks every backend's ops make: OK, or INVALID_ARGUMENT
// "<op>: <what> has shape [..], want [..]" (or "want rank r").
absl::Status WantShape(const char* op, const char* what, const DeviceTensor& t, const Shape& want);
absl::Status WantRank(const char* op, const char* what, const DeviceTensor& t, size_t rank);
// CopyManyToHost's argument check (every backend makes it first).
absl::Status CheckCopyMany(absl::Span<const DeviceTensor* const> src,
                           absl::Span<const absl::Span<float>> dst);

// What a capability query asks: the op and its main shapes (the input
// activation, and the kernel where there is one).
struct OpSpec {
  Op op;
  Shape input;
  Shape kernel;
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  // "cpu:onednn", "gpu:0:cudnn", ...
  virtual std::string name() const = 0;

  // Whether the op with these shapes runs here. Ops return UNIMPLEMENTED
  // (naming the op and shape) for what they do not support.
  virtual bool Supports(const OpSpec& spec) const = 0;

  // A tensor of `shape`, zero-filled. RESOURCE_EXHAUSTED if memory runs out.
  virtual absl::StatusOr<std::unique_ptr<DeviceTensor>> Allocate(const Shape& shape) = 0;
  virtual absl::Status CopyFromHost(absl::Span<const float> src, DeviceTensor* dst) = 0;
  virtual absl::Status CopyToHost(const DeviceTensor& src, absl::Span<float> dst) = 0;
  // dst[i] = src[i] for every i, as one transfer where the backend has a
  // costly host round trip (CUDA: one copy to the host and one wait for all;
  // the default copies one by one). INVALID_ARGUMENT, with nothing written,
  // if the counts or any size differ.
  virtual absl::Status CopyManyToHost(absl::Span<const DeviceTensor* const> src,
                                      absl::Span<const absl::Span<float>> dst);

  // Plans these ops now (CUDA: chooses their convolution algorithms), so
  // that their first run does not pay for it. Optional: an op not prepared
  // is planned on first use. The default does nothing.
  virtual absl::Status Prepare(absl::Span<const OpSpec> specs);

  // y = relu?(conv3x3_same(x, w) + b). x [N,H,W,C], w [3,3,C,K], b [K], y [N,H,W,K].
  virtual absl::Status Conv2D(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& b,
                              bool relu, DeviceTensor* y) = 0;
  // dx [N,H,W,C] = the gradient w.r.t. x of conv3x3_same(x, w), given dy [N,H,W,K].
  virtual absl::Status Conv2DBackwardData(const DeviceTensor& dy, const DeviceTensor& w,
                                          DeviceTensor* dx) = 0;
  // dw [3,3,C,K] and db [K], given x and dy.
  virtual absl::Status Conv2DBackwardWeights(const DeviceTensor& x, const DeviceTensor& dy,
                                             DeviceTensor* dw, DeviceTensor* db) = 0;
  // dx = dy where y > 0, else 0; y is the ReLU's output. dx may be dy.
  virtual absl::Status ReluBackward(const DeviceTensor& y, const DeviceTensor& dy,
                                    DeviceTensor* dx) = 0;
  // y [N,H/2,W/2,C] (floor) = max over each 2x2 window of x [N,H,W,C].
  virtual absl::Status MaxPool2x2(const DeviceTensor& x, DeviceTensor* y) = 0;
  // dx [N,H,W,C]: each window's dy goes to its maximum (the first in row-major
  // window order on ties); every other element, and the rows and columns the
  // floor cuts off, get 0.
  virtual absl::Status MaxPool2x2Backward(const DeviceTensor& x, const DeviceTensor& dy,
                                          DeviceTensor* dx) = 0;
  // y [N,M] = relu?(flatten(x)·w + b). x [N,K] or [N,H,W,C] with H*W*C = K,
  // w [K,M], b [M].
  virtual absl::Status Dense(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& b,
                             bool relu, DeviceTensor* y) = 0;
  // dx (x's shape) = dy·wᵀ.
  virtual absl::Status DenseBackwardData(const DeviceTensor& dy, const DeviceTensor& w,
                                         DeviceTensor* dx) = 0;
  // dw [K,M] = flatten(x)ᵀ·dy, db [M] = sum over the batch of dy.
  virtual absl::Status DenseBackwardWeights(const DeviceTensor& x, const DeviceTensor& dy,
                                            DeviceTensor* dw, DeviceTensor* db) = 0;
  // y [N,H/2,W/2,C] (floor) = the mean of each 2x2 window (stride 2) of x.
  virtual absl::Status AvgPool2x2(const DeviceTensor& x, DeviceTensor* y) = 0;
  // dx [N,H,W,C] (x's shape): each window's dy / 4 on its four elements; the
  // rows and columns the floor cuts off get 0.
  virtual absl::Status AvgPool2x2Backward(const DeviceTensor& x, const DeviceTensor& dy,
                                          DeviceTensor* dx) = 0;

  // y = f(x) elementwise, any shape (y's). y may be x.
  virtual absl::Status Activate(Activation f, float alpha, const DeviceTensor& x,
                                DeviceTensor* y) = 0;
  // dx = dy * f'(x), from the activation's output y: relu and leaky_relu
  // (alpha > 0) 1 where y > 0, else 0 or alpha; sigmoid y * (1 - y); tanh
  // 1 - y * y. dx may be dy.
  virtual absl::Status ActivateBackward(Activation f, float alpha, const DeviceTensor& y,
                                        const DeviceTensor& dy, DeviceTensor* dx) = 0;
  // y [N,C] = the mean or the maximum over H and W of x [N,H,W,C].
  virtual absl::Status GlobalPool(GlobalPooling kind, const DeviceTensor& x, DeviceTensor* y) = 0;
  // dx [N,H,W,C], given x and dy [N,C]: average, dy / (H * W) everywhere;
  // max, dy at each channel's first maximum in row-major order, 0 elsewhere.
  virtual absl::Status GlobalPoolBackward(GlobalPooling kind, const DeviceTensor& x,
                                          const DeviceTensor& dy, DeviceTensor* dx) = 0;
  // y = a * b elementwise; a, b and y of one shape. y may be a.
  virtual absl::Status Multiply(const DeviceTensor& a, const DeviceTensor& b, DeviceTensor* y) = 0;

  // For logits [N,M] and labels in [0, M): p = softmax(logits);
  // *loss_sum = sum over n of -log p[n, label]; *correct = number of n whose
  // argmax (first on ties) is the label; dlogits = (p - onehot) * grad_scale.
  // INVALID_ARGUMENT for a label out of range.
  virtual absl::Status SoftmaxCrossEntropy(const DeviceTensor& logits,
                                           absl::Span<const int32_t> labels, float grad_scale,
                                           DeviceTensor* dlogits, double* loss_sum,
                                           int64_t* correct) = 0;
};

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_BACKEND_H_
