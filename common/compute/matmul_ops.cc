#include "common/compute/matmul_ops.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace matmul {
namespace {

// batch x rows x cols, or -1 when it overflows int64.
int64_t Count(int64_t batch, int64_t rows, int64_t cols) {
  constexpr int64_t kMax = INT64_MAX;
  if (batch < 1 || rows < 1 || cols < 1 || rows > kMax / cols || batch > kMax / (rows * cols)) {
    return -1;
  }
  return batch * rows * cols;
}

// t of `examples` first, holding batch matrices of rows x cols.
absl::Status WantCount(const char* op, const char* what, const DeviceTensor& t, int64_t examples,
                       int64_t batch, int64_t rows, int64_t cols) {
  PSC_RETURN_IF_ERROR(WantFloat(op, what, t));
  if (t.shape().empty() || t.shape()[0] != examples || t.size() != Count(batch, rows, cols)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", what, " has shape ", ShapeText(t.shape()), ", want ", examples, " examples of ",
        batch / std::max<int64_t>(examples, 1), " matrices of ", rows, "x", cols, " values"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckBatchMatMul(const char* op, const DeviceTensor& a, const DeviceTensor& b,
                              const OpAttrs::MatMul& mm, const DeviceTensor& y, int64_t* batch) {
  if (mm.m < 1 || mm.k < 1 || mm.n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": M, K and N must be >= 1, got ", mm.m, ", ", mm.k, ", ", mm.n));
  }
  if (a.shape().empty() || a.shape()[0] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": a has shape ", ShapeText(a.shape()), ", want a batch"));
  }
  // The matrices a holds: a whole number per example.
  const int64_t examples = a.shape()[0];
  const int64_t per = Count(1, mm.m, mm.k);
  *batch = per > 0 && a.size() % per == 0 ? a.size() / per : 0;
  if (*batch < examples || *batch % examples != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": a has shape ", ShapeText(a.shape()),
                                                   ", not matrices of ", mm.m, "x", mm.k,
                                                   " per example"));
  }
  PSC_RETURN_IF_ERROR(WantCount(op, "a", a, examples, *batch, mm.m, mm.k));
  PSC_RETURN_IF_ERROR(WantCount(op, "b", b, examples, *batch, mm.k, mm.n));
  return WantCount(op, "y", y, examples, *batch, mm.m, mm.n);
}

absl::Status CheckL2Normalize(const char* op, const DeviceTensor& x, const OpAttrs& attrs,
                              const DeviceTensor& y, int64_t* batch) {
  const OpAttrs::MatMul& mm = attrs.matmul;
  if (mm.m < 1 || mm.k < 1 || !(attrs.epsilon > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": M and K must be >= 1 and epsilon > 0, got ", mm.m, ", ", mm.k, ", ", attrs.epsilon));
  }
  if (x.shape().empty() || x.shape()[0] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x has shape ", ShapeText(x.shape()), ", want a batch"));
  }
  *batch = x.shape()[0];
  PSC_RETURN_IF_ERROR(WantCount(op, "x", x, *batch, *batch, mm.m, mm.k));
  return WantShape(op, "y", y, x.shape());
}

}  // namespace matmul
}  // namespace compute
}  // namespace psc
