// gpu_info.h's functions over the CUDA runtime (gpu_runtime.h): in the GPU
// plugin only.
#include "absl/strings/str_cat.h"
#include "common/gpu/gpu_info.h"
#include "common/gpu/gpu_runtime.h"

namespace psc {
namespace gpu {

std::vector<GpuInfo> ListGpus(std::string* why_none) {
  std::vector<GpuInfo> out;
  std::string error;
  const int count = runtime::DeviceCount(&error);
  if (count <= 0) {
    if (why_none != nullptr) *why_none = count == 0 ? "no CUDA device found" : error;
    return out;
  }
  for (int i = 0; i < count; ++i) {
    runtime::Device d;
    if (!runtime::GetDevice(i, &d, &error)) continue;
    out.push_back({d.ordinal, d.name, d.cc_major, d.cc_minor, d.total_memory, d.free_memory});
  }
  if (out.empty() && why_none != nullptr) *why_none = error;
  return out;
}

std::string GpuLibraryVersions() { return runtime::Versions(); }

absl::Status GpuSelfTest(int ordinal) {
  double max_error = 0;
  std::string error = runtime::SelfTest(ordinal, &max_error);
  if (!error.empty()) return absl::InternalError(absl::StrCat("GPU ", ordinal, ": ", error));
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace psc
