#include "common/records/row_layout.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::records {
namespace {

using ::testing::HasSubstr;

FeatureSpec Spec(const char* json) {
  auto spec = ParseFeatureSpec(json, "spec.json");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

// A model of two inputs: a 2x2x1 image and three ids below 10; 4 classes.
const std::vector<InputSlot> kInputs = {{"image", {2, 2, 1}, 0}, {"ids", {3}, 10}};

constexpr char kTwo[] = R"({
  "inputs": {"image": {"feature": "px", "kind": "bytes", "dtype": "uint8"},
             "ids": {"kind": "int64", "varlen": true, "pad": 0}},
  "label": {"feature": "y", "kind": "int64"},
  "weight": {"feature": "w", "kind": "float"}})";

TEST(RowLayoutTest, ResolvesTheSpecAgainstTheModel) {
  auto layout = ResolveLayout(Spec(kTwo), kInputs, {}, {4, 0}, "spec.json");
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->columns.size(), 4u);
  EXPECT_FALSE(layout->one_input);
  EXPECT_EQ(layout->columns[0].array, "/image");
  EXPECT_EQ(layout->columns[0].type, data::NpyType::kUint8);
  EXPECT_EQ(layout->columns[0].values, 4);
  EXPECT_EQ(layout->columns[1].array, "/ids");
  EXPECT_EQ(layout->columns[1].type, data::NpyType::kInt64);
  EXPECT_EQ(layout->columns[1].id_limit, 10);
  EXPECT_EQ(layout->label, 2);
  EXPECT_EQ(layout->columns[2].classes, 4);
  EXPECT_EQ(layout->weight, 3);

  // One input of values: the spec's only entry feeds it, whatever its key.
  auto one = ResolveLayout(
      Spec(R"({"inputs": {"pixels": {"kind": "float"}}, "label": {"kind": "float"}})"), {}, {5},
      {0, 2}, "spec.json");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(one->one_input);
  EXPECT_EQ(one->columns[0].array, "");
  EXPECT_EQ(one->columns[0].values, 5);
  EXPECT_EQ(one->columns[1].shape, std::vector<int64_t>{2}) << "the regression's width";
}

TEST(RowLayoutTest, RefusesASpecThatDoesNotFitTheModel) {
  const struct {
    const char* json;
    const char* message;
  } cases[] = {
      {R"({"inputs": {"image": {"kind": "float"}, "ids": {"kind": "int64"},
                      "extra": {"kind": "float"}}, "label": {"kind": "int64"}})",
       "the model has no input \"extra\" (its inputs: image, ids)"},
      {R"({"inputs": {"image": {"kind": "float"}}, "label": {"kind": "int64"}})",
       "no entry for the model's input \"ids\" of shape [3]"},
      {R"({"inputs": {"image": {"kind": "float", "shape": [5]}, "ids": {"kind": "int64"}},
           "label": {"kind": "int64"}})",
       "\"image\": shape [5] holds 5 values; the model's input takes [2, 2, 1]"},
      {R"({"inputs": {"image": {"kind": "float"}, "ids": {"kind": "float"}},
           "label": {"kind": "int64"}})",
       "\"ids\" is an input of ids"},
      {R"({"inputs": {"image": {"kind": "float"}, "ids": {"kind": "int64"}},
           "label": {"kind": "float", "shape": [3]}})",
       "want a class id (shape []) or a one-hot row of the model's 4 classes"},
      {R"({"inputs": {"image": {"kind": "float", "default": [1, 2]}, "ids": {"kind": "int64"}},
           "label": {"kind": "int64"}})",
       "\"image\": \"default\" holds 2 values for 4"},
      {R"({"inputs": {"image": {"kind": "float", "default": 1e300}, "ids": {"kind": "int64"}},
           "label": {"kind": "int64"}})",
       "\"image\": the default or pad 1e+300 is beyond float32's range"},
      {R"({"inputs": {"image": {"kind": "float"}, "ids": {"kind": "int64", "varlen": true,
           "pad": -1}}, "label": {"kind": "int64"}})",
       "\"ids\": the default or pad -1 is not a row of the Embedding"},
      {R"({"inputs": {"image": {"kind": "float"}, "ids": {"kind": "int64"}},
           "label": {"kind": "int64", "default": 7}})",
       "\"label\": the default or pad 7 is not one of the model's classes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.json);
    auto layout = ResolveLayout(Spec(c.json), kInputs, {}, {4, 0}, "spec.json");
    ASSERT_FALSE(layout.ok());
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(layout.status().message(), HasSubstr(c.message));
  }
}

TEST(RowLayoutTest, AppendsCheckedConvertedRowsAndTakesTheArrays) {
  auto layout = ResolveLayout(Spec(kTwo), kInputs, {}, {4, 0}, "spec.json");
  ASSERT_TRUE(layout.ok()) << layout.status();
  RowBuffer rows(&*layout);
  const std::string px = std::string("\x01\x02\x03\xff", 4);
  for (int r = 0; r < 2; ++r) {
    rows.Begin();
    ASSERT_TRUE(rows.AppendRaw(0, px, "f: record 0").ok());
    const std::vector<int64_t> ids =
        r == 0 ? std::vector<int64_t>{7} : std::vector<int64_t>{1, 2, 9};
    ASSERT_TRUE(rows.AppendInt64s(1, ids, "f: record 0").ok());
    ASSERT_TRUE(rows.AppendInt64s(2, std::vector<int64_t>{3}, "f: record 0").ok());
    ASSERT_TRUE(rows.AppendFloats(3, std::vector<float>{0.5f}, "f: record 0").ok());
    rows.Commit();
  }
  // Each bad value: an error naming the record and the feature, the arrays untouched.
  const uint64_t before = rows.bytes();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const struct {
    int column;
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::string raw;
    const char* message;
  } bad[] = {
      {1, {1, 2, 3, 4}, {}, "", "feature \"ids\" (ids): 4 values; at most 3"},
      {1, {1, 10}, {}, "", "id 10 (value 1) is not a row of the Embedding (0 to 9)"},
      {1, {-1}, {}, "", "id -1 (value 0)"},
      {2, {4}, {}, "", "class 4 is not one of the model's 4 classes"},
      {2, {1, 2}, {}, "", "2 values; want 1"},
      {3, {}, {nan}, "", "feature \"w\" (weight): value 0 is nan"},
      {0, {}, {}, "abc", "3 bytes; want 4 uint8 values of 1 bytes (4)"},
      {0, {}, {}, std::string("\x89PNG\r\n\x1a\n", 8), "holds a PNG image"},
      {0, {}, {}, "\xff\xd8\xff\xe0jpeg", "holds a JPEG image"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.message);
    rows.Begin();
    ASSERT_TRUE(rows.AppendRaw(0, px, "f: record 2").ok() || b.column == 0);
    absl::Status s = !b.raw.empty()    ? rows.AppendRaw(b.column, b.raw, "f: record 2")
                     : !b.ints.empty() ? rows.AppendInt64s(b.column, b.ints, "f: record 2")
                                       : rows.AppendFloats(b.column, b.floats, "f: record 2");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("f: record 2: feature"));
    EXPECT_THAT(s.message(), HasSubstr(b.message));
    rows.Abandon();
    EXPECT_EQ(rows.bytes(), before);
  }
  // Raw values that happen to start as JPEG does, of the right length, are values.
  rows.Begin();
  EXPECT_TRUE(rows.AppendRaw(0, "\xff\xd8\xff\xe0", "f: record 2").ok());
  rows.Abandon();
  // A missing feature without a default.
  absl::Status missing = rows.AppendDefault(1, "f: record 3", "the record has no feature \"ids\"");
  EXPECT_THAT(missing.message(),
              HasSubstr("f: record 3: the record has no feature \"ids\" and the spec gives "
                        "\"ids\" no \"default\""));

  auto arrays = rows.Take("x_train", "y_train", "w_train");
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  ASSERT_EQ(arrays->size(), 4u);
  const data::NumpyArray& image = arrays->at("x_train/image");
  EXPECT_EQ(image.header().Text(), "(2, 2, 2, 1) uint8");
  EXPECT_EQ(std::memcmp(image.data(), (px + px).data(), 8), 0);
  const data::NumpyArray& ids = arrays->at("x_train/ids");
  EXPECT_EQ(ids.header().Text(), "(2, 3) int64");
  std::vector<int64_t> got(6);
  std::memcpy(got.data(), ids.data(), 48);
  EXPECT_EQ(got, (std::vector<int64_t>{7, 0, 0, 1, 2, 9})) << "padded with 0";
  EXPECT_EQ(arrays->at("y_train").header().Text(), "(2,) int64");
  EXPECT_EQ(arrays->at("w_train").header().Text(), "(2,) float32");
  EXPECT_EQ(rows.rows(), 0);
}

TEST(RowLayoutTest, RawValuesOfEveryTypeBecomeFloats) {
  auto layout = ResolveLayout(
      Spec(R"({"inputs": {"x": {"kind": "bytes", "dtype": "int16"}}, "label": {"kind": "float"}})"),
      {}, {2}, {0, 1}, "spec.json");
  ASSERT_TRUE(layout.ok()) << layout.status();
  RowBuffer rows(&*layout);
  const int16_t v[2] = {-300, 7};
  rows.Begin();
  ASSERT_TRUE(rows.AppendRaw(0, absl::string_view(reinterpret_cast<const char*>(v), 4), "r").ok());
  ASSERT_TRUE(rows.AppendDoubles(1, std::vector<double>{2.5}, "r").ok());
  rows.Commit();
  auto arrays = rows.Take("x_val", "y_val", "w_val");
  ASSERT_TRUE(arrays.ok());
  const data::NumpyArray& x = arrays->at("x_val");
  EXPECT_EQ(x.header().Text(), "(1, 2) float32");
  float got[2];
  std::memcpy(got, x.data(), 8);
  EXPECT_EQ(got[0], -300.0f);
  EXPECT_EQ(got[1], 7.0f);
  EXPECT_EQ(arrays->at("y_val").header().Text(), "(1,) float32");
}

}  // namespace
}  // namespace psc::records
