#include "common/data/numpy_labels.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/data/npz_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::data {
namespace {

using ::testing::HasSubstr;

using testing::ArrayOf;

TEST(NumpyLabelsTest, ClassIdsOfAnyIntegerType) {
  auto a = LabelsFromArray(ArrayOf<int64_t>(NpyType::kInt64, {4}, {3, 0, 9, 1}), 10, "y");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, (std::vector<int32_t>{3, 0, 9, 1}));
  auto b = LabelsFromArray(ArrayOf<uint8_t>(NpyType::kUint8, {3, 1}, {2, 2, 7}), 10, "y");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int32_t>{2, 2, 7}));
  auto c = LabelsFromArray(ArrayOf<int16_t>(NpyType::kInt16, {2}, {1, 0}), 2, "y");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (std::vector<int32_t>{1, 0}));
}

TEST(NumpyLabelsTest, OneHotRowsOfFloatsOrIntegers) {
  auto f = LabelsFromArray(ArrayOf<float>(NpyType::kFloat32, {2, 3}, {0, 0, 1, 1, 0, 0}), 3, "y");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f, (std::vector<int32_t>{2, 0}));
  auto i = LabelsFromArray(ArrayOf<int32_t>(NpyType::kInt32, {1, 4}, {0, 1, 0, 0}), 4, "y");
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(*i, (std::vector<int32_t>{1}));
}

TEST(NumpyLabelsTest, BadLabelsNameTheArrayTheExampleAndTheValue) {
  auto bad = [](const absl::StatusOr<std::vector<int32_t>>& r, const std::string& want) {
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("d.npz: y_train")) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(want)) << r.status();
  };
  const char* what = "d.npz: y_train";
  bad(LabelsFromArray(ArrayOf<int64_t>(NpyType::kInt64, {3}, {1, 10, 2}), 10, what),
      "label 10 of example 1 is outside [0, 10)");
  bad(LabelsFromArray(ArrayOf<int32_t>(NpyType::kInt32, {2}, {0, -1}), 10, what),
      "label -1 of example 1");
  bad(LabelsFromArray(ArrayOf<uint64_t>(NpyType::kUint64, {1}, {~uint64_t{0}}), 10, what),
      "label over 2^63");
  bad(LabelsFromArray(ArrayOf<float>(NpyType::kFloat32, {2}, {1.0f, 2.0f}), 10, what),
      "float32 class ids; want integers");
  bad(LabelsFromArray(ArrayOf<float>(NpyType::kFloat32, {1, 3}, {0, 1, 1}), 3, what),
      "row 0 is not one-hot (two 1s at column 2)");
  bad(LabelsFromArray(ArrayOf<float>(NpyType::kFloat32, {1, 3}, {0, 0.5f, 0}), 3, what),
      "a value 0.5 at column 1");
  bad(LabelsFromArray(ArrayOf<float>(NpyType::kFloat32, {1, 3}, {0, 0, 0}), 3, what), "all zeros");
  bad(LabelsFromArray(ArrayOf<float>(NpyType::kFloat32, {1, 3}, {0, 0, 1}), 10, what),
      "one-hot rows of 3 columns for a model of 10 classes");
  bad(LabelsFromArray(ArrayOf<int64_t>(NpyType::kInt64, {1, 2, 2}, {0, 0, 0, 0}), 10, what),
      "labels of shape (1, 2, 2) int64");
}

// A binary classifier's labels: 0/1 of any numeric type, (N,) or (N, 1).
TEST(NumpyLabelsTest, BinaryLabelsAreZeroOrOneOfAnyType) {
  auto f = BinaryLabelsFromArray(ArrayOf<float>(NpyType::kFloat32, {3, 1}, {1, 0, 1}), "y");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f, (std::vector<int32_t>{1, 0, 1}));
  auto i = BinaryLabelsFromArray(ArrayOf<uint8_t>(NpyType::kUint8, {2}, {0, 1}), "y");
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(*i, (std::vector<int32_t>{0, 1}));
  auto soft = BinaryLabelsFromArray(ArrayOf<float>(NpyType::kFloat32, {2}, {0, 0.7f}), "d.npz: y");
  EXPECT_EQ(soft.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(soft.status().message(), HasSubstr("d.npz: y: label 0.7 of example 1 is not 0 or 1"));
  auto two = BinaryLabelsFromArray(ArrayOf<int64_t>(NpyType::kInt64, {2}, {0, 2}), "y");
  EXPECT_THAT(two.status().message(), HasSubstr("label 2 of example 1 is not 0 or 1"));
  auto rows = BinaryLabelsFromArray(ArrayOf<float>(NpyType::kFloat32, {1, 2}, {0, 1}), "y");
  EXPECT_THAT(rows.status().message(), HasSubstr("binary_crossentropy wants (N,) or (N, 1)"));
}

// A regression's targets: (N, units) or, for one unit, (N,), of any
// numeric type, finite.
TEST(NumpyLabelsTest, RegressionTargetsAreFiniteNumbersOfTheOutputsShape) {
  auto f = TargetsFromArray(ArrayOf<double>(NpyType::kFloat64, {2, 2}, {0.5, -1, 2, 3.25}), 2, "y");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f, (std::vector<float>{0.5f, -1, 2, 3.25f}));
  auto i = TargetsFromArray(ArrayOf<int16_t>(NpyType::kInt16, {3}, {-4, 0, 7}), 1, "y");
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(*i, (std::vector<float>{-4, 0, 7}));
  auto column = TargetsFromArray(ArrayOf<float>(NpyType::kFloat32, {2, 1}, {1, 2}), 1, "y");
  ASSERT_TRUE(column.ok()) << column.status();
  EXPECT_EQ(*column, (std::vector<float>{1, 2}));
  auto wide = TargetsFromArray(ArrayOf<float>(NpyType::kFloat32, {2, 3}, {0, 0, 0, 0, 0, 0}), 2,
                               "d.npz: y_train");
  EXPECT_EQ(wide.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      wide.status().message(),
      HasSubstr("d.npz: y_train: targets of shape (2, 3) float32; the model outputs 2 unit(s), "
                "so a regression wants (N, 2)"));
  EXPECT_FALSE(TargetsFromArray(ArrayOf<float>(NpyType::kFloat32, {4}, {0, 0, 0, 0}), 2, "y").ok());
  auto nan =
      TargetsFromArray(ArrayOf<float>(NpyType::kFloat32, {2, 2}, {0, 0, 1, std::nanf("")}), 2, "y");
  EXPECT_THAT(nan.status().message(), HasSubstr("the target of example 1 is nan"));
  auto huge = TargetsFromArray(ArrayOf<double>(NpyType::kFloat64, {1}, {1e300}), 1, "y");
  EXPECT_THAT(huge.status().message(), HasSubstr("targets must be finite"));
}

TEST(NumpyLabelsTest, FromElementsChecksTheSize) {
  EXPECT_EQ(
      NumpyArray::FromElements(NpyType::kFloat32, {2, 2}, std::string(15, '\0')).status().code(),
      absl::StatusCode::kInvalidArgument);
  auto empty = NumpyArray::FromElements(NpyType::kInt64, {0}, "");
  ASSERT_TRUE(empty.ok());
  auto labels = LabelsFromArray(*empty, 10, "y");
  ASSERT_TRUE(labels.ok());
  EXPECT_TRUE(labels->empty());
}

}  // namespace
}  // namespace psc::data
