// The CUDA backend's 3x3 "same" convolutions on cuDNN's legacy API (present
// in every cuDNN 9.x): forward, backward-data and backward-filter.
//
// Per shape and direction the algorithm is chosen once, on first use, with
// cudnnFind*AlgorithmEx on the call's own buffers: the fastest result that
// succeeded, is deterministic (so weight gradients are bit-reproducible),
// fits the workspace limit and, unless TF32 is allowed, uses CUDNN_FMA_MATH.
// The choice and the descriptors are cached; the workspace is one buffer
// grown to the largest choice.
//
// Activations stay NHWC (channels-last, cuDNN's CUDNN_TENSOR_NHWC); filters
// go from Keras's HWIO into cuDNN's KRSC by a transpose per call (weights
// change every step). Where cuDNN offers no acceptable NHWC algorithm for a
// shape, that direction runs in NCHW instead, with the activations
// transposed in and out. Bias, ReLU and the bias gradient are not here (see
// cuda_kernels.h). Thread-compatible.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_H_

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "common/compute/cuda/cuda_context.h"
#include "common/compute/cuda/cuda_handles.h"

namespace psc {
namespace compute {
namespace cuda {

struct ConvShape {
  int n, h, w, c, k;
  auto Key() const { return std::make_tuple(n, h, w, c, k); }
  std::string Text() const;
};

class CudaConv {
 public:
  // `context` is not owned and outlives this.
  explicit CudaConv(const CudaContext* context) : context_(context) {}

  // y [n,h,w,k] = conv(x [n,h,w,c], w [3,3,c,k] HWIO), without bias.
  absl::Status Forward(const ConvShape& s, const float* x, const float* w, float* y);
  // dx [n,h,w,c] given dy [n,h,w,k] and w (HWIO).
  absl::Status BackwardData(const ConvShape& s, const float* dy, const float* w, float* dx);
  // dw [3,3,c,k] HWIO given x and dy.
  absl::Status BackwardFilter(const ConvShape& s, const float* x, const float* dy, float* dw);

  // "fwd NHWC algo 1, bwd-data NHWC algo 1, ..." for a shape seen, for logs.
  std::string Describe(const ConvShape& s) const;

 private:
  enum class Layout { kNhwc, kNchw };
  struct Descs {
    TensorDesc x, y;
    FilterDesc w;
    ConvDesc conv;
  };
  struct Choice {
    bool chosen = false;
    Layout layout = Layout::kNhwc;
    int algo = 0;
    cudnnMathType_t math = CUDNN_FMA_MATH;
    size_t workspace = 0;
  };
  struct Plan {
    std::unique_ptr<Descs> descs[2];  // by Layout
    Choice fwd, bwd_data, bwd_filter;
  };
  // Device pointers in the layout an algorithm runs in.
  struct Operands {
    const float* in = nullptr;     // x (forward, filter) or dy (data)
    const float* other = nullptr;  // w (forward, data) or dy (filter)
    float* out = nullptr;          // y, dx or dw
  };

  Plan& PlanFor(const ConvShape& s);
  absl::StatusOr<Descs*> DescsFor(const ConvShape& s, Plan& plan, Layout layout);
  // HWIO -> the filter layout of `layout` (into filter_), and back.
  absl::StatusOr<const float*> FilterIn(const ConvShape& s, Layout layout, const float* hwio);
  absl::Status FilterOut(const ConvShape& s, Layout layout, const float* cudnn, float* hwio);
  // NHWC -> NCHW into `scratch`, and back.
  absl::StatusOr<float*> ToNchw(const float* nhwc, int n, int hw, int c, Scratch* scratch);
  absl::Status ToNhwc(const float* nchw, int n, int hw, int c, float* nhwc);

  absl::StatusOr<Operands> PrepareForward(const ConvShape& s, Layout layout, const float* x,
                                          const float* w, float* y);
  absl::StatusOr<Operands> PrepareBackwardData(const ConvShape& s, Layout layout, const float* dy,
                                               const float* w, float* dx);
  absl::StatusOr<Operands> PrepareBackwardFilter(const ConvShape& s, Layout layout, const float* x,
                                                 const float* dy);

  // Workspace for a Find: the limit, halved while the allocator refuses.
  absl::StatusOr<DeviceBuffer> FindWorkspace();
  absl::StatusOr<void*> Workspace(size_t bytes);
  absl::Status SetMath(Descs* d, cudnnMathType_t math);
  // Chooses `choice` once for one direction (`op` names it in errors): for
  // NHWC, then NCHW, `prepare(layout)` gives the operands and
  // `find(descs, operands, workspace, max, &count, perf)` runs that
  // direction's cudnnFind*AlgorithmEx (`find_name`); the first acceptable
  // result (Pick) wins. UNIMPLEMENTED listing what was tried otherwise.
  template <typename Perf, int kMaxAlgos, typename Prepare, typename Find>
  absl::Status Choose(const char* op, const char* find_name, const ConvShape& s, Plan& plan,
                      Choice& choice, Prepare prepare, Find find);

  const CudaContext* const context_;
  std::map<std::tuple<int, int, int, int, int>, Plan> plans_;
  Scratch filter_, filter_tmp_, in_nchw_, other_nchw_, out_nchw_, workspace_;
};

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_H_
