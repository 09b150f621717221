// The boundary between pscluster and its CUDA backend, which lives in a
// shared object of its own (libpsc_cuda_plugin.so) so that no other binary
// links or maps a CUDA library: the worker, the benchmarks and the tests
// load it with dlopen (plugin_loader.h) only when a GPU is asked for.
//
// The plugin exports one versioned C entry point, psc_backend_plugin_v1(),
// as ggml's backends do: it returns the ABI it was built for and a factory
// of GpuApi, the C++ interface below. Everything that crosses the boundary
// is declared in CUDA-free headers built into both sides: this interface,
// compute::ComputeBackend and DeviceTensor (compute/backend.h) with the CUDA
// backend's option and statistics structs (compute/cuda/cuda_types.h), and
// collective::Collective and LocalNcclGroup (collective/collective.h,
// collective/nccl_group.h). Calls across are virtual; no exception crosses;
// both sides share the C++ runtime and Abseil (Debian's shared libraries),
// so absl::Status and std:: types pass as they are. The loader refuses a
// plugin of another ABI version or built from other interface headers
// (kGpuPluginInterfaceHash, a hash of those headers taken at configure time).
#ifndef PSC_COMMON_GPU_PLUGIN_GPU_API_H_
#define PSC_COMMON_GPU_PLUGIN_GPU_API_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective/collective.h"
#include "common/collective/nccl_group.h"
#include "common/compute/backend.h"
#include "common/compute/cuda/cuda_types.h"
#include "common/gpu/gpu_info.h"

namespace psc {
namespace gpu {

// What the plugin does, each as the function of the same name in the CUDA
// sources does it (their headers give the contracts): gpu/gpu_info.h,
// compute/cuda/cuda_backend.h, collective/nccl_collective.h.
// Thread-safe where those functions are.
class GpuApi {
 public:
  virtual ~GpuApi() = default;

  // gpu_info.h: the GPUs the CUDA runtime sees (empty, with *why_none, when
  // none); the libraries' versions; the self-test of one GPU.
  virtual std::vector<GpuInfo> ListGpus(std::string* why_none) = 0;
  virtual std::string LibraryVersions() = 0;
  virtual absl::Status SelfTest(int ordinal) = 0;

  // cuda_backend.h.
  virtual absl::StatusOr<std::unique_ptr<compute::ComputeBackend>> CreateBackend(
      const compute::CudaBackendOptions& options) = 0;
  virtual absl::StatusOr<compute::CudaMemoryStats> MemoryStats(
      const compute::ComputeBackend& backend) = 0;
  virtual absl::StatusOr<std::vector<std::string>> DescribeConvAlgorithms(
      const compute::ComputeBackend& backend) = 0;
  virtual absl::Status Synchronize(compute::ComputeBackend* backend) = 0;
  virtual absl::Status ReduceIntoOnDevice(
      compute::ComputeBackend* sum_backend, const std::vector<compute::DeviceTensor*>& sums,
      const std::vector<compute::ComputeBackend*>& parts_backends,
      const std::vector<std::vector<const compute::DeviceTensor*>>& parts) = 0;
  virtual absl::StatusOr<compute::CudaQueue> Queue(compute::ComputeBackend* backend) = 0;
  virtual absl::StatusOr<float*> TensorData(compute::DeviceTensor* tensor) = 0;
  virtual absl::Status ScaleOnDevice(compute::ComputeBackend* backend,
                                     const std::vector<compute::DeviceTensor*>& tensors,
                                     float factor) = 0;

  // nccl_collective.h.
  virtual absl::StatusOr<std::unique_ptr<collective::Collective>> CreateNcclCollective(
      collective::KeyValueStore* store, const std::string& prefix, int rank, int size, int device,
      absl::Duration timeout) = 0;
  virtual absl::StatusOr<std::unique_ptr<collective::LocalNcclGroup>> CreateLocalNcclGroup(
      const std::vector<int>& devices) = 0;
};

// Bumped whenever GpuApi or a type that crosses the boundary changes in a way
// the hash below would not catch.
inline constexpr uint32_t kGpuPluginAbiVersion = 1;

}  // namespace gpu
}  // namespace psc

extern "C" {

// What psc_backend_plugin_v1 returns: static data of the plugin's.
struct PscGpuPluginV1 {
  uint32_t abi_version;        // kGpuPluginAbiVersion of the plugin's build
  const char* interface_hash;  // PSC_GPU_PLUGIN_INTERFACE_HASH of the plugin's build
  const char* build;           // "pscluster 0.1.0 (<commit>), CUDA 13.0", for logs
  // Makes the plugin's GpuApi into *api: OK, or FAILED_PRECONDITION "no
  // usable GPU: <the CUDA runtime's reason>" when the runtime sees no
  // device (the driver missing or too old, no device node, none visible).
  absl::Status (*create)(std::unique_ptr<psc::gpu::GpuApi>* api);
};

// The plugin's one exported symbol.
const PscGpuPluginV1* psc_backend_plugin_v1(void);

}  // extern "C"

#define PSC_GPU_PLUGIN_ENTRY "psc_backend_plugin_v1"

#endif  // PSC_COMMON_GPU_PLUGIN_GPU_API_H_
