#include "common/gpu/gpu_info.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/gpu/gpu_runtime.h"

namespace psc {
namespace gpu {

std::string GpuInfo::Description() const {
  return absl::StrFormat("%s, compute capability %d.%d, %.1f GiB", name, cc_major, cc_minor,
                         static_cast<double>(total_memory) / (1 << 30));
}

bool BuiltWithCuda() { return runtime::BuiltWithCuda(); }

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
  if (!runtime::BuiltWithCuda()) {
    return absl::FailedPreconditionError("pscluster was built without CUDA");
  }
  double max_error = 0;
  std::string error = runtime::SelfTest(ordinal, &max_error);
  if (!error.empty()) return absl::InternalError(absl::StrCat("GPU ", ordinal, ": ", error));
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace psc
