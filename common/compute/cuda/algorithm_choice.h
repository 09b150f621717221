// How the CUDA backend chooses a cuDNN convolution algorithm for a shape and
// direction, as plain C++ (no CUDA headers), so the rule is unit-tested
// without a GPU.
//
// The rule, the same in every process for the same GPU model, cuDNN version,
// shape and options, so that workers, runs and virtual devices compute
// bit-identical gradients:
//   1. rank: cuDNN's own heuristic order (cudnnGetConvolution*Algorithm_v7),
//      for the NHWC layout, then for NCHW (activations transposed around the
//      call). Opt-in autotune (CudaBackendOptions::cudnn_autotune) ranks by
//      cudnnFind*AlgorithmEx's measured times instead: often faster, but
//      near-tied algorithms then differ between processes.
//   2. keep: what cuDNN reports as supported, deterministic, with
//      CUDNN_FMA_MATH unless TF32 is allowed, and within the workspace limit
//      (Acceptable).
//   3. run: the first kept candidate that runs; one whose workspace the
//      allocator refuses (RESOURCE_EXHAUSTED, e.g. under --memory_limit_mb)
//      or that cuDNN refuses at run time (UNIMPLEMENTED) gives way to the
//      next, as PyTorch's algorithm iterator does (FirstThatRuns). The one
//      that ran is kept for the shape.
#ifndef PSC_COMMON_COMPUTE_CUDA_ALGORITHM_CHOICE_H_
#define PSC_COMMON_COMPUTE_CUDA_ALGORITHM_CHOICE_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace psc {
namespace compute {
namespace cuda {

enum class ConvLayout { kNhwc = 0, kNchw = 1 };

// One entry of a cuDNN perf result, in plain types.
struct AlgorithmCandidate {
  ConvLayout layout = ConvLayout::kNhwc;
  int algo = 0;
  bool supported = false;      // cuDNN's status for it was CUDNN_STATUS_SUCCESS
  bool deterministic = false;  // CUDNN_DETERMINISTIC
  bool fma_math = false;       // CUDNN_FMA_MATH: no TF32 or other reduced precision
  int math = 0;                // the cudnnMathType_t to run it with
  size_t workspace = 0;        // bytes
  // "NHWC algo 1 (FMA, 0 bytes workspace)", for logs and errors.
  std::string Text() const;
};

// The candidates of `ranked` a backend may run, in ranked order.
std::vector<AlgorithmCandidate> Acceptable(const std::vector<AlgorithmCandidate>& ranked,
                                           bool allow_tf32, size_t workspace_limit);

// Calls attempt(0), attempt(1), ... until one returns OK, and returns its
// index. RESOURCE_EXHAUSTED and UNIMPLEMENTED move on to the next; any other
// error is returned at once. When none runs: UNIMPLEMENTED (RESOURCE_EXHAUSTED
// if memory was what every attempt lacked) naming `what` and each attempt's
// reason, via describe(i).
absl::StatusOr<int> FirstThatRuns(int count, const std::function<absl::Status(int)>& attempt,
                                  const std::function<std::string(int)>& describe,
                                  const std::string& what);

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_ALGORITHM_CHOICE_H_
