// A worker's device settings, TensorFlow's tf.config controls as flags
// (worker/device_flags.h): which device type trains, which GPUs are
// visible, memory growth, virtual (logical) devices with memory limits,
// placement logging, soft placement and TF32. Parsing and validation are
// pure functions, so every rule is unit-tested without a GPU.
#ifndef PSC_WORKER_DEVICE_OPTIONS_H_
#define PSC_WORKER_DEVICE_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psc {
namespace worker {

// --device: what trains.
//   kAuto  the visible GPUs when any is usable, else the CPU (silently: a
//          CPU-only machine trains exactly as before there were GPUs)
//   kGpu   the visible GPUs; none usable is an error naming the reason, or
//          with --soft_device_placement the CPU and a warning
//   kCpu   the CPU, whatever GPUs there are
enum class DeviceKind { kAuto, kGpu, kCpu };

struct DeviceOptions {
  DeviceKind device = DeviceKind::kAuto;
  // CUDA ordinals of the GPUs to use, in order; empty = every GPU.
  std::vector<int> visible_devices;
  // Allocate GPU memory on demand (a caching allocator) instead of
  // reserving the limit, or 90% of the free memory, at start.
  bool memory_growth = false;
  // Logical devices per physical device used (each GPU, or the CPU); a
  // worker runs one model replica per logical device.
  int virtual_devices = 1;
  // Each logical GPU's memory cap in MiB; 0 = none. Needed with
  // virtual_devices > 1 on GPUs.
  int64_t memory_limit_mb = 0;
  bool log_device_placement = false;
  bool soft_device_placement = false;
  // The GPU plugin's path (--gpu_plugin); empty: beside the binary.
  std::string gpu_plugin;
  bool allow_tf32 = false;
  // Time cuDNN's convolution algorithms instead of taking its heuristic's
  // ranking (not bit-reproducible across processes).
  bool cudnn_autotune = false;
};

// "auto", "gpu", "cpu" (case-insensitive); INVALID_ARGUMENT naming the flag.
absl::StatusOr<DeviceKind> ParseDeviceKind(absl::string_view text);
const char* DeviceKindName(DeviceKind kind);

// "0,2" -> {0, 2}; "" -> {} (every GPU). INVALID_ARGUMENT for anything but
// distinct non-negative integers separated by commas.
absl::StatusOr<std::vector<int>> ParseVisibleDevices(absl::string_view text);

// The rules that hold whatever the machine has. INVALID_ARGUMENT naming the
// flags for: virtual_devices < 1; a negative memory limit; memory growth
// with virtual_devices > 1 (as in TensorFlow, fixed per-device limits and
// growth on demand conflict); virtual_devices > 1 on GPUs without a memory
// limit (each logical GPU needs its cap).
absl::Status ValidateDeviceOptions(const DeviceOptions& options);

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_DEVICE_OPTIONS_H_
