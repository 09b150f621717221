// Keras's dtype policies: read in every form Keras writes them, per layer,
// and replaced by a job's --dtype_policy.
#include "common/keras/dtype_policy.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compute/conv_ops.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/layer_spec.h"
#include "common/compute/model.h"
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

// What a mixed model's layers use in float32, and so pull in float32 under
// a 16-bit wire: a float32 layer's variables, and a normalization's (Keras
// keeps them out of autocasting); not a bfloat16 Dense's.
TEST(DtypePolicyTest, TheVariablesUsedInFloat32AreKnown) {
  Json a = Dense("a", 4, "relu");
  a["config"]["dtype"] = "mixed_bfloat16";
  Json bn = Layer("BatchNormalization", {{"name", "bn"}, {"dtype", "mixed_bfloat16"}});
  Json b = Dense("b", 2, "linear");
  b["config"]["dtype"] = "float32";
  absl::StatusOr<compute::Model> m = Parse(Sequential({Input({nullptr, 8}), a, bn, b}));
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> names;
  for (const auto& v : m->variables()) names.push_back(v.name);
  ASSERT_EQ(names.size(), 8u) << "a's 2, bn's 4, b's 2";
  const std::vector<bool> f32 = m->float32_variables();
  for (size_t v = 0; v < names.size(); ++v) {
    EXPECT_EQ(f32[v], names[v].rfind("a/", 0) != 0) << names[v];
  }
  absl::StatusOr<compute::Model> plain = Parse(TwoDense("float32"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (bool b : plain->float32_variables()) EXPECT_TRUE(b);
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
  // A config written by hand, without dtypes: its layers are the model's
  // "layers" (and a wrapper's "layer"); an initializer's config is none.
  Json bare = Dense("c", 2, "linear");
  bare["config"].erase("dtype");
  bare["config"]["kernel_initializer"] = {{"class_name", "GlorotUniform"},
                                          {"config", {{"seed", 1}}}};
  Json bare_inner = Layer("LSTM", {{"name", "fwd"}, {"units", 3}});
  Json bare_bi = Layer("Bidirectional", {{"name", "bi"}});
  bare_bi["config"]["layer"] = bare_inner;
  const Json bare_model = Sequential({Input({nullptr, 8}), bare, bare_bi});
  ASSERT_FALSE(bare_model["config"]["layers"][1]["config"].contains("dtype"));
  out = WithDtypePolicy(bare_model.dump(), "mixed_bfloat16");
  ASSERT_TRUE(out.ok()) << out.status();
  const Json b = Json::parse(*out);
  EXPECT_EQ(b["config"]["layers"][1]["config"]["dtype"], "mixed_bfloat16");
  EXPECT_FALSE(
      b["config"]["layers"][1]["config"]["kernel_initializer"]["config"].contains("dtype"));
  EXPECT_EQ(b["config"]["layers"][2]["config"]["dtype"], "mixed_bfloat16");
  EXPECT_EQ(b["config"]["layers"][2]["config"]["layer"]["config"]["dtype"], "mixed_bfloat16");
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

// A layer pscluster splits in two (a Dense with gelu: the product, then
// the activation on its own) keeps its policy in both.
TEST(DtypePolicyTest, ALayerSplitInTwoComputesInItsPolicyInBoth) {
  Json a = Dense("a", 4, "gelu");
  a["config"]["dtype"] = "mixed_bfloat16";
  Json b = Dense("b", 2, "linear");
  b["config"]["dtype"] = "mixed_bfloat16";
  absl::StatusOr<compute::Model> m = Parse(Sequential({Input({nullptr, 8}), a, b}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(m->layers().size(), 2u);  // the gelu on its own
  EXPECT_EQ(m->ComputeDtypesText(), "bfloat16");
}

TEST(DtypePolicyTest, ABidirectionalsLayerComputesInItsPolicy) {
  auto model = [](const Json& inner_dtype) {
    Json inner = Layer("LSTM", {{"name", "fwd"},
                                {"units", 3},
                                {"activation", "tanh"},
                                {"recurrent_activation", "sigmoid"},
                                {"dtype", inner_dtype}});
    Json bi = Layer("Bidirectional",
                    {{"name", "bi"}, {"merge_mode", "concat"}, {"dtype", "mixed_bfloat16"}});
    bi["config"]["layer"] = inner;
    Json d = Dense("d", 2, "linear");
    d["config"]["dtype"] = "mixed_bfloat16";
    return Sequential({Input({nullptr, 5, 2}), bi, d});
  };
  absl::StatusOr<compute::Model> same = Parse(model("mixed_bfloat16"));
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->ComputeDtypesText(), "bfloat16");
  absl::StatusOr<compute::Model> other = Parse(model("float32"));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("a layer computing in float32 inside a Bidirectional computing in "
                        "bfloat16"));
  absl::StatusOr<compute::Model> quantized =
      Parse(model(Json{{"class_name", "QuantizedDTypePolicy"}, {"config", {{"mode", "int8"}}}}));
  EXPECT_EQ(quantized.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(quantized.status().message()),
              HasSubstr("QuantizedDTypePolicy is not supported"));
}

// One training step of a small CNN (Conv2D, max pooling, Dense) under
// The convolutions a backend plans ahead (ModelOpSpecs) say the dtype they
// will run in: the format where the input and output share it, float32
// where they differ (the first layer's float32 input) or the layer is float32.
TEST(DtypePolicyTest, TheConvolutionsToPlanSayTheirDtype) {
  auto conv = [](const char* name, const char* policy) {
    return Layer("Conv2D", {{"name", name},
                            {"filters", 4},
                            {"kernel_size", {3, 3}},
                            {"padding", "same"},
                            {"activation", "relu"},
                            {"dtype", policy}});
  };
  Json d = Dense("d", 2, "linear");
  d["config"]["dtype"] = "float32";
  absl::StatusOr<compute::Model> m = Parse(Sequential(
      {Input({nullptr, 6, 6, 3}), conv("a", "mixed_bfloat16"), conv("b", "mixed_bfloat16"),
       conv("c", "float32"), Layer("Flatten", {{"name", "f"}}), d}));
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> got;
  for (const compute::OpSpec& s : compute::ModelOpSpecs(*m, 2)) {
    if (s.op == compute::conv::kConv2D || s.op == compute::conv::kConv2DBackwardData ||
        s.op == compute::conv::kConv2DBackwardWeights) {
      got.push_back(absl::StrCat(s.input[3], ":", compute::DTypeName(s.dtype)));
    }
  }
  const std::string f32 = "float32", bf16 = "bfloat16";
  // a: 3 float32 channels in, bfloat16 out; b: bfloat16 both; c: float32.
  EXPECT_THAT(got,
              ::testing::ElementsAre("3:" + f32, "3:" + f32, "3:" + f32, "4:" + bf16, "4:" + bf16,
                                     "4:" + bf16, "4:" + f32, "4:" + f32, "4:" + f32));
}

// mixed_bfloat16 on the CPU backend: its activations are bfloat16 tensors,
// its loss and gradients within bfloat16's reach of the float32 model's
// from the same variables, and not the float32 ones (the step ran in
// bfloat16, natively where the CPU has AVX512_BF16, else through the
// float32 copies: both round every activation to bfloat16).
TEST(DtypePolicyTest, AMixedBfloat16StepIsTheFloat32OneWithinBfloat16) {
  auto cnn = [](const char* policy) {
    std::vector<Json> layers = {Input({nullptr, 8, 8, 3})};
    Json c = Layer("Conv2D", {{"name", "c"},
                              {"filters", 16},
                              {"kernel_size", {3, 3}},
                              {"padding", "same"},
                              {"activation", "relu"},
                              {"dtype", policy}});
    Json p = Layer("MaxPooling2D", {{"name", "p"}, {"pool_size", {2, 2}}, {"dtype", policy}});
    Json f = Layer("Flatten", {{"name", "f"}, {"dtype", policy}});
    Json d = Dense("d", 4, "linear");
    d["config"]["dtype"] = policy;
    return Sequential({Input({nullptr, 8, 8, 3}), c, p, f, d});
  };
  absl::StatusOr<compute::Model> f32 = Parse(cnn("float32"));
  absl::StatusOr<compute::Model> bf16 = Parse(cnn("mixed_bfloat16"));
  ASSERT_TRUE(f32.ok()) << f32.status();
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(bf16->graph().tensor(1).dtype, DType::kBFloat16);
  const std::vector<std::vector<float>> params = f32->Initialize(5);
  std::vector<float> x(6 * 8 * 8 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 101.0f;
  const std::vector<int32_t> labels = {0, 1, 2, 3, 1, 2};
  std::vector<std::vector<std::vector<float>>> grads;
  std::vector<double> losses;
  for (const compute::Model* m : {&*f32, &*bf16}) {
    auto backend = compute::CreateCpuBackend(1);
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto exec = compute::Executor::Create(m, backend->get());
    ASSERT_TRUE(exec.ok()) << exec.status();
    ASSERT_TRUE((*exec)->SetParameters(params).ok());
    compute::StepResult r;
    ASSERT_TRUE((*exec)->ComputeGradients(x, labels, 1.0f / 6, &r).ok());
    losses.push_back(r.loss_sum);
    grads.emplace_back();
    ASSERT_TRUE((*exec)->CopyGradients(&grads.back()).ok());
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-2 * losses[0]);
  bool differ = false;
  for (size_t v = 0; v < grads[0].size(); ++v) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < grads[0][v].size(); ++i) {
      diff += std::pow(double{grads[1][v][i]} - grads[0][v][i], 2);
      norm += std::pow(double{grads[0][v][i]}, 2);
      differ = differ || grads[1][v][i] != grads[0][v][i];
    }
    EXPECT_LE(std::sqrt(diff), 5e-2 * std::sqrt(norm)) << "variable " << v;
  }
  EXPECT_TRUE(differ) << "the bfloat16 step computed what the float32 one did";
}

}  // namespace
}  // namespace keras
}  // namespace psc
