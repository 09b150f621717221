#include "common/tensor/tensor.h"

#include <cmath>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace tensor {
namespace {

using ::testing::HasSubstr;

TEST(TensorTest, RoundTripAsRawLittleEndianBytes) {
  proto::Tensor t;
  SetFloatTensor({2, 2}, std::vector<float>{1.5f, -2, 0, 3}, &t);
  EXPECT_EQ(t.dtype(), proto::DT_FLOAT32);
  EXPECT_EQ(t.data().size(), 16u);
  EXPECT_EQ(t.data().substr(0, 4), std::string("\x00\x00\xc0\x3f", 4));  // 1.5f
  EXPECT_TRUE(ValidateFloatTensor(t, "t").ok());
  EXPECT_EQ(FloatValues(t), (std::vector<float>{1.5f, -2, 0, 3}));
}

TEST(TensorTest, ValidationNamesTheProblem) {
  proto::Tensor t;
  SetFloatTensor({3}, std::vector<float>{1, 2, 3}, &t);
  t.set_dtype(proto::DT_INVALID);
  EXPECT_THAT(ValidateFloatTensor(t, "w").message(), HasSubstr("w: dtype DT_INVALID"));
  t.set_dtype(proto::DT_FLOAT32);
  t.set_shape(0, -3);
  EXPECT_THAT(ValidateFloatTensor(t, "w").message(),
              HasSubstr("shape [-3]: negative dimension -3"));
  t.set_shape(0, 4);
  EXPECT_THAT(ValidateFloatTensor(t, "w").message(),
              HasSubstr("12 bytes of data for shape [4], want 16"));
}

TEST(TensorTest, ElementsAndShapes) {
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({3, 0}), 0);
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({-1}), -1);
  EXPECT_EQ(NumElements({int64_t{1} << 40, int64_t{1} << 40}), -1);
  EXPECT_EQ(ShapeString({3, 3, 1, 32}), "[3,3,1,32]");
}

TEST(TensorTest, FindsNonFiniteValues) {
  std::vector<float> v = {1, 2, 3, 4};
  auto bytes = [&] { return absl::string_view(reinterpret_cast<const char*>(v.data()), 16); };
  EXPECT_EQ(FirstNonFinite(bytes()), -1);
  v[2] = NAN;
  EXPECT_EQ(FirstNonFinite(bytes()), 2);
  v[2] = 3;
  v[3] = -INFINITY;
  EXPECT_EQ(FirstNonFinite(bytes()), 3);
  v[3] = 3.4e38f;  // large but finite
  EXPECT_EQ(FirstNonFinite(bytes()), -1);
}

// The blocked scan against a plain loop: every length around the block and
// pair boundaries, a non-finite value (NaN, +-inf, a NaN payload) at every
// position class, and the extreme finite values that must not match.
TEST(TensorTest, FirstNonFiniteMatchesAPlainScan) {
  auto plain = [](const std::vector<float>& v) -> int64_t {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i])) return static_cast<int64_t>(i);
    }
    return -1;
  };
  auto view = [](const std::vector<float>& v) {
    return absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  };
  uint32_t payload_nan_bits = 0x7fc01234u;
  float payload_nan;
  std::memcpy(&payload_nan, &payload_nan_bits, sizeof(float));
  const float bad[] = {NAN, INFINITY, -INFINITY, payload_nan};
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{2047}, size_t{2048},
                   size_t{2049}, size_t{4097}, size_t{10001}}) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
      v[i] = (i % 3 == 0) ? 3.4028235e38f : (i % 3 == 1 ? -1.17549435e-38f : 1e-45f);
    }
    EXPECT_EQ(FirstNonFinite(view(v)), -1) << n;
    for (size_t at : {size_t{0}, size_t{1}, n / 2, n > 0 ? n - 1 : 0, size_t{2048}, size_t{2049}}) {
      if (at >= n) continue;
      for (float b : bad) {
        std::vector<float> w = v;
        w[at] = b;
        if (at + 7 < n) w[at + 7] = NAN;  // a later one must not win
        EXPECT_EQ(FirstNonFinite(view(w)), plain(w)) << "n=" << n << " at=" << at;
        EXPECT_EQ(FirstNonFinite(view(w)), static_cast<int64_t>(at));
      }
    }
  }
}

}  // namespace
}  // namespace tensor
}  // namespace psc
