// The CUDA backend's convolutions on cuDNN's legacy API (present in every
// cuDNN 9.x): forward, backward-data and backward-filter, for any kernel
// size, strides, dilation, groups and "same"/"valid" padding (backend.h's
// Window; cuDNN's dilation and group count). cuDNN's
// padding is symmetric; Keras's asymmetric "same" padding is made explicit
// (conv_padding.h): the input copied into a zero-padded scratch buffer, the
// data gradient computed padded and cropped.
//
// Per shape (input, output channels and window) and direction the algorithm
// is chosen by algorithm_choice.h's rule: cuDNN's heuristic ranking (or,
// with autotune, cudnnFind's measured one) for NHWC then NCHW, filtered to
// deterministic, FMA-math (unless TF32) algorithms within the workspace
// limit; the first that runs is kept. The
// ranking is made on first use, or up front by Plan (the backend's Prepare).
// Autotune's Find workspace is given back to the allocator, and its cache
// released in growth mode, as soon as the Find is done; the execution
// workspace is one buffer grown to the largest choice.
//
// Activations stay NHWC (channels-last, cuDNN's CUDNN_TENSOR_NHWC); filters
// go from Keras's HWIO into cuDNN's KRSC by a transpose per call (weights
// change every step). An NCHW candidate runs with the activations transposed
// in and out. Bias, ReLU and the bias gradient are not here (see
// cuda_kernels.h). Thread-compatible.
//
// In bfloat16 and float16 (ConvShape::dtype) the activations and their
// gradients are held in the format and cuDNN computes in float32 from it
// (its PSEUDO_BFLOAT16/PSEUDO_HALF configurations) with tensor-op math, as
// TensorFlow runs a mixed-precision Conv2D: NHWC only; the float32 filter
// (HWIO) is transposed and rounded to the format per call, as Keras casts
// the kernel; the filter gradient comes out of cuDNN in the format (its
// legacy API holds the filter and its gradient in the activations' type)
// and is widened to float32, one rounding more than a float32 run's. A
// 16-bit shape and direction cuDNN has no acceptable algorithm for (none
// deterministic in NHWC within the workspace) runs in float32 on widened
// copies of its activations, its output rounded once, as if the op had no
// 16-bit kernel; Describe says so.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_H_

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/compute/backend.h"
#include "common/compute/cuda/algorithm_choice.h"
#include "common/compute/cuda/conv_padding.h"
#include "common/compute/cuda/cuda_context.h"
#include "common/compute/cuda/cuda_handles.h"

namespace psc {
namespace compute {
namespace cuda {

// A convolution: x [n,h,w,c] to k output channels over `window`. Made by
// MakeConvShape, which checks that it fits cuDNN's int dimensions.
struct ConvShape {
  int n, h, w, c, k;
  Window window;
  // What the activations are held in: float32, bfloat16 or float16.
  DType dtype = DType::kFloat32;
  auto Key() const {
    return std::make_tuple(n, h, w, c, k, window.height, window.width, window.stride_h,
                           window.stride_w, window.padding, window.dilation_h, window.dilation_w,
                           window.groups, dtype);
  }
  // The filter's input channels: C / groups.
  int cg() const { return c / static_cast<int>(window.groups); }
  // Bytes per activation element.
  size_t element_bytes() const { return DTypeSize(dtype); }
  // "x [64,28,28,1] -> 32, 3x3/1 same" (", bfloat16" after it in a format).
  std::string Text() const;
};

// The shape of `op` (named in errors) on x [n,h,w,c] with k output channels
// over `window` (already checked by CheckWindow): UNIMPLEMENTED if a tensor
// cuDNN would see (the explicitly padded input included) has 2^31 elements
// or more, or a dimension, window size, stride or padding is over int's range.
absl::StatusOr<ConvShape> MakeConvShape(const char* op, int64_t n, int64_t h, int64_t w, int64_t c,
                                        int64_t k, const Window& window);

enum class ConvDirection { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

class CudaConv {
 public:
  // `context` is not owned and outlives this.
  explicit CudaConv(const CudaContext* context) : context_(context) {}

  // y [n,oh,ow,k] = conv(x [n,h,w,c], w [kh,kw,c/groups,k] HWIO), without
  // bias. x, y, dx and dy are held in s.dtype; w and dw in float32.
  absl::Status Forward(const ConvShape& s, const void* x, const float* w, void* y);
  // dx [n,h,w,c] given dy [n,oh,ow,k] and w (HWIO).
  absl::Status BackwardData(const ConvShape& s, const void* dy, const float* w, void* dx);
  // dw [kh,kw,c,k] HWIO given x and dy.
  absl::Status BackwardFilter(const ConvShape& s, const void* x, const void* dy, float* dw);

  // Ranks one direction's algorithms for `s` now, so that its first run
  // does not (autotune: on scratch operands it allocates and frees).
  absl::Status Plan(const ConvShape& s, ConvDirection direction);

  // "fwd NHWC algo 1 (FMA, 0 bytes workspace); bwd-data ...", for logs
  // ("explicit padding; " first where the padding is asymmetric).
  std::string Describe(const ConvShape& s) const;
  // Describe for every shape planned, one line each.
  std::vector<std::string> DescribeAll() const;

 private:
  // The problem cuDNN solves for a shape (conv_padding.h).
  struct Geometry {
    CudnnPadding padding;
    int in_h = 0, in_w = 0;    // cuDNN's input: x, or x padded explicitly
    int out_h = 0, out_w = 0;  // the window's output
  };
  struct Descs {
    TensorDesc x, y;
    FilterDesc w;
    ConvDesc conv;
  };
  struct Choice {
    bool ranked = false;
    std::vector<AlgorithmCandidate> candidates;  // acceptable, in rank order
    int chosen = -1;                             // the one that ran, once one has
  };
  struct ShapePlan {
    ConvShape shape;
    Geometry geometry;
    std::unique_ptr<Descs> descs[2];  // by ConvLayout
    Choice choice[3];                 // by ConvDirection
    bool widen[3] = {};               // by ConvDirection: 16-bit, run in float32
  };
  // Device pointers in the layout and dtype an algorithm runs in.
  struct Operands {
    const void* in = nullptr;     // x (forward, filter) or dy (data)
    const void* other = nullptr;  // w (forward, data) or dy (filter)
    void* out = nullptr;          // y, dx or dw
  };

  // The plan of `s`, made (its geometry checked against cuDNN's) on first use.
  absl::StatusOr<ShapePlan*> PlanFor(const ConvShape& s);
  // Direction `d` of a 16-bit shape in float32 on widened copies (a = x or
  // dy, b = w or dy, out = y, dx or dw, as Run's, unpadded).
  absl::Status Widened(const ShapePlan& plan, ConvDirection d, const void* a, const void* b,
                       void* out);
  // Plan of the float32 shape a widened 16-bit one runs as.
  absl::Status PlanWidened(const ConvShape& s, ConvDirection d);
  // Rank, ahead of any run (autotune: on scratch operands).
  absl::Status RankAhead(ShapePlan* plan, ConvDirection d);
  // Run, or for a 16-bit shape cuDNN has no algorithm for, Widened from then on.
  absl::Status RunOrWiden(ShapePlan& plan, ConvDirection d, const void* a, const void* b, void* out,
                          const void* unpadded_a);

  // x itself, or x copied into padded_in_ when the padding is explicit.
  absl::StatusOr<const void*> PadInput(const ShapePlan& plan, const void* x);

  // One direction on its NHWC operands in cuDNN's geometry (the input
  // padded when the padding is explicit): a = x (forward, filter) or dy
  // (data); b = w (forward, data) or dy (filter); out = y, dx or dw (HWIO).
  absl::Status Run(ShapePlan& plan, ConvDirection d, const void* a, const void* b, void* out);
  absl::Status Rank(ShapePlan& plan, ConvDirection d, const void* a, const void* b, void* out);
  absl::Status RunCandidate(ShapePlan& plan, ConvDirection d, const AlgorithmCandidate& c,
                            const void* a, const void* b, void* out);

  absl::StatusOr<Descs*> DescsFor(ShapePlan& plan, ConvLayout layout);
  // The operands of direction `d` in `layout` (transposed into scratch where needed).
  absl::StatusOr<Operands> Prepare(const ShapePlan& plan, ConvDirection d, ConvLayout layout,
                                   const void* a, const void* b, void* out);
  // HWIO float32 -> the filter layout of `layout` in s.dtype (into
  // filter_), and back.
  absl::StatusOr<const void*> FilterIn(const ConvShape& s, ConvLayout layout, const float* hwio);
  absl::Status FilterOut(const ConvShape& s, ConvLayout layout, const void* cudnn, float* hwio);
  // NHWC -> NCHW into `scratch`, and back.
  absl::StatusOr<float*> ToNchw(const float* nhwc, int n, int64_t hw, int c, Scratch* scratch);
  absl::Status ToNhwc(const float* nchw, int n, int64_t hw, int c, float* nhwc);

  // Workspace for a Find: the limit, halved while the allocator refuses.
  absl::StatusOr<DeviceBuffer> FindWorkspace();
  absl::StatusOr<void*> Workspace(size_t bytes);
  absl::Status SetMath(Descs* d, int math);

  const CudaContext* const context_;
  std::map<decltype(std::declval<ConvShape>().Key()), ShapePlan> plans_;
  Scratch filter_, filter_tmp_, in_nchw_, other_nchw_, out_nchw_, workspace_;
  // The explicitly padded input (forward, filter) and data gradient.
  Scratch padded_in_, padded_grad_;
  // Widened's float32 copies.
  Scratch wide_a_, wide_b_, wide_out_;
};

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_H_
