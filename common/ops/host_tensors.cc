#include "common/ops/host_tensors.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/compute/reference/reference_ops.h"

namespace psc {
namespace ops {

HostTensor RandomTensor(std::mt19937* rng, const Shape& shape, double lo, double hi) {
  return {shape, compute::reference::RandomUniform(
                     rng, static_cast<size_t>(compute::ShapeSize(shape)), lo, hi)};
}

HostTensor DistinctTensor(std::mt19937* rng, const Shape& shape) {
  return {shape, compute::reference::RandomDistinct(
                     rng, static_cast<size_t>(compute::ShapeSize(shape)), -1, 1)};
}

HostTensor RoundedToFloat(HostTensor t) {
  for (double& v : t.values) v = static_cast<float>(v);
  return t;
}

absl::Status Refuse(const char* op, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
}

absl::Status WantImage(const char* op, const char* what, const Shape& s) {
  if (s.size() == 4) return absl::OkStatus();
  return Refuse(op, absl::StrCat(what, " has shape ", compute::ShapeText(s), ", want [N,H,W,C]"));
}

compute::reference::Window2D RefWindow(const compute::Window& w) {
  return {static_cast<int>(w.height),           static_cast<int>(w.width),
          static_cast<int>(w.stride_h),         static_cast<int>(w.stride_w),
          w.padding == compute::Padding::kSame, static_cast<int>(w.dilation_h),
          static_cast<int>(w.dilation_w),       static_cast<int>(w.groups)};
}

}  // namespace ops
}  // namespace psc
