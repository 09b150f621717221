#include "common/compute/layer_norm_ops.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace layer_norm {

absl::Status CheckLayerNorm(const char* op, const DeviceTensor& x, const DeviceTensor* scale,
                            const DeviceTensor* shift, const DeviceTensor& mean,
                            const DeviceTensor& rstd, int64_t* rows, int64_t* cols) {
  PSC_RETURN_IF_ERROR(WantFloat(op, "x", x));
  PSC_RETURN_IF_ERROR(WantFloat(op, "mean", mean));
  PSC_RETURN_IF_ERROR(WantShape(op, "rstd", rstd, mean.shape()));
  *rows = mean.size();
  if (*rows < 1 || x.size() % *rows != 0 || x.size() / *rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": x ", ShapeText(x.shape()),
                                                   " is not rows of the statistics' ",
                                                   ShapeText(mean.shape())));
  }
  *cols = x.size() / *rows;
  for (const auto& [t, what] : {std::pair{scale, "gamma"}, std::pair{shift, "beta"}}) {
    if (t == nullptr) continue;
    PSC_RETURN_IF_ERROR(WantFloat(op, what, *t));
    if (t->size() != *cols) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " has shape ",
                                                     ShapeText(t->shape()), ", want ", *cols,
                                                     " values, one per column of x"));
    }
  }
  return absl::OkStatus();
}

}  // namespace layer_norm
}  // namespace compute
}  // namespace psc
