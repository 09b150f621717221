#include "worker/device_options.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace psc {
namespace worker {

absl::StatusOr<DeviceKind> ParseDeviceKind(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (t == "auto") return DeviceKind::kAuto;
  if (t == "gpu") return DeviceKind::kGpu;
  if (t == "cpu") return DeviceKind::kCpu;
  return absl::InvalidArgumentError(absl::StrCat("--device=", text, ": expected auto, gpu or cpu"));
}

const char* DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kAuto:
      return "auto";
    case DeviceKind::kGpu:
      return "gpu";
    case DeviceKind::kCpu:
      return "cpu";
  }
  return "?";
}

absl::StatusOr<std::vector<int>> ParseVisibleDevices(absl::string_view text) {
  std::vector<int> out;
  if (absl::StripAsciiWhitespace(text).empty()) return out;
  std::set<int> seen;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int ordinal = -1;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &ordinal) || ordinal < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--visible_devices=", text, ": \"", part,
                                                     "\" is not a GPU index (0, 1, ...)"));
    }
    if (!seen.insert(ordinal).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--visible_devices=", text, ": GPU ", ordinal, " is listed twice"));
    }
    out.push_back(ordinal);
  }
  return out;
}

absl::Status ValidateDeviceOptions(const DeviceOptions& o) {
  if (o.virtual_devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--virtual_devices=", o.virtual_devices, ": must be at least 1"));
  }
  if (o.memory_limit_mb < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--memory_limit_mb=", o.memory_limit_mb, ": must not be negative"));
  }
  if (o.memory_growth && o.virtual_devices > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory_growth conflicts with --virtual_devices=", o.virtual_devices,
        ": virtual devices split a GPU by fixed memory limits, which memory growth does not "
        "keep (as in TensorFlow); drop one of them"));
  }
  if (o.virtual_devices > 1 && o.memory_limit_mb == 0 && o.device != DeviceKind::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--virtual_devices=", o.virtual_devices,
        " needs --memory_limit_mb: each logical GPU gets that much memory (or pass --device=cpu "
        "to split the CPU)"));
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace psc
