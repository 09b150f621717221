#include "common/tensor/wire_dtype.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psc {
namespace tensor {

std::string WireDtypeName(proto::DataType dtype) {
  switch (dtype) {
    case proto::DT_FLOAT32:
      return "float32";
    case proto::DT_BFLOAT16:
      return "bfloat16";
    case proto::DT_FLOAT16:
      return "float16";
    default:
      return absl::StrCat("DataType ", static_cast<int>(dtype));
  }
}

absl::StatusOr<proto::DataType> ParseWireDtype(absl::string_view name) {
  if (name == "float32") return proto::DT_FLOAT32;
  if (name == "bfloat16") return proto::DT_BFLOAT16;
  if (name == "float16") return proto::DT_FLOAT16;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", name, "\": expected float32, bfloat16 or float16"));
}

absl::StatusOr<int64_t> WireElementBytes(proto::DataType dtype) {
  switch (dtype) {
    case proto::DT_FLOAT32:
      return 4;
    case proto::DT_BFLOAT16:
    case proto::DT_FLOAT16:
      return 2;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(WireDtypeName(dtype), " is not a wire dtype (float32, bfloat16, float16)"));
  }
}

absl::Status EncodeFloats(absl::Span<const float> values, proto::DataType dtype, std::string* out) {
  absl::StatusOr<int64_t> size = WireElementBytes(dtype);
  if (!size.ok()) return size.status();
  out->resize(values.size() * static_cast<size_t>(*size));
  if (dtype == proto::DT_FLOAT32) {
    if (!values.empty()) std::memcpy(out->data(), values.data(), out->size());
    return absl::OkStatus();
  }
  char* dst = out->data();
  if (dtype == proto::DT_BFLOAT16) {
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = FloatToBfloat16(values[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
    return absl::OkStatus();
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = FloatToFloat16(values[i]);
    if ((h & 0x7fffu) == 0x7c00u && std::isfinite(values[i])) {
      return absl::OutOfRangeError(absl::StrCat(
          "element ", i, " is ", values[i],
          ", beyond float16's range (|x| <= 65504); --wire_dtype=bfloat16 has float32's range"));
    }
    std::memcpy(dst + 2 * i, &h, 2);
  }
  return absl::OkStatus();
}

absl::Status DecodeFloats(absl::string_view bytes, proto::DataType dtype, absl::Span<float> out) {
  absl::StatusOr<int64_t> size = WireElementBytes(dtype);
  if (!size.ok()) return size.status();
  if (bytes.size() != out.size() * static_cast<size_t>(*size)) {
    return absl::InvalidArgumentError(absl::StrCat(bytes.size(), " bytes of ", WireDtypeName(dtype),
                                                   " for ", out.size(), " elements, want ",
                                                   out.size() * *size));
  }
  if (dtype == proto::DT_FLOAT32) {
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  const bool bf16 = dtype == proto::DT_BFLOAT16;
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    out[i] = bf16 ? Bfloat16ToFloat(h) : Float16ToFloat(h);
  }
  return absl::OkStatus();
}

absl::Status SetWireTensor(absl::Span<const int64_t> shape, absl::Span<const float> values,
                           proto::DataType dtype, proto::Tensor* out) {
  std::string bytes;
  if (absl::Status s = EncodeFloats(values, dtype, &bytes); !s.ok()) return s;
  out->set_dtype(dtype);
  out->mutable_shape()->Assign(shape.begin(), shape.end());
  out->set_data(std::move(bytes));
  return absl::OkStatus();
}

}  // namespace tensor
}  // namespace psc
