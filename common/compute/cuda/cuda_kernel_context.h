// What a CUDA kernel (kernel_registry.h) reaches of the CUDA backend it is
// registered in: the device entered, its stream, cuBLAS and cuDNN handles, a
// tensor's device memory, scratch and the column sums. The backend implements it and registers its
// kernels with it (cuda_elementwise_kernels.h), inside the GPU plugin. Only the CUDA backend's
// sources include this.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_KERNEL_CONTEXT_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_KERNEL_CONTEXT_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/compute/backend.h"

namespace psc {
namespace compute {
namespace cuda {

// Thread-compatible, as its backend.
class CudaKernelContext {
 public:
  virtual ~CudaKernelContext() = default;
  // The checks before one of our kernels runs over `t`: at most 2^31 - 1
  // elements (UNIMPLEMENTED naming `op` and the shape otherwise), and the
  // backend's device made current.
  virtual absl::Status Elementwise(const char* op, const DeviceTensor& t) = 0;
  // The backend's device made current, for library calls (cuBLAS) that
  // take their own sizes.
  virtual absl::Status Enter() = 0;
  // The stream every op of the backend runs on, in order.
  virtual cudaStream_t stream() const = 0;
  // A float32 tensor's device memory (the kernel checked the dtype), and
  // any tensor's (ids, a loss's totals).
  virtual float* DataOf(const DeviceTensor& t) const = 0;
  virtual void* MemoryOf(const DeviceTensor& t) const = 0;
  // Device memory of at least `bytes` for a kernel's own use (max
  // pooling's argmax), the backend's one such buffer: valid until the next
  // kernel asks for it. RESOURCE_EXHAUSTED from the allocator.
  virtual absl::StatusOr<void*> KernelScratch(size_t bytes) = 0;
  // The backend's cuBLAS and cuDNN handles, bound to its stream.
  virtual cublasHandle_t cublas() const = 0;
  virtual cudnnHandle_t cudnn() const = 0;
  // out [cols] = the column sums of x [rows, cols] (a bias gradient), on
  // the stream.
  virtual absl::Status ColumnSums(const float* x, int64_t rows, int64_t cols, float* out) = 0;
};

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_KERNEL_CONTEXT_H_
