// cuda_memory.h on the CUDA runtime.
#include "common/gpu/cuda_memory.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"

namespace psc {
namespace gpu {
namespace {

std::string CudaError(const char* call, cudaError_t e) {
  return absl::StrCat(call, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

class CudaMemorySource : public MemorySource {
 public:
  explicit CudaMemorySource(int ordinal) : ordinal_(ordinal) {}

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    if (cudaError_t e = cudaSetDevice(ordinal_); e != cudaSuccess) {
      return absl::InternalError(CudaError("cudaSetDevice", e));
    }
    void* ptr = nullptr;
    cudaError_t e = cudaMalloc(&ptr, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it so later calls start clean
      return absl::ResourceExhaustedError(CudaError("cudaMalloc", e));
    }
    if (e != cudaSuccess) return absl::InternalError(CudaError("cudaMalloc", e));
    return ptr;
  }

  void Free(void* ptr) override {
    cudaSetDevice(ordinal_);
    cudaFree(ptr);  // an error here (a dead context at exit) leaves nothing to do
  }

 private:
  const int ordinal_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MemorySource>> NewCudaMemorySource(int ordinal) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(CudaError("cudaGetDeviceCount", e));
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device ", ordinal, " (", count, " present)"));
  }
  return std::unique_ptr<MemorySource>(std::make_unique<CudaMemorySource>(ordinal));
}

absl::StatusOr<DeviceMemory> GetDeviceMemory(int ordinal) {
  if (cudaError_t e = cudaSetDevice(ordinal); e != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(CudaError("cudaSetDevice", e));
  }
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaError_t e = cudaMemGetInfo(&free_bytes, &total_bytes); e != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(CudaError("cudaMemGetInfo", e));
  }
  return DeviceMemory{static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
}

}  // namespace gpu
}  // namespace psc
