// Row-sparse tensors (proto::Tensor.row_sparse, row_ids): the rows of a
// [R, ...] tensor that a step touched, each row whole. An embedding table's
// gradient travels so (GRADIENT_ROW_SPARSE), and the rows a pull asks for
// (PullRequest.rows) come back so. Row ids are int64 little-endian, strictly
// increasing, below R. Pure; thread-safe.
#ifndef PSC_COMMON_TENSOR_ROW_SPARSE_H_
#define PSC_COMMON_TENSOR_ROW_SPARSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/common.pb.h"

namespace psc {
namespace tensor {

// Some rows of a tensor: their ids, and ids.size() x width values.
struct RowSparse {
  std::vector<int64_t> ids;
  std::vector<float> values;
};

// The values per row of a tensor of `shape` (1 for a vector); -1 for a
// scalar or a dimension below 1.
int64_t RowWidth(absl::Span<const int64_t> shape);

// `ids` as row_ids bytes.
std::string EncodeRowIds(absl::Span<const int64_t> ids);
// Row ids of a tensor of `rows` rows: INVALID_ARGUMENT naming `what` for a
// byte count that is not whole int64s, or ids not strictly increasing or
// out of [0, rows).
absl::StatusOr<std::vector<int64_t>> DecodeRowIds(absl::string_view bytes, int64_t rows,
                                                  absl::string_view what);

// A row-sparse tensor of `shape` holding rows `ids` (checked as
// DecodeRowIds does) with `values` (ids.size() x RowWidth(shape)) as
// `dtype`: INVALID_ARGUMENT for bad ids or sizes; EncodeFloats's errors.
absl::Status SetRowSparseTensor(absl::Span<const int64_t> shape, absl::Span<const int64_t> ids,
                                absl::Span<const float> values, proto::DataType dtype,
                                proto::Tensor* out);

// The rows of row-sparse `t`, which must have `shape` and carry its values
// in `dtype`: INVALID_ARGUMENT naming `what` for a tensor that is not
// row-sparse, another shape, bad ids, or data that is not their rows.
absl::StatusOr<RowSparse> DecodeRowSparse(const proto::Tensor& t, proto::DataType dtype,
                                          absl::Span<const int64_t> shape, absl::string_view what);

}  // namespace tensor
}  // namespace psc

#endif  // PSC_COMMON_TENSOR_ROW_SPARSE_H_
