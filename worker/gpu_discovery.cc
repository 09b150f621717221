#include "worker/gpu_discovery.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"

namespace psc {
namespace worker {

GpuDiscoverySeams MachineSeams() {
  return GpuDiscoverySeams{[](const std::string& path) {
                             struct stat st;
                             return stat(path.c_str(), &st) == 0;
                           },
                           &gpu::DriverGpuCount, &gpu::GpuPlugin::Load};
}

WorkerGpus DiscoverGpus(DeviceKind device, std::string plugin_path,
                        const GpuDiscoverySeams& seams) {
  WorkerGpus out;
  if (device == DeviceKind::kCpu) {
    out.why_none = "--device=cpu";
    return out;
  }
  if (plugin_path.empty()) plugin_path = gpu::DefaultGpuPluginPath();
  if (device == DeviceKind::kAuto) {
    if (!seams.file_exists(plugin_path)) {
      out.why_none = absl::StrCat("no GPU plugin at ", plugin_path);
      return out;
    }
    std::string why;
    if (seams.driver_gpu_count(&why) <= 0) {
      out.why_none = why;
      return out;
    }
  }
  absl::StatusOr<std::unique_ptr<gpu::GpuPlugin>> plugin = seams.load(plugin_path);
  if (!plugin.ok()) {
    out.why_none = std::string(plugin.status().message());
    return out;
  }
  out.plugin = *std::move(plugin);
  out.gpus = out.plugin->api()->ListGpus(&out.why_none);
  return out;
}

}  // namespace worker
}  // namespace psc
