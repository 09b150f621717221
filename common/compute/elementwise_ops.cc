#include "common/compute/elementwise_ops.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace elementwise {

absl::Status CheckCast(const DeviceTensor& x, const DeviceTensor& y) {
  PSC_RETURN_IF_ERROR(WantFloat(kCast, "x", x));
  PSC_RETURN_IF_ERROR(WantFloat(kCast, "y", y));
  if (x.size() != y.size() || &x == &y) {
    return absl::InvalidArgumentError(absl::StrCat(kCast, ": x ", ShapeText(x.shape()), " into y ",
                                                   ShapeText(y.shape()),
                                                   ": want as many elements, in another tensor"));
  }
  return absl::OkStatus();
}

absl::Status CheckTranspose(const DeviceTensor& x, const std::vector<int>& perm,
                            const DeviceTensor& y, TransposePlan* plan) {
  PSC_RETURN_IF_ERROR(WantFloat(kTranspose, "x", x));
  PSC_RETURN_IF_ERROR(WantFloat(kTranspose, "y", y));
  const Shape& s = x.shape();
  const int rank = static_cast<int>(s.size());
  bool fits = rank >= 1 && rank <= kMaxTransposeRank && perm.size() == s.size();
  std::vector<bool> seen(s.size(), false);
  for (size_t i = 0; fits && i < perm.size(); ++i) {
    fits = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if (fits) seen[perm[i]] = true;
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        kTranspose, ": (", absl::StrJoin(perm, ", "), ") is not a permutation of the axes of ",
        ShapeText(s), " (rank 1 to ", kMaxTransposeRank, ")"));
  }
  if (&x == &y) {
    return absl::InvalidArgumentError(absl::StrCat(kTranspose, ": y may not be x"));
  }
  Shape want(s.size());
  for (int i = 0; i < rank; ++i) want[i] = s[perm[i]];
  PSC_RETURN_IF_ERROR(WantShape(kTranspose, "y", y, want));
  int64_t stride[kMaxTransposeRank];
  int64_t run = 1;
  for (int d = rank - 1; d >= 0; --d) {
    stride[d] = run;
    run *= s[d];  // x.size() fits: no overflow
  }
  plan->rank = rank;
  plan->total = x.size();
  for (int i = 0; i < rank; ++i) {
    plan->out_dims[i] = want[i];
    plan->from_stride[i] = stride[perm[i]];
  }
  return absl::OkStatus();
}

}  // namespace elementwise
}  // namespace compute
}  // namespace psc
