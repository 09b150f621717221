// cuda_memory.h for builds without CUDA (PSC_CUDA=OFF or no nvcc).
#include "common/gpu/cuda_memory.h"

namespace psc {
namespace gpu {

absl::StatusOr<std::unique_ptr<MemorySource>> NewCudaMemorySource(int ordinal) {
  return absl::UnimplementedError("pscluster was built without CUDA");
}

absl::StatusOr<DeviceMemory> GetDeviceMemory(int ordinal) {
  return absl::UnimplementedError("pscluster was built without CUDA");
}

}  // namespace gpu
}  // namespace psc
