// The GPU plugin (libpsc_cuda_plugin.so): gpu::GpuApi over the CUDA sources
// (gpu/, compute/cuda/, collective/nccl_collective), and the one symbol the
// shared object exports. Built only where nvcc is found.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/build_info.h"
#include "common/collective/nccl_collective.h"
#include "common/compute/cuda/cuda_backend.h"
#include "common/gpu/gpu_info.h"
#include "common/gpu_plugin/gpu_api.h"

namespace psc {
namespace gpu {
namespace {

class CudaGpuApi final : public GpuApi {
 public:
  std::vector<GpuInfo> ListGpus(std::string* why_none) override { return gpu::ListGpus(why_none); }
  std::string LibraryVersions() override { return GpuLibraryVersions(); }
  absl::Status SelfTest(int ordinal) override { return GpuSelfTest(ordinal); }

  absl::StatusOr<std::unique_ptr<compute::ComputeBackend>> CreateBackend(
      const compute::CudaBackendOptions& options) override {
    return compute::CreateCudaBackend(options);
  }
  absl::StatusOr<compute::CudaMemoryStats> MemoryStats(
      const compute::ComputeBackend& backend) override {
    return compute::GetCudaMemoryStats(backend);
  }
  absl::StatusOr<std::vector<std::string>> DescribeConvAlgorithms(
      const compute::ComputeBackend& backend) override {
    return compute::DescribeCudaConvAlgorithms(backend);
  }
  absl::Status Synchronize(compute::ComputeBackend* backend) override {
    return compute::SynchronizeCudaBackend(backend);
  }
  absl::Status ReduceIntoOnDevice(
      compute::ComputeBackend* sum_backend, const std::vector<compute::DeviceTensor*>& sums,
      const std::vector<compute::ComputeBackend*>& parts_backends,
      const std::vector<std::vector<const compute::DeviceTensor*>>& parts) override {
    return compute::ReduceIntoOnDevice(sum_backend, sums, parts_backends, parts);
  }
  absl::StatusOr<compute::CudaQueue> Queue(compute::ComputeBackend* backend) override {
    return compute::GetCudaQueue(backend);
  }
  absl::StatusOr<float*> TensorData(compute::DeviceTensor* tensor) override {
    return compute::CudaTensorData(tensor);
  }
  absl::Status ScaleOnDevice(compute::ComputeBackend* backend,
                             const std::vector<compute::DeviceTensor*>& tensors,
                             float factor) override {
    return compute::ScaleOnDevice(backend, tensors, factor);
  }

  absl::StatusOr<std::unique_ptr<collective::Collective>> CreateNcclCollective(
      collective::KeyValueStore* store, const std::string& prefix, int rank, int size, int device,
      absl::Duration timeout) override {
    return collective::CreateNcclCollective(store, prefix, rank, size, device, timeout);
  }
  absl::StatusOr<std::unique_ptr<collective::LocalNcclGroup>> CreateLocalNcclGroup(
      const std::vector<int>& devices) override {
    return collective::CreateLocalNcclGroup(devices);
  }
};

absl::Status Create(std::unique_ptr<GpuApi>* api) {
  std::string why;
  if (gpu::ListGpus(&why).empty()) {
    return absl::FailedPreconditionError(absl::StrCat("no usable GPU: ", why));
  }
  *api = std::make_unique<CudaGpuApi>();
  return absl::OkStatus();
}

const std::string& Build() {
  static const std::string* const build = new std::string(
      absl::StrCat(base::VersionString(), ", CUDA runtime ", PSC_CUDA_VERSION_TEXT));
  return *build;
}

}  // namespace
}  // namespace gpu
}  // namespace psc

extern "C" __attribute__((visibility("default"))) const PscGpuPluginV1* psc_backend_plugin_v1(
    void) {
  static const PscGpuPluginV1 plugin = {psc::gpu::kGpuPluginAbiVersion,
                                        PSC_GPU_PLUGIN_INTERFACE_HASH, psc::gpu::Build().c_str(),
                                        &psc::gpu::Create};
  return &plugin;
}
