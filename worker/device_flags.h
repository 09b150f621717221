// The worker's device flags (TensorFlow's tf.config controls), defined once
// in device_flags.cc; see device_options.h for what each means.
#ifndef PSC_WORKER_DEVICE_FLAGS_H_
#define PSC_WORKER_DEVICE_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "worker/device_options.h"

ABSL_DECLARE_FLAG(std::string, device);
ABSL_DECLARE_FLAG(std::string, visible_devices);
ABSL_DECLARE_FLAG(bool, memory_growth);
ABSL_DECLARE_FLAG(int32_t, virtual_devices);
ABSL_DECLARE_FLAG(int64_t, memory_limit_mb);
ABSL_DECLARE_FLAG(bool, log_device_placement);
ABSL_DECLARE_FLAG(bool, soft_device_placement);
ABSL_DECLARE_FLAG(bool, allow_tf32);
ABSL_DECLARE_FLAG(std::string, gpu_plugin);

namespace psc {
namespace worker {

// The flags, parsed and validated (ValidateDeviceOptions): INVALID_ARGUMENT
// naming the flag.
absl::StatusOr<DeviceOptions> DeviceOptionsFromFlags();

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_DEVICE_FLAGS_H_
