// What every part of the CUDA backend shares: the device, its stream, the
// cuDNN and cuBLAS handles bound to that stream, the allocator and the math
// settings. Owned by the backend; the parts hold a pointer. Only the CUDA
// backend's sources include this.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_CONTEXT_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_CONTEXT_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>

#include "common/gpu/device_allocator.h"

namespace psc {
namespace compute {
namespace cuda {

struct CudaContext {
  int device = 0;  // CUDA ordinal
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  std::shared_ptr<gpu::DeviceAllocator> allocator;
  // TF32 off (false): cuDNN keeps only CUDNN_FMA_MATH algorithms, cuBLAS runs
  // its default math.
  bool allow_tf32 = false;
  // The most workspace a convolution algorithm may use.
  size_t conv_workspace_limit = 0;
  // Rank convolution algorithms by cudnnFind's measured times instead of
  // cuDNN's heuristic (algorithm_choice.h).
  bool autotune = false;
};

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_CONTEXT_H_
