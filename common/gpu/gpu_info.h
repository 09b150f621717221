// What GPUs this process can use, and a self-test that proves the CUDA
// toolchain and a device work end to end (kernel, cuBLAS, cuDNN). GpuInfo
// is built into every binary; the functions only into the GPU plugin
// (gpu_list.cc), which the rest of pscluster calls through gpu::GpuApi
// (gpu_plugin/gpu_api.h).
#ifndef PSC_COMMON_GPU_GPU_INFO_H_
#define PSC_COMMON_GPU_GPU_INFO_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace psc {
namespace gpu {

struct GpuInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  long long total_memory = 0;
  long long free_memory = 0;
  // "NVIDIA H200, compute capability 9.0, 140 GiB"
  std::string Description() const;
};

// The GPUs the CUDA runtime sees. Any runtime error (no driver,
// cudaErrorInsufficientDriver, no device) means "no GPU": the list is empty
// and *why_none (if given) says why.
std::vector<GpuInfo> ListGpus(std::string* why_none = nullptr);

// Library versions for logs and --list_devices.
std::string GpuLibraryVersions();

// Runs the self-test on GPU `ordinal`. INTERNAL naming the failed call.
absl::Status GpuSelfTest(int ordinal);

}  // namespace gpu
}  // namespace psc

#endif  // PSC_COMMON_GPU_GPU_INFO_H_
