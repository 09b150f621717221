// The plain types of the CUDA backend's API (cuda_backend.h), which also
// cross the GPU plugin's boundary (gpu_plugin/gpu_api.h): CUDA-free, built
// into every binary.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_TYPES_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_TYPES_H_

#include <cstdint>

namespace psc {
namespace compute {

struct CudaBackendOptions {
  // The CUDA ordinal of the GPU (as this process's runtime numbers them).
  int device = 0;
  // Which logical device of that GPU this is, and how many it is split
  // into: names ("gpu:0:cudnn", "gpu:0.1:cudnn") and messages only.
  int logical_index = 0;
  int logical_count = 1;
  // TF32 for convolutions and GEMMs (off: float32 exact to the contract).
  bool allow_tf32 = false;
  // Growth mode (true): allocate on demand from a caching allocator.
  // Reserve mode (false): take memory_limit_bytes, or 90% of the free
  // memory without a limit, at creation, as TensorFlow does.
  bool memory_growth = false;
  // The most device memory this logical device may hold; 0 = no cap.
  int64_t memory_limit_bytes = 0;
  // The most workspace one convolution algorithm may use.
  int64_t conv_workspace_limit_bytes = int64_t{256} << 20;
  // Rank convolution algorithms by measuring them (cudnnFind) instead of by
  // cuDNN's heuristic: see Numerics in cuda_backend.h.
  bool cudnn_autotune = false;
};

// What a CUDA backend's allocator holds (see AllocatorStats).
struct CudaMemoryStats {
  int64_t in_use_bytes = 0;
  int64_t held_bytes = 0;
  int64_t peak_in_use_bytes = 0;
  int64_t limit_bytes = 0;
};

// Where a CUDA backend queues its work: the CUDA ordinal of its GPU and its
// stream (a cudaStream_t, as void* so that this header stays CUDA-free).
struct CudaQueue {
  int device = -1;
  void* stream = nullptr;
};

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_TYPES_H_
