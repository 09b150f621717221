// The compute devices a worker sees, named as TensorFlow names them
// ("/job:worker/replica:0/task:1/device:GPU:0").
#ifndef PSC_WORKER_DEVICES_H_
#define PSC_WORKER_DEVICES_H_

#include <string>
#include <vector>

#include "proto/common.pb.h"

namespace psc {
namespace worker {

// The CPU, then every GPU the CUDA runtime reports. `why_no_gpu` (if given)
// gets the reason when there is none.
std::vector<proto::DeviceInfo> ListDevices(int task_index, std::string* why_no_gpu = nullptr);

// Human-readable lines for --list_devices.
std::string FormatDevices(const std::vector<proto::DeviceInfo>& devices);

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_DEVICES_H_
