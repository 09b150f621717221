// The compute devices a worker sees, named as TensorFlow names them
// ("/job:worker/replica:0/task:1/device:GPU:0").
#ifndef PSC_WORKER_DEVICES_H_
#define PSC_WORKER_DEVICES_H_

#include <string>
#include <vector>

#include "common/gpu/gpu_info.h"
#include "proto/common.pb.h"

namespace psc {
namespace worker {

// The CPU, then `gpus` (the GPU plugin's, gpu_discovery.h).
std::vector<proto::DeviceInfo> ListDevices(int task_index, const std::vector<gpu::GpuInfo>& gpus);

// Human-readable lines for --list_devices.
std::string FormatDevices(const std::vector<proto::DeviceInfo>& devices);

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_DEVICES_H_
