#include "common/compute/embedding_ops.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace embedding {

absl::Status CheckEmbedding(const char* op, const DeviceTensor& ids, const DeviceTensor& table,
                            const DeviceTensor& rows, int64_t* n, int64_t* v, int64_t* d) {
  PSC_RETURN_IF_ERROR(WantFloat(op, "ids", ids));
  PSC_RETURN_IF_ERROR(WantFloat(op, "table", table));
  PSC_RETURN_IF_ERROR(WantRank(op, "table", table, 2));
  *v = table.shape()[0];
  *d = table.shape()[1];
  if (*v < 1 || *v > kMaxRows || *d < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": table has shape ", ShapeText(table.shape()),
                     ", want [V,D] with V in [1, ", kMaxRows, "] and D >= 1"));
  }
  *n = ids.size();
  // The ids' shape and one more axis of D, or the same rows held with
  // other axes of one (the executor holds an (L, D) example as [N,1,L,D]).
  Shape want = ids.shape();
  want.push_back(*d);
  const bool same_rows = !rows.shape().empty() && !ids.shape().empty() &&
                         rows.shape()[0] == ids.shape()[0] && rows.shape().back() == *d &&
                         rows.size() / *d == *n && rows.size() % *d == 0;
  if (same_rows && rows.dtype() == DType::kFloat32) return absl::OkStatus();
  return WantShape(op, "rows", rows, want);
}

absl::Status CheckEmbeddingGradient(const DeviceTensor& ids, const DeviceTensor& table,
                                    const DeviceTensor& dy, const DeviceTensor& dtable, int64_t* n,
                                    int64_t* v, int64_t* d) {
  constexpr const char* kOp = kEmbeddingGradient;
  PSC_RETURN_IF_ERROR(CheckEmbedding(kOp, ids, table, dy, n, v, d));
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dy", dy));
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dtable", dtable));
  return WantShape(kOp, "dtable", dtable, table.shape());
}

absl::Status BadId(const char* op, int64_t at, float value, int64_t rows) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": id ", value, " at position ", at,
                                                 " is not a row of a table of ", rows, " rows"));
}

bool Accepts(const OpSpec& s) { return s.kernel.size() == 2 && !s.input.empty(); }

}  // namespace embedding
}  // namespace compute
}  // namespace psc
