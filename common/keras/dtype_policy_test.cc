// Keras's dtype policies: read in every form Keras writes them, per layer,
// and replaced by a job's --dtype_policy.
#include "common/keras/dtype_policy.h"

#include <string>
#include <vector>

#include "common/compute/layer_spec.h"
#include "common/keras/keras_config.h"
#include "common/keras/keras_test_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace keras {
namespace {

using compute::DType;
using ::testing::HasSubstr;

// A two-Dense model whose first layer has `dtype` (its last float32, as
// Keras writes every layer's).
Json TwoDense(const Json& dtype) {
  Json a = Dense("a", 4, "relu");
  a["config"]["dtype"] = dtype;
  Json b = Dense("b", 2, "linear");
  b["config"]["dtype"] = "float32";
  return Sequential({Input({nullptr, 8}), a, b});
}

DType FirstCompute(const compute::Model& m) {
  for (const compute::LayerSpec& l : m.layers()) {
    if (l.name == "a") return l.compute;
  }
  return DType::kFloat64;  // no such layer: fails every expectation
}

TEST(DtypePolicyTest, EveryFormKerasWritesIsRead) {
  struct Case {
    Json dtype;
    DType want;
  };
  const std::vector<Case> cases = {
      {"mixed_bfloat16", DType::kBFloat16},
      {"bfloat16", DType::kBFloat16},
      {"mixed_float16", DType::kFloat16},
      {"float16", DType::kFloat16},
      {"float32", DType::kFloat32},
      {nullptr, DType::kFloat32},  // absent: Keras's default
      {Json{{"module", "keras"},
            {"class_name", "DTypePolicy"},
            {"config", {{"name", "mixed_bfloat16"}}},
            {"registered_name", nullptr}},
       DType::kBFloat16},
      {Json{{"class_name", "FloatDTypePolicy"}, {"config", {{"name", "mixed_float16"}}}},
       DType::kFloat16},
      {Json{{"class_name", "Policy"}, {"config", {{"name", "mixed_bfloat16"}}}},  // Keras 2
       DType::kBFloat16},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dtype.dump());
    absl::StatusOr<compute::Model> m = Parse(TwoDense(c.dtype));
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(FirstCompute(*m), c.want);
    // The activations of a layer are held in its compute dtype.
    ASSERT_EQ(m->graph().num_tensors(), 3);  // the input, "a"'s output, "b"'s
    EXPECT_EQ(m->graph().tensor(1).dtype, c.want);
    EXPECT_EQ(m->graph().tensor(2).dtype, DType::kFloat32);  // "b" stays float32
  }
}

TEST(DtypePolicyTest, TheModelSaysWhatItComputesIn) {
  absl::StatusOr<compute::Model> mixed = Parse(TwoDense("mixed_bfloat16"));
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->ComputeDtypesText(), "float32 (1 layer), bfloat16 (1 layer)");
  EXPECT_EQ(mixed->ComputeDtypes(), (std::vector<DType>{DType::kFloat32, DType::kBFloat16}));
  absl::StatusOr<compute::Model> plain = Parse(TwoDense("float32"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->ComputeDtypesText(), "float32");
}

TEST(DtypePolicyTest, AnOverrideReplacesEveryLayersPolicyButTheInputs) {
  Json inner = Layer("LSTM", {{"name", "fwd"}, {"units", 3}, {"dtype", "float32"}});
  Json bidirectional = Layer("Bidirectional", {{"name", "bi"}, {"dtype", "float32"}});
  bidirectional["config"]["layer"] = inner;
  Json model = TwoDense("float32");
  model["config"]["layers"].push_back(bidirectional);
  absl::StatusOr<std::string> out = WithDtypePolicy(model.dump(), "mixed_bfloat16");
  ASSERT_TRUE(out.ok()) << out.status();
  const Json j = Json::parse(*out);
  const Json& layers = j["config"]["layers"];
  EXPECT_EQ(layers[0]["config"]["dtype"], "float32");  // the InputLayer: its data's dtype
  EXPECT_EQ(layers[1]["config"]["dtype"], "mixed_bfloat16");
  EXPECT_EQ(layers[2]["config"]["dtype"], "mixed_bfloat16");
  EXPECT_EQ(layers[3]["config"]["dtype"], "mixed_bfloat16");
  EXPECT_EQ(layers[3]["config"]["layer"]["config"]["dtype"], "mixed_bfloat16");
  absl::StatusOr<compute::Model> m = ModelFromKerasConfig(
      *WithDtypePolicy(TwoDense("float32").dump(), "mixed_float16"), "model.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->ComputeDtypesText(), "float16");  // "b" too
  // A policy pscluster does not compute in, and a config that is not JSON.
  for (const char* bad : {"float64", "mixed_int8", "", "int8_from_float32"}) {
    absl::StatusOr<std::string> s = WithDtypePolicy(model.dump(), bad);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.status().message()),
                HasSubstr("supported: float32, mixed_bfloat16, mixed_float16"));
  }
  EXPECT_EQ(WithDtypePolicy("{nope", "float32").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keras
}  // namespace psc
