#include "chief/table_rows.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/tensor/row_sparse.h"
#include "common/tensor/wire_dtype.h"

namespace psc {
namespace chief {

absl::Status ReadTableRows(ps_client::ParameterClient* servers,
                           const proto::VariablePlacement& placement, int slot, int64_t first,
                           int64_t count, absl::Duration timeout, float* out) {
  std::vector<int64_t> shape(placement.shape().begin(), placement.shape().end());
  if (shape.empty() || first < 0 || count < 0 || first > shape[0] - count) {
    return absl::InvalidArgumentError(absl::StrCat("rows [", first, ", ", first + count, ") of \"",
                                                   placement.name(), "\": outside the variable"));
  }
  const int64_t width = std::max<int64_t>(0, tensor::RowWidth(shape));
  int64_t covered = 0;
  for (const proto::VariablePlacement::Part& part : placement.parts()) {
    const int64_t begin = std::max(first, part.first_axis_offset());
    const int64_t end = std::min(first + count, part.first_axis_offset() + part.first_axis_size());
    if (begin >= end) continue;
    std::vector<int64_t> ids(static_cast<size_t>(end - begin));
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = begin - part.first_axis_offset() + static_cast<int64_t>(i);
    }
    proto::PullRequest request;
    proto::RowSelection* rows = request.add_rows();
    rows->set_variable(part.shard_variable());
    rows->set_row_ids(tensor::EncodeRowIds(ids));
    rows->set_slot(slot);
    proto::PullResponse response;
    PSC_RETURN_IF_ERROR(servers->Pull(part.shard(), request, &response, timeout));
    if (response.variables_size() != 1 || response.variables(0).name() != part.shard_variable()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ps:", part.shard(), " did not send the rows of \"", part.shard_variable(), "\""));
    }
    std::vector<int64_t> part_shape = shape;
    part_shape[0] = part.first_axis_size();
    const proto::Tensor& t = response.variables(0).tensor();
    PSC_ASSIGN_OR_RETURN(
        tensor::RowSparse got,
        tensor::DecodeRowSparse(t, tensor::WireDtypeOrFloat32(t.dtype()), part_shape,
                                absl::StrCat("rows of \"", part.shard_variable(), "\"")));
    if (got.ids != ids) {
      return absl::InvalidArgumentError(absl::StrCat("ps:", part.shard(), " sent rows of \"",
                                                     part.shard_variable(), "\" not asked"));
    }
    std::memcpy(out + (begin - first) * width, got.values.data(),
                got.values.size() * sizeof(float));
    covered += end - begin;
  }
  if (covered != count) {
    return absl::InvalidArgumentError(absl::StrCat("rows [", first, ", ", first + count, ") of \"",
                                                   placement.name(), "\": its parts hold ",
                                                   covered));
  }
  return absl::OkStatus();
}

}  // namespace chief
}  // namespace psc
