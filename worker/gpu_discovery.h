// Whether a worker loads the GPU plugin, and which GPUs it then has: the
// rule of --device and --gpu_plugin, transport-free and with its seams (the
// file system, the CUDA driver, the loader) injectable for tests.
//
//   --device=cpu    the plugin is not loaded; no CUDA library is mapped
//   --device=auto   loaded only when its file exists and the CUDA driver
//                   (libcuda.so.1, asked through cuInit/cuDeviceGetCount
//                   alone) reports a GPU; otherwise the CPU, no CUDA
//                   library mapped, and the reason kept for the log
//   --device=gpu    loaded; a failure (no file, dlopen's error, another
//                   build's plugin, no usable GPU) becomes the reason there
//                   is no GPU, which PlanDevices turns into exit 1 naming it,
//                   or into the CPU with a warning under
//                   --soft_device_placement
#ifndef PSC_WORKER_GPU_DISCOVERY_H_
#define PSC_WORKER_GPU_DISCOVERY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gpu/gpu_info.h"
#include "common/gpu_plugin/plugin_loader.h"
#include "worker/device_options.h"

namespace psc {
namespace worker {

struct WorkerGpus {
  std::unique_ptr<gpu::GpuPlugin> plugin;  // null: not loaded
  std::vector<gpu::GpuInfo> gpus;          // the plugin's GPUs; empty without it
  std::string why_none;                    // why there is no GPU, when there is none

  gpu::GpuApi* api() const { return plugin == nullptr ? nullptr : plugin->api(); }
};

struct GpuDiscoverySeams {
  std::function<bool(const std::string& path)> file_exists;
  std::function<int(std::string* why)> driver_gpu_count;  // gpu::DriverGpuCount
  std::function<absl::StatusOr<std::unique_ptr<gpu::GpuPlugin>>(const std::string& path)> load;
};
// The machine's: stat(2), gpu::DriverGpuCount, gpu::GpuPlugin::Load.
GpuDiscoverySeams MachineSeams();

// See the file comment. `plugin_path` empty: gpu::DefaultGpuPluginPath().
WorkerGpus DiscoverGpus(DeviceKind device, std::string plugin_path,
                        const GpuDiscoverySeams& seams = MachineSeams());

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_GPU_DISCOVERY_H_
