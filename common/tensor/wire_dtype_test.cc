#include "common/tensor/wire_dtype.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace psc {
namespace tensor {
namespace {

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

// The plain reference: the nearest of the two neighbouring representable
// values (in double, exactly), ties to the even bit pattern. `decode` maps
// a 16-bit pattern to its value; patterns of one sign are ordered by value.
template <typename Decode>
uint16_t NearestReference(float x, Decode decode, uint16_t max_finite, uint16_t inf) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  // The largest pattern whose value is <= a (binary search over 0..inf).
  uint32_t lo = 0, hi = inf;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (static_cast<double>(decode(static_cast<uint16_t>(mid))) <= a) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  if (lo >= max_finite) {
    // Beyond the largest finite value: IEEE rounds to infinity from half an
    // ulp past it (the next pattern's value, were the exponent unbounded).
    const double top = decode(max_finite);
    const double ulp = top - static_cast<double>(decode(static_cast<uint16_t>(max_finite - 1)));
    if (lo == inf || a > top + ulp / 2 || (a == top + ulp / 2 && (max_finite & 1))) {
      return static_cast<uint16_t>(sign | inf);
    }
    return static_cast<uint16_t>(sign | max_finite);
  }
  const double below = decode(static_cast<uint16_t>(lo));
  const double above = decode(static_cast<uint16_t>(lo + 1));
  uint32_t pick;
  if (a - below < above - a) {
    pick = lo;
  } else if (a - below > above - a) {
    pick = lo + 1;
  } else {
    pick = (lo & 1) ? lo + 1 : lo;
  }
  return static_cast<uint16_t>(sign | pick);
}

std::vector<float> Probes() {
  std::vector<float> v = {0.0f,     -0.0f,    1.0f,      -1.0f,        0.1f,      65504.0f,
                          65519.0f, 65520.0f, -65520.0f, 1e-8f,        6e-8f,     2.98e-8f,
                          5.96e-8f, 6.1e-5f,  3.0e38f,   1.17549e-38f, 1e-45f,    123.456f,
                          0.33333f, 2.5f,     -7.75e-3f, 1.00390625f,  1.0078125f};
  // Every exponent, with exact ties and their neighbours for both formats.
  for (uint32_t e = 0; e < 255; ++e) {
    for (uint32_t m : {0u, 1u, 0x1000u, 0x1001u, 0x0fffu, 0x3000u, 0x8000u, 0x18000u, 0x7fffffu,
                       0x7f8000u, 0x400000u}) {
      v.push_back(FromBits((e << 23) | m));
      v.push_back(FromBits(0x80000000u | (e << 23) | m));
    }
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0x7f7fffffu);
  for (int i = 0; i < 200000; ++i) v.push_back(FromBits(bits(rng) | (i & 1 ? 0x80000000u : 0)));
  return v;
}

TEST(WireDtypeTest, Bfloat16MatchesTheReferenceRounding) {
  for (float x : Probes()) {
    const uint16_t want = NearestReference(x, Bfloat16ToFloat, 0x7f7f, 0x7f80);
    ASSERT_EQ(FloatToBfloat16(x), want) << x;
  }
}

TEST(WireDtypeTest, Float16MatchesTheReferenceRounding) {
  for (float x : Probes()) {
    const uint16_t want = NearestReference(x, Float16ToFloat, 0x7bff, 0x7c00);
    ASSERT_EQ(FloatToFloat16(x), want) << x;
  }
}

TEST(WireDtypeTest, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const float half = Float16ToFloat(b), brain = Bfloat16ToFloat(b);
    if (std::isnan(half)) {
      EXPECT_TRUE(std::isnan(Float16ToFloat(FloatToFloat16(half))));
    } else {
      EXPECT_EQ(FloatToFloat16(half), b) << h;
    }
    if (std::isnan(brain)) {
      EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(brain))));
    } else {
      EXPECT_EQ(FloatToBfloat16(brain), b) << h;
    }
  }
  EXPECT_EQ(Float16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(Float16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(Float16ToFloat(0xfc00)));
  EXPECT_TRUE(std::isnan(Float16ToFloat(FloatToFloat16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(std::nanf("")))));
}

TEST(WireDtypeTest, EncodeAndDecodeEveryWireDtype) {
  const std::vector<float> values = {0.0f, 1.5f, -2.25f, 3.14159f, 1e-3f, -1e4f};
  for (proto::DataType dtype : {proto::DT_FLOAT32, proto::DT_BFLOAT16, proto::DT_FLOAT16}) {
    std::string bytes;
    ASSERT_TRUE(EncodeFloats(values, dtype, &bytes).ok());
    ASSERT_EQ(bytes.size(), values.size() * *WireElementBytes(dtype));
    std::vector<float> back(values.size());
    ASSERT_TRUE(DecodeFloats(bytes, dtype, absl::MakeSpan(back)).ok());
    for (size_t i = 0; i < values.size(); ++i) {
      const float want = dtype == proto::DT_FLOAT32    ? values[i]
                         : dtype == proto::DT_BFLOAT16 ? Bfloat16ToFloat(FloatToBfloat16(values[i]))
                                                       : Float16ToFloat(FloatToFloat16(values[i]));
      EXPECT_EQ(back[i], want) << WireDtypeName(dtype) << " " << i;
      // Relative error within half an ulp: 2^-9 (bfloat16), 2^-11 (float16).
      const double bound =
          dtype == proto::DT_FLOAT32 ? 0 : (dtype == proto::DT_BFLOAT16 ? 0x1p-9 : 0x1p-11);
      EXPECT_LE(std::fabs(back[i] - values[i]), bound * std::fabs(values[i])) << i;
    }
  }
}

TEST(WireDtypeTest, BadInputIsAnError) {
  std::string bytes;
  // float16 refuses a finite value it would turn into infinity, naming it.
  absl::Status s = EncodeFloats({1.0f, 70000.0f}, proto::DT_FLOAT16, &bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("element 1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("bfloat16"), std::string::npos) << s;
  // ... but passes a real infinity through (the server's finite check
  // answers it as it answers a float32 one).
  EXPECT_TRUE(
      EncodeFloats({std::numeric_limits<float>::infinity()}, proto::DT_FLOAT16, &bytes).ok());
  EXPECT_TRUE(EncodeFloats({70000.0f}, proto::DT_BFLOAT16, &bytes).ok());
  EXPECT_FALSE(EncodeFloats({1.0f}, proto::DT_INVALID, &bytes).ok());
  std::vector<float> out(3);
  EXPECT_EQ(DecodeFloats(std::string(5, '\0'), proto::DT_BFLOAT16, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeFloats(std::string(6, '\0'), static_cast<proto::DataType>(9), absl::MakeSpan(out))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(DecodeFloats(std::string(6, '\0'), proto::DT_FLOAT16, absl::MakeSpan(out)).ok());
  EXPECT_FALSE(ParseWireDtype("fp16").ok());
  EXPECT_EQ(*ParseWireDtype("bfloat16"), proto::DT_BFLOAT16);
  EXPECT_EQ(WireDtypeOrFloat32(proto::DT_INVALID), proto::DT_FLOAT32);
}

}  // namespace
}  // namespace tensor
}  // namespace psc
