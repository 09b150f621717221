#include "worker/device_flags.h"

#include "absl/flags/flag.h"
#include "common/base/status_macros.h"

ABSL_FLAG(std::string, device, "auto",
          "What trains: auto (the GPUs when one is usable, else the CPU), gpu (an error without "
          "a usable GPU, unless --soft_device_placement) or cpu.");
ABSL_FLAG(std::string, visible_devices, "", "GPUs to use, by CUDA index, e.g. 0,2; empty = all.");
ABSL_FLAG(bool, memory_growth, false,
          "Allocate GPU memory on demand instead of reserving --memory_limit_mb (or 90% of the "
          "free memory) at start. Conflicts with --virtual_devices > 1.");
ABSL_FLAG(int32_t, virtual_devices, 1,
          "Split each visible GPU (or, with --device=cpu, the CPU) into this many logical "
          "devices, one model replica each; GPUs need --memory_limit_mb.");
ABSL_FLAG(int64_t, memory_limit_mb, 0,
          "Memory cap of each logical GPU in MiB (0 = none); exceeding it is RESOURCE_EXHAUSTED.");
ABSL_FLAG(bool, log_device_placement, false,
          "Log the device of every variable and op of every replica when a job starts.");
ABSL_FLAG(bool, soft_device_placement, false,
          "When a GPU is asked for and unusable (no driver, no device, an op unsupported), "
          "train on the CPU with a warning instead of failing.");
ABSL_FLAG(bool, allow_tf32, false,
          "Let cuDNN and cuBLAS use TF32 tensor cores (faster, about 3 fewer decimal digits).");
ABSL_FLAG(std::string, gpu_plugin, "",
          "The GPU plugin to load when a GPU is asked for (--device=gpu, or auto with a GPU); "
          "empty = libpsc_cuda_plugin.so beside this binary.");
ABSL_FLAG(bool, cudnn_autotune, false,
          "Choose each convolution's cuDNN algorithm by timing them (cudnnFind) instead of by "
          "cuDNN's heuristic: perhaps faster, but gradients are then no longer bit-identical "
          "across workers, runs and virtual devices.");

namespace psc {
namespace worker {

absl::StatusOr<DeviceOptions> DeviceOptionsFromFlags() {
  DeviceOptions o;
  PSC_ASSIGN_OR_RETURN(o.device, ParseDeviceKind(absl::GetFlag(FLAGS_device)));
  PSC_ASSIGN_OR_RETURN(o.visible_devices,
                       ParseVisibleDevices(absl::GetFlag(FLAGS_visible_devices)));
  o.memory_growth = absl::GetFlag(FLAGS_memory_growth);
  o.virtual_devices = absl::GetFlag(FLAGS_virtual_devices);
  o.memory_limit_mb = absl::GetFlag(FLAGS_memory_limit_mb);
  o.log_device_placement = absl::GetFlag(FLAGS_log_device_placement);
  o.soft_device_placement = absl::GetFlag(FLAGS_soft_device_placement);
  o.allow_tf32 = absl::GetFlag(FLAGS_allow_tf32);
  o.cudnn_autotune = absl::GetFlag(FLAGS_cudnn_autotune);
  o.gpu_plugin = absl::GetFlag(FLAGS_gpu_plugin);
  PSC_RETURN_IF_ERROR(ValidateDeviceOptions(o));
  return o;
}

}  // namespace worker
}  // namespace psc
