#include "common/gpu/gpu_info.h"

#include "absl/strings/str_format.h"

namespace psc {
namespace gpu {

std::string GpuInfo::Description() const {
  return absl::StrFormat("%s, compute capability %d.%d, %.1f GiB", name, cc_major, cc_minor,
                         static_cast<double>(total_memory) / (1 << 30));
}

}  // namespace gpu
}  // namespace psc
