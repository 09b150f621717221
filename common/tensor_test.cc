#include "common/tensor.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
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
  EXPECT_THAT(ValidateFloatTensor(t, "w").message(), HasSubstr("invalid shape [-3]"));
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

}  // namespace
}  // namespace psc
