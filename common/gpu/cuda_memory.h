// CUDA device memory for DeviceAllocator (cudaMalloc/cudaFree on one
// device), and a device's free and total memory (cudaMemGetInfo). The header
// is CUDA-free; it is built only into the GPU plugin.
#ifndef PSC_COMMON_GPU_CUDA_MEMORY_H_
#define PSC_COMMON_GPU_CUDA_MEMORY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/gpu/device_allocator.h"

namespace psc {
namespace gpu {

// Memory of CUDA device `ordinal`: Allocate is RESOURCE_EXHAUSTED when
// cudaMalloc runs out of memory, INTERNAL naming the call on any other
// error. The source sets the device before each call, so any thread may use it.
absl::StatusOr<std::unique_ptr<MemorySource>> NewCudaMemorySource(int ordinal);

struct DeviceMemory {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};

// cudaMemGetInfo on `ordinal`: FAILED_PRECONDITION naming the runtime's error
// when there is no usable device.
absl::StatusOr<DeviceMemory> GetDeviceMemory(int ordinal);

}  // namespace gpu
}  // namespace psc

#endif  // PSC_COMMON_GPU_CUDA_MEMORY_H_
