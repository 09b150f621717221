#include "common/tensor/row_sparse.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/tensor/tensor.h"
#include "common/tensor/wire_dtype.h"

namespace psc {
namespace tensor {

int64_t RowWidth(absl::Span<const int64_t> shape) {
  if (shape.empty()) return -1;
  int64_t width = 1;
  for (size_t i = 1; i < shape.size(); ++i) {
    if (shape[i] < 1 || width > INT64_MAX / shape[i]) return -1;
    width *= shape[i];
  }
  return shape[0] < 1 ? -1 : width;
}

std::string EncodeRowIds(absl::Span<const int64_t> ids) {
  std::string out(ids.size() * sizeof(int64_t), '\0');
  if (!ids.empty()) std::memcpy(out.data(), ids.data(), out.size());
  return out;
}

absl::StatusOr<std::vector<int64_t>> DecodeRowIds(absl::string_view bytes, int64_t rows,
                                                  absl::string_view what) {
  if (bytes.size() % sizeof(int64_t) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", bytes.size(), " bytes of row ids is not a whole number of int64s"));
  }
  std::vector<int64_t> ids(bytes.size() / sizeof(int64_t));
  if (!ids.empty()) std::memcpy(ids.data(), bytes.data(), bytes.size());
  int64_t previous = -1;
  for (size_t j = 0; j < ids.size(); ++j) {
    if (ids[j] < 0 || ids[j] >= rows) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": row ", ids[j], " at position ", j,
                                                     " is out of range (", rows, " rows)"));
    }
    if (ids[j] <= previous) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": row ", ids[j], " at position ", j,
                                                     " is not above the one before it"));
    }
    previous = ids[j];
  }
  return ids;
}

absl::Status SetRowSparseTensor(absl::Span<const int64_t> shape, absl::Span<const int64_t> ids,
                                absl::Span<const float> values, proto::DataType dtype,
                                proto::Tensor* out) {
  const int64_t width = RowWidth(shape);
  if (width < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a row-sparse tensor of shape ", ShapeString(shape), " has no rows"));
  }
  const std::string bytes = EncodeRowIds(ids);
  PSC_RETURN_IF_ERROR(DecodeRowIds(bytes, shape[0], "row-sparse tensor").status());
  if (static_cast<int64_t>(values.size()) != static_cast<int64_t>(ids.size()) * width) {
    return absl::InvalidArgumentError(absl::StrCat("a row-sparse tensor of ", ids.size(),
                                                   " rows of ", width, " values gets ",
                                                   values.size(), " values"));
  }
  out->Clear();
  out->set_dtype(dtype);
  for (int64_t d : shape) out->add_shape(d);
  out->set_row_sparse(true);
  out->set_row_ids(bytes);
  return EncodeFloats(values, dtype, out->mutable_data());
}

absl::StatusOr<RowSparse> DecodeRowSparse(const proto::Tensor& t, proto::DataType dtype,
                                          absl::Span<const int64_t> shape, absl::string_view what) {
  if (!t.row_sparse()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     " arrives dense; its variable is declared row-sparse (the worker runs another "
                     "job's settings: a job fingerprint mismatch)"));
  }
  if (!t.indices().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " carries both rows and indices"));
  }
  const std::vector<int64_t> got(t.shape().begin(), t.shape().end());
  if (got != std::vector<int64_t>(shape.begin(), shape.end())) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has shape ", ShapeString(got),
                                                   "; the variable has ", ShapeString(shape)));
  }
  const int64_t width = RowWidth(shape);
  if (width < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": a tensor without rows"));
  RowSparse rows;
  PSC_ASSIGN_OR_RETURN(rows.ids, DecodeRowIds(t.row_ids(), shape[0], what));
  // Fits: at most shape[0] rows of the variable's width.
  rows.values.resize(rows.ids.size() * static_cast<size_t>(width));
  if (absl::Status s = DecodeFloats(t.data(), dtype, absl::MakeSpan(rows.values)); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " (", rows.ids.size(), " rows of ", width, "): ", s.message()));
  }
  return rows;
}

}  // namespace tensor
}  // namespace psc
