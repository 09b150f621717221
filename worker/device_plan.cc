#include "worker/device_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"

namespace psc {
namespace worker {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::string Prefix(int task_index) {
  return absl::StrCat("/job:worker/replica:0/task:", task_index, "/device:");
}

std::string Ordinals(const std::vector<gpu::GpuInfo>& gpus) {
  std::vector<int> ids;
  for (const gpu::GpuInfo& g : gpus) ids.push_back(g.ordinal);
  return absl::StrJoin(ids, ", ");
}

}  // namespace

DevicePlan CpuOnlyPlan(int task_index, int virtual_devices) {
  DevicePlan plan;
  const int n = std::max(1, virtual_devices);
  for (int i = 0; i < n; ++i) {
    LogicalDevice d;
    d.kind = LogicalDevice::kCpu;
    d.logical_index = i;
    d.logical_count = n;
    d.name = absl::StrCat(Prefix(task_index), "CPU:", i);
    plan.devices.push_back(d);
  }
  return plan;
}

absl::StatusOr<DevicePlan> PlanDevices(const DeviceOptions& o,
                                       const std::vector<gpu::GpuInfo>& gpus,
                                       absl::string_view why_no_gpu, int task_index) {
  PSC_RETURN_IF_ERROR(ValidateDeviceOptions(o));
  if (o.device == DeviceKind::kCpu) {
    DevicePlan plan = CpuOnlyPlan(task_index, o.virtual_devices);
    plan.cpu_reason = "--device=cpu";
    return plan;
  }
  // The visible GPUs, in the order asked.
  std::vector<gpu::GpuInfo> visible;
  if (!gpus.empty()) {
    if (o.visible_devices.empty()) {
      visible = gpus;
    } else {
      for (int ordinal : o.visible_devices) {
        auto it = std::find_if(gpus.begin(), gpus.end(),
                               [ordinal](const gpu::GpuInfo& g) { return g.ordinal == ordinal; });
        if (it == gpus.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--visible_devices=", absl::StrJoin(o.visible_devices, ","), ": GPU ",
                           ordinal, " does not exist (this machine's GPUs: ", Ordinals(gpus), ")"));
        }
        visible.push_back(*it);
      }
    }
  }
  if (visible.empty()) {
    const std::string reason =
        absl::StrCat("no usable GPU: ", why_no_gpu.empty() ? "none found" : why_no_gpu);
    if (o.device == DeviceKind::kGpu && !o.soft_device_placement) {
      return absl::FailedPreconditionError(
          absl::StrCat("--device=gpu but ", reason,
                       ". Pass --soft_device_placement to fall back to the CPU, or --device=cpu"));
    }
    DevicePlan plan = CpuOnlyPlan(task_index, o.virtual_devices);
    plan.cpu_reason = reason;
    if (o.device == DeviceKind::kGpu) {
      plan.warnings.push_back(absl::StrCat("--device=gpu but ", reason,
                                           ": training on the CPU (--soft_device_placement)"));
    }
    return plan;
  }
  DevicePlan plan;
  const int n = o.virtual_devices;
  const int64_t limit = o.memory_limit_mb * kMiB;
  int next = 0;
  for (const gpu::GpuInfo& g : visible) {
    if (limit > 0 && g.total_memory > 0 && limit * n > g.total_memory) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--virtual_devices=%d --memory_limit_mb=%d: %d logical devices of %d MiB need more than "
          "GPU %d's %d MiB",
          n, o.memory_limit_mb, n, o.memory_limit_mb, g.ordinal, g.total_memory / kMiB));
    }
    for (int i = 0; i < n; ++i) {
      LogicalDevice d;
      d.kind = LogicalDevice::kGpu;
      d.gpu = g.ordinal;
      d.logical_index = i;
      d.logical_count = n;
      d.memory_limit_bytes = limit;
      d.name = absl::StrCat(Prefix(task_index), "GPU:", next++);
      plan.devices.push_back(d);
    }
  }
  return plan;
}

std::string FormatDevicePlan(const DevicePlan& plan, const std::vector<gpu::GpuInfo>& gpus,
                             absl::string_view why_no_gpu) {
  std::string out = "Physical devices:\n";
  absl::StrAppendFormat(&out, "  %-45s %s\n", "/physical_device:CPU:0", "host CPU (oneDNN)");
  for (const gpu::GpuInfo& g : gpus) {
    absl::StrAppendFormat(&out, "  %-45s %s, %.0f MiB free\n",
                          absl::StrCat("/physical_device:GPU:", g.ordinal), g.Description(),
                          static_cast<double>(g.free_memory) / kMiB);
  }
  if (gpus.empty()) absl::StrAppend(&out, "  (no GPU: ", why_no_gpu, ")\n");
  absl::StrAppend(&out, "Logical devices:\n");
  if (plan.on_gpu()) {  // the CPU is a logical device too, though no replica's
    const std::string& first = plan.devices[0].name;
    absl::StrAppendFormat(&out, "  %-45s %s\n",
                          absl::StrCat(first.substr(0, first.rfind("GPU:")), "CPU:0"),
                          "host CPU (input pipeline, optimizer)");
  }
  for (size_t r = 0; r < plan.devices.size(); ++r) {
    const LogicalDevice& d = plan.devices[r];
    std::string what = absl::StrCat("replica ", r, ": ");
    absl::StrAppend(&what, d.kind == LogicalDevice::kCpu ? std::string("host CPU")
                                                         : absl::StrCat("physical GPU ", d.gpu));
    if (d.logical_count > 1) {
      absl::StrAppend(&what, ", logical device ", d.logical_index, " of ", d.logical_count);
    }
    if (d.memory_limit_bytes > 0) {
      absl::StrAppend(&what, ", memory limit ", d.memory_limit_bytes / kMiB, " MiB");
    }
    absl::StrAppendFormat(&out, "  %-45s %s\n", d.name, what);
  }
  if (!plan.cpu_reason.empty()) absl::StrAppend(&out, "  (CPU: ", plan.cpu_reason, ")\n");
  for (const std::string& w : plan.warnings) absl::StrAppend(&out, "  warning: ", w, "\n");
  return out;
}

}  // namespace worker
}  // namespace psc
