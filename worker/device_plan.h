// Which logical devices a worker trains on, decided from its DeviceOptions
// and the GPUs the machine has: a pure function, unit-tested with fake
// device lists. Names follow TensorFlow: physical devices
// "/physical_device:GPU:0", logical ones numbered in order across the
// physical ones, "/job:worker/replica:0/task:1/device:GPU:3".
//
// One model replica runs per logical device (MirroredStrategy inside a
// worker); replica 0 is the first.
#ifndef PSC_WORKER_DEVICE_PLAN_H_
#define PSC_WORKER_DEVICE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/gpu/gpu_info.h"
#include "common/gpu_plugin/gpu_api.h"
#include "worker/device_options.h"

namespace psc {
namespace worker {

struct LogicalDevice {
  enum Kind { kCpu, kGpu };
  Kind kind = kCpu;
  int gpu = -1;           // CUDA ordinal of the physical GPU; -1 for the CPU
  int logical_index = 0;  // among the logical devices of that physical device
  int logical_count = 1;
  int64_t memory_limit_bytes = 0;  // 0 = none
  std::string name;                // TensorFlow's logical device name
};

struct DevicePlan {
  // The replicas' devices, in order. Never empty once planned.
  std::vector<LogicalDevice> devices;
  // Why the CPU trains when it does ("--device=cpu", "no usable GPU: ..."); empty on GPUs.
  std::string cpu_reason;
  // Soft placement's fallbacks, for the log.
  std::vector<std::string> warnings;

  bool on_gpu() const { return !devices.empty() && devices[0].kind == LogicalDevice::kGpu; }
};

// `gpus` are the usable GPUs (ListGpus), `why_no_gpu` the reason when there
// are none. Errors:
//   INVALID_ARGUMENT     ValidateDeviceOptions's; --visible_devices naming a
//                        GPU the machine lacks (when it has GPUs); logical
//                        devices whose limits add up to more than a GPU has
//   FAILED_PRECONDITION  --device=gpu without a usable GPU and without
//                        --soft_device_placement, naming the reason
absl::StatusOr<DevicePlan> PlanDevices(const DeviceOptions& options,
                                       const std::vector<gpu::GpuInfo>& gpus,
                                       absl::string_view why_no_gpu, int task_index);

// What a worker trains on: its options and the planned devices. The default
// (an empty plan) is the CPU alone, one replica: what a worker did before
// GPUs, and what in-process tests get.
struct DeviceSetup {
  DeviceOptions options;
  DevicePlan plan;
  // The GPU plugin's API (gpu_discovery.h), not owned; null when it is not
  // loaded, and then every device of the plan is the CPU.
  gpu::GpuApi* gpu = nullptr;
};

// A plan of the CPU alone: one replica, what a worker did before GPUs.
DevicePlan CpuOnlyPlan(int task_index, int virtual_devices = 1);

// Lines for --list_devices: the physical devices, then the logical ones.
std::string FormatDevicePlan(const DevicePlan& plan, const std::vector<gpu::GpuInfo>& gpus,
                             absl::string_view why_no_gpu);

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_DEVICE_PLAN_H_
