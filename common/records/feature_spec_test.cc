#include "common/records/feature_spec.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::records {
namespace {

using ::testing::HasSubstr;

constexpr char kFullSpec[] = R"({
  "inputs": {"image": {"feature": "image_raw", "kind": "bytes", "dtype": "uint8",
                       "shape": [28, 28, 1]},
             "dense": {"feature": "f", "kind": "float", "shape": [13], "default": 0},
             "tags": {"kind": "int64", "varlen": true, "pad": 0}},
  "label": {"feature": "label", "kind": "int64"},
  "weight": {"feature": "w", "kind": "float"}})";

TEST(FeatureSpecTest, ReadsEveryKeyAndWritesItBack) {
  auto spec = ParseFeatureSpec(kFullSpec, "spec.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->inputs.size(), 3u);
  const FeatureColumn& dense = spec->inputs[0];  // name order
  EXPECT_EQ(dense.key, "dense");
  EXPECT_EQ(dense.features, std::vector<std::string>{"f"});
  EXPECT_EQ(dense.kind, ValueKind::kFloat);
  EXPECT_EQ(dense.shape, std::vector<int64_t>{13});
  EXPECT_EQ(dense.default_value, std::vector<double>{0});
  const FeatureColumn& image = spec->inputs[1];
  EXPECT_EQ(image.kind, ValueKind::kBytes);
  EXPECT_EQ(image.dtype, data::NpyType::kUint8);
  EXPECT_EQ(ShapeValues(image.shape), 784);
  const FeatureColumn& tags = spec->inputs[2];
  EXPECT_EQ(tags.features, std::vector<std::string>{"tags"}) << "the input's name by default";
  EXPECT_TRUE(tags.varlen);
  EXPECT_FALSE(tags.has_shape);
  EXPECT_EQ(spec->label.features, std::vector<std::string>{"label"});
  ASSERT_TRUE(spec->weight.has_value());
  EXPECT_EQ(spec->weight->features, std::vector<std::string>{"w"});

  auto again = ParseFeatureSpec(FeatureSpecJson(*spec), "again");
  ASSERT_TRUE(again.ok()) << again.status() << FeatureSpecJson(*spec);
  EXPECT_EQ(FeatureSpecJson(*again), FeatureSpecJson(*spec));
}

TEST(FeatureSpecTest, CsvColumnsAreOnePerValue) {
  auto spec = ParseFeatureSpec(
      R"({"inputs": {"x": {"feature": ["a", "b", "c"], "kind": "float", "shape": [3],
                           "default": [1, 2, 3]}},
          "label": {"feature": "y", "kind": "float"}})",
      "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->inputs[0].features, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(spec->inputs[0].default_value, (std::vector<double>{1, 2, 3}));
}

TEST(FeatureSpecTest, RefusesWhatItCannotRead) {
  const struct {
    const char* json;
    const char* message;
  } cases[] = {
      {"[1, 2]", "not a JSON object"},
      {"{\"inputs\": ", "not a JSON object"},
      {R"({"label": {"kind": "int64"}})", "no \"inputs\""},
      {R"({"inputs": {"x": {"kind": "float"}}})", "no \"label\""},
      {R"({"inputs": {"x": {"kind": "float"}}, "label": {"kind": "int64"}, "extra": 1})",
       "unknown key \"extra\""},
      {R"({"inputs": {"x": {"kind": "float", "shap": [2]}}, "label": {"kind": "int64"}})",
       "\"x\": unknown key \"shap\""},
      {R"({"inputs": {"x": {"kind": "string"}}, "label": {"kind": "int64"}})",
       "\"x\": \"kind\": \"string\" is not one of"},
      {R"({"inputs": {"x": {"feature": "f"}}, "label": {"kind": "int64"}})", "no \"kind\""},
      {R"({"inputs": {"x": {"kind": "bytes"}}, "label": {"kind": "int64"}})",
       "not strings or encoded images"},
      {R"({"inputs": {"x": {"kind": "bytes", "dtype": "complex64"}}, "label": {"kind": "int64"}})",
       "\"dtype\": \"complex64\" is not one of uint8"},
      {R"({"inputs": {"x": {"kind": "float", "dtype": "uint8"}}, "label": {"kind": "int64"}})",
       "\"dtype\" is for \"kind\": \"bytes\""},
      {R"({"inputs": {"x": {"kind": "float", "shape": [2, 0]}}, "label": {"kind": "int64"}})",
       "not a list of positive integers"},
      {R"({"inputs": {"x": {"kind": "float", "shape": [1.5]}}, "label": {"kind": "int64"}})",
       "not a list of positive integers"},
      {R"({"inputs": {"x": {"kind": "float", "shape": [65536, 65536]}}, "label": {"kind": "int64"}})",
       "over 2^31 values"},
      {R"({"inputs": {"x": {"kind": "bytes", "dtype": "uint8", "varlen": true}},
           "label": {"kind": "int64"}})",
       "\"varlen\" is for int64 and float lists"},
      {R"({"inputs": {"x": {"kind": "int64", "pad": 1}}, "label": {"kind": "int64"}})",
       "\"pad\" is for \"varlen\": true"},
      {R"({"inputs": {"x": {"kind": "int64", "default": 0.5}}, "label": {"kind": "int64"}})",
       "\"default\": 0.5 is not a finite integer"},
      {R"({"inputs": {"x": {"kind": "float", "shape": [2], "default": [1, 2, 3]}},
           "label": {"kind": "int64"}})",
       "\"default\" holds 3 values for a shape of 2"},
      {R"({"inputs": {"x": {"feature": ["a", "b"], "kind": "float", "shape": [3]}},
           "label": {"kind": "int64"}})",
       "\"feature\" lists 2 columns for a shape of 3 values"},
      {R"({"inputs": {"x": {"kind": "float"}}, "label": {"kind": "bytes", "dtype": "uint8"}})",
       "\"label\": want a fixed-length int64 or float feature"},
      {R"({"inputs": {"x": {"kind": "float"}}, "label": {"kind": "int64"},
           "weight": {"kind": "float", "shape": [2]}})",
       "\"weight\": want one float or int64 value per example"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.json);
    auto spec = ParseFeatureSpec(c.json, "bad.json");
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(spec.status().message(), HasSubstr("bad.json"));
    EXPECT_THAT(spec.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace psc::records
