// The element types a tensor may travel in between workers and servers:
// float32, or, to halve the bytes on the wire, bfloat16 or float16 (the
// job's --wire_dtype). Servers and optimizers always keep float32; only the
// copies on the wire are rounded (to nearest, ties to even). Pure
// functions; thread-safe.
#ifndef PSC_COMMON_TENSOR_WIRE_DTYPE_H_
#define PSC_COMMON_TENSOR_WIRE_DTYPE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/base/float_formats.h"
#include "proto/common.pb.h"

namespace psc {
namespace tensor {

// DT_INVALID (a field left unset) means float32 on the wire.
inline proto::DataType WireDtypeOrFloat32(proto::DataType dtype) {
  return dtype == proto::DT_INVALID ? proto::DT_FLOAT32 : dtype;
}

// "float32", "bfloat16", "float16"; anything else "DataType <n>".
std::string WireDtypeName(proto::DataType dtype);

// The flag's spelling ("float32", "bfloat16", "float16"); INVALID_ARGUMENT
// otherwise.
absl::StatusOr<proto::DataType> ParseWireDtype(absl::string_view name);

// Bytes per element of a wire dtype: 4, 2, 2. INVALID_ARGUMENT for any
// other dtype.
absl::StatusOr<int64_t> WireElementBytes(proto::DataType dtype);

// One value each way (common/base/float_formats.h): a finite float beyond
// float16's range becomes infinity (EncodeFloats refuses it instead).
using ::psc::Bfloat16ToFloat;
using ::psc::Float16ToFloat;
using ::psc::FloatToBfloat16;
using ::psc::FloatToFloat16;

// `values` as `dtype` into `out` (replaced). OUT_OF_RANGE for float16 when a
// finite value is beyond its range (|x| >= 65520 rounds to infinity),
// naming the element: training would otherwise see an infinity that was
// never computed. INVALID_ARGUMENT for a dtype that is not a wire dtype.
absl::Status EncodeFloats(absl::Span<const float> values, proto::DataType dtype, std::string* out);

// `bytes` holding out.size() elements of `dtype` as floats into `out`.
// INVALID_ARGUMENT for a byte count that does not match or a dtype that is
// not a wire dtype.
absl::Status DecodeFloats(absl::string_view bytes, proto::DataType dtype, absl::Span<float> out);

// A tensor of `shape` whose values travel as `dtype`: dtype, shape and the
// encoded bytes. EncodeFloats's errors.
absl::Status SetWireTensor(absl::Span<const int64_t> shape, absl::Span<const float> values,
                           proto::DataType dtype, proto::Tensor* out);

}  // namespace tensor
}  // namespace psc

#endif  // PSC_COMMON_TENSOR_WIRE_DTYPE_H_
