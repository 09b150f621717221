#include "worker/devices.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/gpu/gpu_info.h"

namespace psc {
namespace worker {

std::vector<proto::DeviceInfo> ListDevices(int task_index, const std::vector<gpu::GpuInfo>& gpus) {
  const std::string prefix = absl::StrCat("/job:worker/replica:0/task:", task_index, "/device:");
  std::vector<proto::DeviceInfo> out;
  proto::DeviceInfo cpu;
  cpu.set_name(prefix + "CPU:0");
  cpu.set_device_type("CPU");
  cpu.set_description("host CPU (oneDNN)");
  out.push_back(cpu);
  for (const gpu::GpuInfo& gpu : gpus) {
    proto::DeviceInfo d;
    d.set_name(absl::StrCat(prefix, "GPU:", gpu.ordinal));
    d.set_device_type("GPU");
    d.set_description(gpu.Description());
    d.set_memory_bytes(gpu.total_memory);
    out.push_back(d);
  }
  return out;
}

std::string FormatDevices(const std::vector<proto::DeviceInfo>& devices) {
  std::string out;
  for (const proto::DeviceInfo& d : devices) {
    absl::StrAppendFormat(&out, "%-45s %-4s %s\n", d.name(), d.device_type(), d.description());
  }
  return out;
}

}  // namespace worker
}  // namespace psc
