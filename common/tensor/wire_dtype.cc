#include "common/tensor/wire_dtype.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psc {
namespace tensor {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

// x >> shift rounded to nearest, ties to even; 1 <= shift <= 31.
uint32_t ShiftRoundEven(uint32_t x, int shift) {
  const uint32_t q = x >> shift;
  const uint32_t rest = x & ((uint32_t{1} << shift) - 1);
  const uint32_t half = uint32_t{1} << (shift - 1);
  return q + ((rest > half || (rest == half && (q & 1))) ? 1 : 0);
}

}  // namespace

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

uint16_t FloatToBfloat16(float value) {
  const uint32_t b = Bits(value);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40);  // NaN
  // Adding 0x7fff (+1 when the kept part is odd) carries exactly when the
  // dropped half is above (or at, for odd) one half: round to nearest even.
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

float Bfloat16ToFloat(uint16_t bits) { return FromBits(uint32_t{bits} << 16); }

uint16_t FloatToFloat16(float value) {
  const uint32_t b = Bits(value);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t x = b & 0x7fffffffu;
  if (x >= 0x7f800000u) {  // infinity, NaN (kept quiet)
    return static_cast<uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u));
  }
  const int e = static_cast<int>(x >> 23);                     // float's biased exponent
  if (e >= 143) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65536
  if (e >= 113) {
    // Normal in float16: exponent e - 112, 10 mantissa bits. A carry out
    // of the mantissa raises the exponent, up to infinity (0x7c00).
    const uint32_t h = ((static_cast<uint32_t>(e) - 112) << 23) | (x & 0x7fffffu);
    return static_cast<uint16_t>(sign | ShiftRoundEven(h, 13));
  }
  // Below 2^-14: a multiple of 2^-24 (subnormal), or zero.
  const int shift = 126 - e;  // value * 2^24 == mantissa_with_one >> shift
  if (shift > 25) return sign;
  const uint32_t m = (x & 0x7fffffu) | (e > 0 ? 0x800000u : 0u);
  return static_cast<uint16_t>(sign | ShiftRoundEven(m, shift));
}

float Float16ToFloat(uint16_t bits) {
  const uint32_t sign = uint32_t{bits & 0x8000u} << 16;
  const uint32_t e = (bits >> 10) & 0x1fu;
  const uint32_t m = bits & 0x3ffu;
  if (e == 0) {
    const float magnitude = std::ldexp(static_cast<float>(m), -24);  // exact
    return sign != 0 ? -magnitude : magnitude;
  }
  if (e == 31) return FromBits(sign | 0x7f800000u | (m << 13));
  return FromBits(sign | ((e + 112) << 23) | (m << 13));
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
