// The CUDA backend's 3x3 "same" convolutions on cuDNN's legacy API (present
// in every cuDNN 9.x): forward, backward-data and backward-filter.
//
// Per shape and direction the algorithm is chosen by algorithm_choice.h's
// rule: cuDNN's heuristic ranking (or, with autotune, cudnnFind's measured
// one) for NHWC then NCHW, filtered to deterministic, FMA-math (unless TF32)
// algorithms within the workspace limit; the first that runs is kept. The
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
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_H_

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "common/compute/cuda/algorithm_choice.h"
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

enum class ConvDirection { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

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

  // Ranks one direction's algorithms for `s` now, so that its first run
  // does not (autotune: on scratch operands it allocates and frees).
  absl::Status Plan(const ConvShape& s, ConvDirection direction);

  // "fwd NHWC algo 1 (FMA, 0 bytes workspace); bwd-data ...", for logs.
  std::string Describe(const ConvShape& s) const;
  // Describe for every shape planned, one line each.
  std::vector<std::string> DescribeAll() const;

 private:
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
    std::unique_ptr<Descs> descs[2];  // by ConvLayout
    Choice choice[3];                 // by ConvDirection
  };
  // Device pointers in the layout an algorithm runs in.
  struct Operands {
    const float* in = nullptr;     // x (forward, filter) or dy (data)
    const float* other = nullptr;  // w (forward, data) or dy (filter)
    float* out = nullptr;          // y, dx or dw
  };

  // One direction on its NHWC operands: a = x (forward, filter) or dy
  // (data); b = w (forward, data) or dy (filter); out = y, dx or dw (HWIO).
  absl::Status Run(const ConvShape& s, ConvDirection d, const float* a, const float* b, float* out);
  absl::Status Rank(const ConvShape& s, ShapePlan& plan, ConvDirection d, const float* a,
                    const float* b, float* out);
  absl::Status RunCandidate(const ConvShape& s, ShapePlan& plan, ConvDirection d,
                            const AlgorithmCandidate& c, const float* a, const float* b,
                            float* out);

  absl::StatusOr<Descs*> DescsFor(const ConvShape& s, ShapePlan& plan, ConvLayout layout);
  // The operands of direction `d` in `layout` (transposed into scratch where needed).
  absl::StatusOr<Operands> Prepare(const ConvShape& s, ConvDirection d, ConvLayout layout,
                                   const float* a, const float* b, float* out);
  // HWIO -> the filter layout of `layout` (into filter_), and back.
  absl::StatusOr<const float*> FilterIn(const ConvShape& s, ConvLayout layout, const float* hwio);
  absl::Status FilterOut(const ConvShape& s, ConvLayout layout, const float* cudnn, float* hwio);
  // NHWC -> NCHW into `scratch`, and back.
  absl::StatusOr<float*> ToNchw(const float* nhwc, int n, int hw, int c, Scratch* scratch);
  absl::Status ToNhwc(const float* nchw, int n, int hw, int c, float* nhwc);

  // Workspace for a Find: the limit, halved while the allocator refuses.
  absl::StatusOr<DeviceBuffer> FindWorkspace();
  absl::StatusOr<void*> Workspace(size_t bytes);
  absl::Status SetMath(Descs* d, int math);

  const CudaContext* const context_;
  std::map<std::tuple<int, int, int, int, int>, ShapePlan> plans_;
  Scratch filter_, filter_tmp_, in_nchw_, other_nchw_, out_nchw_, workspace_;
};

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_H_
