#include "common/compute/mask_ops.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace mask {

absl::Status CheckSequenceMask(const DeviceTensor& x, int64_t cols, const DeviceTensor& m,
                               int64_t* rows) {
  PSC_RETURN_IF_ERROR(WantFloat(kSequenceMask, "x", x));
  PSC_RETURN_IF_ERROR(WantFloat(kSequenceMask, "m", m));
  if (cols < 1 || x.size() % cols != 0 || m.size() != x.size() / cols) {
    return absl::InvalidArgumentError(absl::StrCat(kSequenceMask, ": x ", ShapeText(x.shape()),
                                                   " in rows of ", cols, " and m ",
                                                   ShapeText(m.shape()), ": want a value per row"));
  }
  *rows = m.size();
  return absl::OkStatus();
}

absl::Status CheckSelectRows(const DeviceTensor* a, const DeviceTensor* b, const DeviceTensor& m,
                             const DeviceTensor& y, int64_t* cols) {
  PSC_RETURN_IF_ERROR(WantFloat(kSelectRows, "y", y));
  PSC_RETURN_IF_ERROR(WantFloat(kSelectRows, "m", m));
  if (a == nullptr && b == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(kSelectRows, ": neither a nor b"));
  }
  if (a != nullptr) PSC_RETURN_IF_ERROR(WantShape(kSelectRows, "a", *a, y.shape()));
  if (b != nullptr) PSC_RETURN_IF_ERROR(WantShape(kSelectRows, "b", *b, y.shape()));
  if (m.size() < 1 || y.size() % m.size() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(kSelectRows, ": y ", ShapeText(y.shape()),
                                                   " is not rows of the mask's ",
                                                   ShapeText(m.shape())));
  }
  *cols = y.size() / m.size();
  return absl::OkStatus();
}

absl::Status CheckMaskedMean(const char* op, const DeviceTensor& x, const DeviceTensor& m,
                             const DeviceTensor& y, int64_t* n, int64_t* steps, int64_t* cols) {
  PSC_RETURN_IF_ERROR(WantFloat(op, "x", x));
  PSC_RETURN_IF_ERROR(WantRank(op, "m", m, 2));
  PSC_RETURN_IF_ERROR(WantRank(op, "y", y, 2));
  *n = m.shape()[0];
  *steps = m.shape()[1];
  *cols = y.shape()[1];
  if (y.shape()[0] != *n || *cols < 1 || *steps < 1 || x.size() != m.size() * *cols) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x ", ShapeText(x.shape()), ", mask ", ShapeText(m.shape()), " and ",
                     ShapeText(y.shape()), ": want N x steps x C values, [N, steps] and [N, C]"));
  }
  return absl::OkStatus();
}

}  // namespace mask
}  // namespace compute
}  // namespace psc
