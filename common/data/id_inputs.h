// The ids of a model input an Embedding takes, from an .npz array: whole
// numbers of an integer type (bool to int64), each in [0, limit), where
// limit is the smallest input_dim of the tables that read them. They reach
// the model as float32 (exact below 2^24, the most rows a table has:
// compute/embedding_ops.h), packed with the other inputs
// (packed_inputs.h). Pure; thread-safe.
#ifndef PSC_COMMON_DATA_ID_INPUTS_H_
#define PSC_COMMON_DATA_ID_INPUTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/data/numpy_file.h"

namespace psc::data {

// OK when `x` holds examples of `example` shape whose every element is an
// id below `limit`. INVALID_ARGUMENT naming `what` (the array) otherwise:
// another shape; a float array ("... holds float32; the Embedding \"user\"
// takes integer ids: save them as int32 or int64"); an id out of range,
// naming the row of the user's array, the element of the example, the id
// and the table: "data.npz: x_train/user row 17, element (3,): id 610 is
// not a row of the Embedding \"user\" (input_dim 610)". One streaming pass.
absl::Status CheckIds(const NumpyArray& x, const std::vector<int64_t>& example, int64_t limit,
                      const std::string& table, absl::string_view what);

// Writes examples [first, first + n) of `x` (checked by CheckIds) as
// float32 into out[0, n * ExampleElements(x)). The caller checks the range.
void ReadIds(const NumpyArray& x, int64_t first, int64_t n, float* out);

}  // namespace psc::data

#endif  // PSC_COMMON_DATA_ID_INPUTS_H_
