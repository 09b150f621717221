// cuda_backend.h for builds without CUDA (PSC_CUDA=OFF or no nvcc).
#include "absl/strings/str_cat.h"
#include "common/compute/cuda/cuda_backend.h"

namespace psc {
namespace compute {

bool CudaBackendBuilt() { return false; }

absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCudaBackend(
    const CudaBackendOptions& options) {
  return absl::UnimplementedError("pscluster was built without CUDA (PSC_CUDA=OFF or no nvcc)");
}

absl::StatusOr<CudaMemoryStats> GetCudaMemoryStats(const ComputeBackend& backend) {
  return absl::InvalidArgumentError(absl::StrCat(backend.name(), " is not a CUDA backend"));
}

absl::StatusOr<std::vector<std::string>> DescribeCudaConvAlgorithms(const ComputeBackend& backend) {
  return absl::InvalidArgumentError(absl::StrCat(backend.name(), " is not a CUDA backend"));
}

absl::Status SynchronizeCudaBackend(ComputeBackend* backend) {
  return absl::InvalidArgumentError(absl::StrCat(backend->name(), " is not a CUDA backend"));
}

absl::Status ReduceIntoOnDevice(ComputeBackend* sum_backend, const std::vector<DeviceTensor*>& sums,
                                const std::vector<ComputeBackend*>& parts_backends,
                                const std::vector<std::vector<const DeviceTensor*>>& parts) {
  return absl::UnimplementedError("pscluster was built without CUDA");
}

absl::StatusOr<CudaQueue> GetCudaQueue(ComputeBackend* backend) {
  return absl::UnimplementedError("pscluster was built without CUDA");
}

absl::StatusOr<float*> CudaTensorData(DeviceTensor* tensor) {
  return absl::UnimplementedError("pscluster was built without CUDA");
}

absl::Status ScaleOnDevice(ComputeBackend* backend, const std::vector<DeviceTensor*>& tensors,
                           float factor) {
  return absl::UnimplementedError("pscluster was built without CUDA");
}

}  // namespace compute
}  // namespace psc
