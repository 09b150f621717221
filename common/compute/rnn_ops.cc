#include "common/compute/rnn_ops.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace rnn {

absl::Status CheckLstm(const char* op, const DeviceTensor& z,
                       std::initializer_list<std::pair<const char*, const DeviceTensor*>> state,
                       int64_t* rows, int64_t* units) {
  PSC_RETURN_IF_ERROR(WantRank(op, "z", z, 2));
  *rows = z.shape()[0];
  *units = z.shape()[1] / 4;
  if (*rows < 1 || *units < 1 || z.shape()[1] % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": z has shape ", ShapeText(z.shape()),
                                                   ", want [n, 4U] (the gates i, f, c, o)"));
  }
  for (const auto& [what, t] : state) {
    if (t != nullptr) PSC_RETURN_IF_ERROR(WantShape(op, what, *t, {*rows, *units}));
  }
  return absl::OkStatus();
}

absl::Status CheckGru(const char* op, const DeviceTensor& xz,
                      std::initializer_list<std::pair<const char*, const DeviceTensor*>> gates,
                      std::initializer_list<std::pair<const char*, const DeviceTensor*>> state,
                      int64_t* rows, int64_t* units) {
  PSC_RETURN_IF_ERROR(WantRank(op, "xz", xz, 2));
  *rows = xz.shape()[0];
  *units = xz.shape()[1] / 3;
  if (*rows < 1 || *units < 1 || xz.shape()[1] % 3 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": xz has shape ", ShapeText(xz.shape()),
                                                   ", want [n, 3U] (the gates z, r, h)"));
  }
  for (const auto& [what, t] : gates) {
    if (t != nullptr) PSC_RETURN_IF_ERROR(WantShape(op, what, *t, xz.shape()));
  }
  for (const auto& [what, t] : state) {
    if (t != nullptr) PSC_RETURN_IF_ERROR(WantShape(op, what, *t, {*rows, *units}));
  }
  return absl::OkStatus();
}

}  // namespace rnn
}  // namespace compute
}  // namespace psc
