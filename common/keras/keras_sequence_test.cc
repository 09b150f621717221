// The sequence layers of issue 40 as the Keras reader builds them: Conv1D
// (causal, dilated, strided), the 1-D poolings, Dense on a sequence's last
// axis, EinsumDense, LayerNormalization, Permute, RepeatVector and a
// Softmax over another axis than the last. Their variables are Keras's
// (names and shapes, so weights round-trip), the executor's gradients
// through them match central differences of the loss, and what Keras
// refuses or pscluster does not support is an error naming the layer.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/compute/cpu_backend.h"
#include "common/keras/input_dims.h"
#include "common/keras/keras_config.h"
#include "common/keras/keras_paths.h"
#include "common/keras/keras_test_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace keras {
namespace {

using compute::CreateCpuBackend;
using compute::Executor;
using compute::LossOptions;
using compute::Model;
using compute::Shape;
using compute::ShapeText;
using ::testing::ElementsAre;
using testing::ExpectGradientsMatchCentralDifferences;
using ::testing::HasSubstr;
using testing::Input;
using testing::Json;
using testing::Layer;
using testing::Parse;
using testing::Sequential;
using testing::Variables;

Json Conv1D(const std::string& name, int filters, int kernel, const std::string& padding,
            int strides, int dilation, const std::string& act) {
  return Layer("Conv1D", {{"name", name},
                          {"filters", filters},
                          {"kernel_size", {kernel}},
                          {"strides", {strides}},
                          {"padding", padding},
                          {"data_format", "channels_last"},
                          {"dilation_rate", {dilation}},
                          {"groups", 1},
                          {"activation", act},
                          {"use_bias", true}});
}
Json LayerNorm(const std::string& name, Json axis, bool center = true, bool scale = true) {
  return Layer("LayerNormalization", {{"name", name},
                                      {"axis", axis},
                                      {"epsilon", 0.001},
                                      {"center", center},
                                      {"scale", scale},
                                      {"rms_scaling", false}});
}
Json Einsum(const std::string& name, const std::string& equation, Json output_shape, Json bias_axes,
            const std::string& act) {
  return Layer("EinsumDense", {{"name", name},
                               {"equation", equation},
                               {"output_shape", output_shape},
                               {"bias_axes", bias_axes},
                               {"activation", act}});
}
Json SeqDense(const std::string& name, int units, const std::string& act) {
  return testing::Dense(name, units, act);
}

// The convolutional model: causal and dilated, then strided "same", the
// 1-D average pooling, a LayerNormalization, a Dense on every step, a
// Permute and a softmax over the steps, the global average over them.
Json ConvModel() {
  return Sequential(
      {Input({nullptr, 12, 3}), Conv1D("causal", 4, 3, "causal", 1, 2, "tanh"),
       Conv1D("strided", 5, 2, "same", 2, 1, "tanh"),
       Layer("AveragePooling1D", {{"name", "pool"},
                                  {"pool_size", {2}},
                                  {"strides", {1}},
                                  {"padding", "valid"},
                                  {"data_format", "channels_last"}}),
       LayerNorm("norm", -1), SeqDense("per_step", 6, "tanh"),
       Layer("Permute", {{"name", "permute"}, {"dims", {2, 1}}}),
       Layer("Softmax", {{"name", "over_steps"}, {"axis", 1}}),
       Layer("GlobalAveragePooling1D", {{"name", "mean"}, {"data_format", "channels_last"}}),
       testing::Dense("out", 3, "linear")});
}

// EinsumDense's two MultiHeadAttention forms, a LayerNormalization over
// two axes without beta, RepeatVector and a Dense on its steps.
Json EinsumModel() {
  return Sequential(
      {Input({nullptr, 5, 4}), Einsum("heads", "abc,cde->abde", {nullptr, 2, 3}, "de", "tanh"),
       Einsum("merge", "abcd,cde->abe", {nullptr, 4}, "e", "linear"),
       LayerNorm("norm2", {-2, -1}, /*center=*/false),
       Layer("Flatten", {{"name", "flat"}, {"data_format", "channels_last"}}),
       testing::Dense("squeeze", 3, "tanh"), Layer("RepeatVector", {{"name", "repeat"}, {"n", 2}}),
       SeqDense("per_step", 3, "tanh"),
       Layer("Flatten", {{"name", "flat2"}, {"data_format", "channels_last"}}),
       testing::Dense("out", 2, "linear")});
}

TEST(KerasSequenceTest, LayersHaveKerasShapesAndVariables) {
  auto conv = Parse(ConvModel());
  ASSERT_TRUE(conv.ok()) << conv.status();
  EXPECT_EQ(conv->input_shape(), (Shape{12, 3}));
  std::vector<std::string> rows;
  for (const auto& r : conv->summary()) {
    rows.push_back(r.name + " " + ShapeText(r.output) + " " + std::to_string(r.params));
  }
  // Causal keeps 12 steps; stride 2 "same" makes 6; a pool of 2 at stride
  // 1 makes 5.
  EXPECT_THAT(rows, ElementsAre("causal [12,4] 40", "strided [6,5] 45", "pool [5,5] 0",
                                "norm [5,5] 10", "per_step [5,6] 36", "permute [6,5] 0",
                                "over_steps [6,5] 0", "mean [5] 0", "out [3] 18"));
  EXPECT_THAT(
      Variables(*conv),
      ElementsAre("causal/kernel [3,3,4]", "causal/bias [4]", "strided/kernel [2,4,5]",
                  "strided/bias [5]", "norm/gamma [5]", "norm/beta [5]", "per_step/kernel [5,6]",
                  "per_step/bias [6]", "out/kernel [5,3]", "out/bias [3]"));
  auto einsum = Parse(EinsumModel());
  ASSERT_TRUE(einsum.ok()) << einsum.status();
  EXPECT_THAT(Variables(*einsum),
              ElementsAre("heads/kernel [4,2,3]", "heads/bias [2,3]", "merge/kernel [2,3,4]",
                          "merge/bias [4]", "norm2/gamma [5,4]", "squeeze/kernel [20,3]",
                          "squeeze/bias [3]", "per_step/kernel [3,3]", "per_step/bias [3]",
                          "out/kernel [6,2]", "out/bias [2]"));
  EXPECT_EQ(einsum->summary()[0].output, (Shape{5, 2, 3}));
  EXPECT_EQ(einsum->summary()[5].output, (Shape{2, 3}));  // RepeatVector
}

void CheckGradients(const Json& config, int64_t classes) {
  auto m = Parse(config);
  ASSERT_TRUE(m.ok()) << m.status();
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto params = m->Initialize(11);
  std::mt19937 rng(5);
  for (auto& p : params) {  // biases and gamma away from their 0 and 1
    for (float& v : p) v += static_cast<float>(rng() % 200) / 1000.0f - 0.1f;
  }
  std::vector<float> x(3 * m->input_elements());
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  std::vector<int32_t> labels;
  for (int i = 0; i < 3; ++i) labels.push_back(static_cast<int32_t>(i % classes));
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, labels, LossOptions{}, params, 2);
  // Predict gives the outputs a forward pass does at evaluation.
  std::vector<float> out;
  ASSERT_TRUE((*exec)->Predict(x, &out).ok());
  EXPECT_EQ(out.size(), static_cast<size_t>(3 * classes));
}

TEST(KerasSequenceTest, GradientsThroughConvolutionsAndNormalizationMatchCentralDifferences) {
  CheckGradients(ConvModel(), 3);
}

TEST(KerasSequenceTest, GradientsThroughEinsumDenseAndRepeatVectorMatchCentralDifferences) {
  CheckGradients(EinsumModel(), 2);
}

// A functional model's layer called as Keras 3 writes the call: `args`
// the tensors (layer names) passed positionally, `kwargs` the keyword
// arguments, a tensor among them written as Tensor(name).
Json Tensor(const std::string& layer) {
  return {{"class_name", "__keras_tensor__"},
          {"config", {{"shape", {nullptr}}, {"keras_history", {layer, 0, 0}}}}};
}
Json Call(Json layer, const std::vector<std::string>& args, Json kwargs = Json::object()) {
  layer["name"] = layer["config"]["name"];
  layer["inbound_nodes"] = Json::array();
  if (!args.empty() || !kwargs.empty()) {
    Json a = Json::array();
    for (const std::string& in : args) a.push_back(Tensor(in));
    layer["inbound_nodes"].push_back({{"args", a}, {"kwargs", kwargs}});
  }
  return layer;
}
Json Model(const std::vector<Json>& layers, const std::vector<std::string>& inputs,
           const std::string& output) {
  Json list = Json::array(), ins = Json::array();
  for (const Json& l : layers) list.push_back(l);
  for (const std::string& in : inputs) ins.push_back({in, 0, 0});
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "attention"},
            {"layers", list},
            {"input_layers", ins},
            {"output_layers", {{output, 0, 0}}}}}};
}
Json NamedInput(const std::string& name, Json batch_shape) {
  return Layer("InputLayer", {{"batch_shape", batch_shape}, {"dtype", "float32"}, {"name", name}});
}
Json Attention(const std::string& name, int heads, int key_dim, Json value_dim, Json output_shape,
               bool bias = true) {
  return Layer("MultiHeadAttention", {{"name", name},
                                      {"num_heads", heads},
                                      {"key_dim", key_dim},
                                      {"value_dim", value_dim},
                                      {"dropout", 0.0},
                                      {"use_bias", bias},
                                      {"use_gate", false},
                                      {"output_shape", output_shape},
                                      {"attention_axes", {1}},
                                      {"sliding_window", nullptr},
                                      {"seed", nullptr}});
}

// Causal self-attention on one sequence, a residual Add and a
// LayerNormalization: an encoder block's first half.
Json SelfAttentionModel(bool bias = true) {
  return Model(
      {Call(NamedInput("tokens", {nullptr, 5, 8}), {}),
       Call(Attention("mha", 2, 3, 4, nullptr, bias), {"tokens", "tokens"},
            {{"use_causal_mask", true}}),
       Call(Layer("Add", {{"name", "add"}}), {"tokens", "mha"}),
       Call(LayerNorm("norm", -1), {"add"}),
       Call(Layer("GlobalAveragePooling1D", {{"name", "mean"}, {"data_format", "channels_last"}}),
            {"norm"}),
       Call(testing::Dense("out", 3, "linear"), {"mean"})},
      {"tokens"}, "out");
}

// Cross-attention of a query sequence over another of other features and
// steps, through a mask input, to an output_shape of its own.
Json CrossAttentionModel() {
  return Model(
      {Call(NamedInput("q", {nullptr, 4, 6}), {}), Call(NamedInput("kv", {nullptr, 5, 7}), {}),
       Call(NamedInput("mask", {nullptr, 4, 5}), {}),
       Call(Attention("cross", 2, 3, 2, 5), {"q", "kv"}, {{"attention_mask", Tensor("mask")}}),
       Call(Layer("Flatten", {{"name", "flat"}, {"data_format", "channels_last"}}), {"cross"}),
       Call(testing::Dense("out", 2, "linear"), {"flat"})},
      {"q", "kv", "mask"}, "out");
}

TEST(KerasSequenceTest, MultiHeadAttentionHasKerasVariablesAndSublayers) {
  auto m = Parse(SelfAttentionModel());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(
      Variables(*m),
      ElementsAre("mha/query/kernel [8,2,3]", "mha/query/bias [2,3]", "mha/key/kernel [8,2,3]",
                  "mha/key/bias [2,3]", "mha/value/kernel [8,2,4]", "mha/value/bias [2,4]",
                  "mha/attention_output/kernel [2,4,8]", "mha/attention_output/bias [8]",
                  "norm/gamma [8]", "norm/beta [8]", "out/kernel [8,3]", "out/bias [3]"));
  const auto& row = m->summary()[0];  // the inputs have no row
  EXPECT_EQ(row.keras_class, "MultiHeadAttention");
  EXPECT_EQ(row.output, (Shape{5, 8}));
  EXPECT_EQ(row.params, 8 * 6 * 2 + 8 * 8 + 8 * 8 + 6 * 2 + 8 + 8);
  EXPECT_THAT(VariablePaths(*m),
              ::testing::IsSupersetOf({"layers/multi_head_attention/query_dense/vars/0",
                                       "layers/multi_head_attention/query_dense/vars/1",
                                       "layers/multi_head_attention/output_dense/vars/1"}));
  auto no_bias = Parse(SelfAttentionModel(/*bias=*/false));
  ASSERT_TRUE(no_bias.ok()) << no_bias.status();
  EXPECT_THAT(VariablePaths(*no_bias),
              ::testing::IsSupersetOf({"layers/multi_head_attention/value_dense/vars/0",
                                       "layers/multi_head_attention/output_dense/vars/0"}));
  auto cross = Parse(CrossAttentionModel());
  ASSERT_TRUE(cross.ok()) << cross.status();
  EXPECT_EQ(cross->summary()[0].output, (Shape{4, 5}));
}

TEST(KerasSequenceTest, GradientsThroughCausalSelfAttentionMatchCentralDifferences) {
  CheckGradients(SelfAttentionModel(), 3);
}

// One head (its axes of 1 are contracted by the output projection all the
// same), a key other than the value, an output_shape of two axes, a causal
// mask and one from an input together, and a null call argument as some
// Keras versions write them.
TEST(KerasSequenceTest, OneHeadCausalAndMaskedWithItsOwnKey) {
  Json kwargs = {{"key", Tensor("k")},
                 {"attention_mask", Tensor("mask")},
                 {"use_causal_mask", true},
                 {"query_mask", nullptr}};
  const Json config = Model(
      {Call(NamedInput("q", {nullptr, 4, 6}), {}), Call(NamedInput("v", {nullptr, 4, 5}), {}),
       Call(NamedInput("k", {nullptr, 4, 3}), {}), Call(NamedInput("mask", {nullptr, 4, 4}), {}),
       Call(Attention("one", 1, 3, 2, {2, 3}), {"q", "v"}, kwargs),
       Call(Layer("Flatten", {{"name", "flat"}, {"data_format", "channels_last"}}), {"one"}),
       Call(testing::Dense("out", 2, "linear"), {"flat"})},
      {"q", "v", "k", "mask"}, "out");
  auto m = Parse(config);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->summary()[0].output, (Shape{4, 2, 3}));
  EXPECT_EQ(Variables(*m)[6], "one/attention_output/kernel [1,2,2,3]");
  EXPECT_TRUE(m->inputs()[3].mask);
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok()) << exec.status();
  const auto params = m->Initialize(4);
  std::mt19937 rng(2);
  const int64_t per = 4 * 6 + 4 * 5 + 4 * 3 + 4 * 4;
  std::vector<float> x(2 * per);
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  for (int e = 0; e < 2; ++e) {  // the mask lets every query see key 0, and odd keys
    float* mask = x.data() + e * per + per - 16;
    for (int j = 0; j < 16; ++j) mask[j] = (j % 4 == 0 || j % 2 == 1) ? 1.0f : 0.0f;
  }
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {0, 1}, LossOptions{}, params, 2);
}

// RepeatVector of a Flatten's output, and a Dense on each of its steps.
TEST(KerasSequenceTest, ARepeatedFlattenAndAnEinsumDenseOfRepeatedLettersIsRefused) {
  auto m = Parse(Sequential(
      {Input({nullptr, 2, 3}),
       Layer("Flatten", {{"name", "flat"}, {"data_format", "channels_last"}}),
       Layer("RepeatVector", {{"name", "repeat"}, {"n", 3}}), SeqDense("per_step", 2, "tanh"),
       Layer("Flatten", {{"name", "flat2"}, {"data_format", "channels_last"}}),
       testing::Dense("out", 2, "linear")}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->summary()[1].output, (Shape{3, 6}));
  CheckGradients(
      Sequential({Input({nullptr, 2, 3}),
                  Layer("Flatten", {{"name", "flat"}, {"data_format", "channels_last"}}),
                  Layer("RepeatVector", {{"name", "repeat"}, {"n", 3}}),
                  SeqDense("per_step", 2, "tanh"),
                  Layer("Flatten", {{"name", "flat2"}, {"data_format", "channels_last"}}),
                  testing::Dense("out", 2, "linear")}),
      2);
  auto bad = Parse(Sequential(
      {Input({nullptr, 4, 4}), Einsum("e", "abc,cc->abc", {nullptr, 4}, nullptr, "linear")}));
  EXPECT_THAT(bad.status().message(), HasSubstr("(a letter repeated"));
}

// With a mask input each query attends to the keys its row allows: the
// masked keys' values change nothing.
TEST(KerasSequenceTest, CrossAttentionThroughAMaskInput) {
  auto m = Parse(CrossAttentionModel());
  ASSERT_TRUE(m.ok()) << m.status();
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok()) << exec.status();
  const auto params = m->Initialize(3);
  std::mt19937 rng(9);
  // Two examples packed as q (4x6), kv (5x7), mask (4x5): every query may
  // attend to keys 0 and 2, and query 1 to key 4 too.
  const int64_t per = 4 * 6 + 5 * 7 + 4 * 5;
  std::vector<float> x(2 * per);
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  for (int e = 0; e < 2; ++e) {
    float* mask = x.data() + e * per + 4 * 6 + 5 * 7;
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 5; ++j) mask[i * 5 + j] = (j == 0 || j == 2 || (i == 1 && j == 4));
    }
  }
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  std::vector<float> out, again;
  ASSERT_TRUE((*exec)->Predict(x, &out).ok());
  std::vector<float> changed = x;
  for (int e = 0; e < 2; ++e) {  // key/value step 3: masked for every query
    for (int f = 0; f < 7; ++f) changed[e * per + 4 * 6 + 3 * 7 + f] += 5.0f;
  }
  ASSERT_TRUE((*exec)->Predict(changed, &again).ok());
  EXPECT_EQ(out, again);
  for (int e = 0; e < 2; ++e) {  // step 4: query 1 attends to it
    for (int f = 0; f < 7; ++f) changed[e * per + 4 * 6 + 4 * 7 + f] += 5.0f;
  }
  ASSERT_TRUE((*exec)->Predict(changed, &again).ok());
  EXPECT_NE(out, again);
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {0, 1}, LossOptions{}, params, 3);
}

Json Lstm(const std::string& name, int units, bool sequences, bool backwards = false) {
  return Layer("LSTM", {{"name", name},
                        {"units", units},
                        {"activation", "tanh"},
                        {"recurrent_activation", "sigmoid"},
                        {"use_bias", true},
                        {"unit_forget_bias", true},
                        {"return_sequences", sequences},
                        {"return_state", false},
                        {"go_backwards", backwards},
                        {"stateful", false},
                        {"unroll", false},
                        {"dropout", 0.0},
                        {"recurrent_dropout", 0.0}});
}

// Two LSTMs, the second going backwards over the first's sequence, and a
// Bidirectional LSTM of every merge mode over the steps.
Json LstmModel() {
  return Sequential({Input({nullptr, 6, 3}), Lstm("first", 4, true), Lstm("second", 5, false, true),
                     testing::Dense("out", 2, "linear")});
}
Json BidirectionalModel(const std::string& mode) {
  Json inner = Lstm("forward_lstm", 3, true);
  Json backward = Lstm("backward_lstm", 3, true, true);
  return Sequential(
      {Input({nullptr, 5, 2}),
       Layer(
           "Bidirectional",
           {{"name", "bi"}, {"merge_mode", mode}, {"layer", inner}, {"backward_layer", backward}}),
       Layer("GlobalAveragePooling1D", {{"name", "mean"}}), testing::Dense("out", 2, "linear")});
}

TEST(KerasSequenceTest, LstmHasKerasVariablesAndTheForgetGateBias) {
  auto m = Parse(LstmModel());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(
      Variables(*m),
      ElementsAre("first/lstm_cell/kernel [3,16]", "first/lstm_cell/recurrent_kernel [4,16]",
                  "first/lstm_cell/bias [16]", "second/lstm_cell/kernel [4,20]",
                  "second/lstm_cell/recurrent_kernel [5,20]", "second/lstm_cell/bias [20]",
                  "out/kernel [5,2]", "out/bias [2]"));
  EXPECT_EQ(m->summary()[0].output, (Shape{6, 4}));
  EXPECT_EQ(m->summary()[0].params, 4 * 4 * (3 + 4 + 1));
  EXPECT_THAT(VariablePaths(*m),
              ::testing::IsSupersetOf({"layers/lstm/cell/vars/2", "layers/lstm_1/cell/vars/0"}));
  const auto params = m->Initialize(1);
  EXPECT_EQ(params[2][4], 1.0f);  // the forget gate's bias
  EXPECT_EQ(params[2][3], 0.0f);
  auto bi = Parse(BidirectionalModel("concat"));
  ASSERT_TRUE(bi.ok()) << bi.status();
  EXPECT_EQ(bi->summary()[0].output, (Shape{5, 6}));
  EXPECT_THAT(VariablePaths(*bi),
              ::testing::IsSupersetOf({"layers/bidirectional/forward_layer/cell/vars/0",
                                       "layers/bidirectional/backward_layer/cell/vars/2"}));
  EXPECT_EQ(Variables(*bi)[3], "bi/backward_lstm/lstm_cell/kernel [2,12]");
}

Json Gru(const std::string& name, int units, bool sequences, bool backwards = false) {
  return Layer("GRU", {{"name", name},
                       {"units", units},
                       {"activation", "tanh"},
                       {"recurrent_activation", "sigmoid"},
                       {"use_bias", true},
                       {"reset_after", true},
                       {"return_sequences", sequences},
                       {"go_backwards", backwards}});
}

// A GRU going backwards over a GRU's sequence, and a Bidirectional GRU.
Json GruModel() {
  return Sequential({Input({nullptr, 6, 3}), Gru("first", 4, true), Gru("second", 5, false, true),
                     testing::Dense("out", 2, "linear")});
}

TEST(KerasSequenceTest, GruHasKerasVariablesAndGradientsMatchCentralDifferences) {
  auto m = Parse(GruModel());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(Variables(*m),
              ElementsAre("first/gru_cell/kernel [3,12]", "first/gru_cell/recurrent_kernel [4,12]",
                          "first/gru_cell/bias [2,12]", "second/gru_cell/kernel [4,15]",
                          "second/gru_cell/recurrent_kernel [5,15]", "second/gru_cell/bias [2,15]",
                          "out/kernel [5,2]", "out/bias [2]"));
  EXPECT_EQ(m->summary()[0].params, 3 * 4 * (3 + 4 + 2));
  EXPECT_THAT(VariablePaths(*m), ::testing::IsSupersetOf({"layers/gru/cell/vars/2"}));
  CheckGradients(GruModel(), 2);
  Json bi = Layer("Bidirectional", {{"name", "bi"},
                                    {"merge_mode", "concat"},
                                    {"layer", Gru("forward_gru", 3, false)},
                                    {"backward_layer", Gru("backward_gru", 3, false, true)}});
  CheckGradients(Sequential({Input({nullptr, 5, 2}), bi, testing::Dense("out", 2, "linear")}), 2);
}

// GRU(reset_after=False): one bias [3U]; the reset gate applied to h_prev
// before the candidate's product with the recurrent kernel.
TEST(KerasSequenceTest, GruResetBeforeHasKerasVariablesAndGradientsMatchCentralDifferences) {
  Json first = Gru("first", 4, true), second = Gru("second", 5, false, true);
  first["config"]["reset_after"] = second["config"]["reset_after"] = false;
  const Json model =
      Sequential({Input({nullptr, 6, 3}), first, second, testing::Dense("out", 2, "linear")});
  auto m = Parse(model);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(Variables(*m),
              ElementsAre("first/gru_cell/kernel [3,12]", "first/gru_cell/recurrent_kernel [4,12]",
                          "first/gru_cell/bias [12]", "second/gru_cell/kernel [4,15]",
                          "second/gru_cell/recurrent_kernel [5,15]", "second/gru_cell/bias [15]",
                          "out/kernel [5,2]", "out/bias [2]"));
  EXPECT_EQ(m->summary()[0].params, 3 * 4 * (3 + 4 + 1));
  CheckGradients(model, 2);
}

Json SimpleRnn(const std::string& name, int units, const std::string& act, bool sequences,
               bool backwards = false) {
  return Layer("SimpleRNN", {{"name", name},
                             {"units", units},
                             {"activation", act},
                             {"use_bias", true},
                             {"return_sequences", sequences},
                             {"go_backwards", backwards}});
}

// SimpleRNN of each kind of activation (of its output, of its input, none),
// and a Bidirectional one.
TEST(KerasSequenceTest, SimpleRnnHasKerasVariablesAndGradientsMatchCentralDifferences) {
  const Json model =
      Sequential({Input({nullptr, 6, 3}), SimpleRnn("first", 4, "tanh", true),
                  SimpleRnn("second", 4, "gelu", true, true),
                  SimpleRnn("third", 5, "linear", false), testing::Dense("out", 2, "linear")});
  auto m = Parse(model);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(Variables(*m),
              ::testing::IsSupersetOf({"first/simple_rnn_cell/kernel [3,4]",
                                       "first/simple_rnn_cell/recurrent_kernel [4,4]",
                                       "first/simple_rnn_cell/bias [4]"}));
  EXPECT_EQ(m->summary()[0].params, 4 * (3 + 4 + 1));
  EXPECT_THAT(VariablePaths(*m), ::testing::IsSupersetOf({"layers/simple_rnn/cell/vars/2"}));
  CheckGradients(model, 2);
  Json bi =
      Layer("Bidirectional", {{"name", "bi"},
                              {"merge_mode", "sum"},
                              {"layer", SimpleRnn("forward_simple_rnn", 3, "sigmoid", false)}});
  auto b = Parse(Sequential({Input({nullptr, 5, 2}), bi, testing::Dense("out", 2, "linear")}));
  ASSERT_TRUE(b.ok()) << b.status();
  // No backward_layer: Keras 3's copy of the forward one, named as it names
  // it (a Keras 3 config always has both; a Keras 2 one "backward_" + the
  // layer's name).
  EXPECT_THAT(Variables(*b),
              ::testing::Contains("bi/backward_forward_simple_rnn/simple_rnn_cell/bias [3]"));
  CheckGradients(Sequential({Input({nullptr, 5, 2}), bi, testing::Dense("out", 2, "linear")}), 2);
  // A backward layer of another class, as Keras allows.
  Json mixed = bi;
  mixed["config"]["backward_layer"] = Gru("backward_gru", 3, false, true);
  auto mm = Parse(Sequential({Input({nullptr, 5, 2}), mixed, testing::Dense("out", 2, "linear")}));
  ASSERT_TRUE(mm.ok()) << mm.status();
  EXPECT_THAT(Variables(*mm), ::testing::Contains("bi/backward_gru/gru_cell/bias [2,9]"));
  CheckGradients(Sequential({Input({nullptr, 5, 2}), mixed, testing::Dense("out", 2, "linear")}),
                 2);
  Json unsupported = SimpleRnn("r", 2, "tanh", false);
  unsupported["config"]["recurrent_dropout"] = 0.5;
  EXPECT_THAT(Parse(Sequential({Input({nullptr, 5, 2}), unsupported})).status().message(),
              HasSubstr("recurrent_dropout"));
}

// keras.Input(shape=(None, ...)): the open length is the data's, in every
// place the config declares it; a declared dimension the data disagrees
// with, another rank, or no data at all is an error naming the input.
TEST(KerasSequenceTest, AnOpenLengthIsFixedFromTheData) {
  int calls = 0;
  auto data = [&](Shape shape) {
    return [&calls, shape](const std::string&, bool only) -> absl::StatusOr<Shape> {
      ++calls;
      EXPECT_TRUE(only);
      return shape;
    };
  };
  Json seq = Sequential(
      {Input({nullptr, nullptr, 3}), Lstm("rnn", 4, false), SeqDense("out", 2, "linear")});
  seq["config"]["build_input_shape"] = {nullptr, nullptr, 3};
  EXPECT_THAT(std::string(Parse(seq).status().message()), HasSubstr("has a None dimension"));
  auto fixed = FixOpenInputDims(seq.dump(), "m.keras", data({7, 3}));
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  const Json j = Json::parse(*fixed);
  EXPECT_EQ(j["config"]["build_input_shape"], Json({nullptr, 7, 3}));
  EXPECT_EQ(j["config"]["layers"][0]["config"]["batch_shape"], Json({nullptr, 7, 3}));
  auto m = ModelFromKerasConfig(*fixed, "m.keras");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->input_shape(), ElementsAre(7, 3));
  EXPECT_EQ(calls, 1);

  // A declared shape that is not a list is left to the reader to refuse.
  Json odd = seq;
  odd["config"]["build_input_shape"] = {{"a", 1}, {"b", 2}};
  auto odd_fixed = FixOpenInputDims(odd.dump(), "m.keras", data({7, 3}));
  ASSERT_TRUE(odd_fixed.ok()) << odd_fixed.status();
  EXPECT_EQ(Json::parse(*odd_fixed)["config"]["layers"][0]["config"]["batch_shape"],
            Json({nullptr, 7, 3}));
  EXPECT_EQ(calls, 2);

  // A declared length is left alone, and the data not asked for.
  const std::string closed = LstmModel().dump();
  auto same = FixOpenInputDims(closed, "m.keras", data({99, 3}));
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, closed);
  EXPECT_EQ(calls, 2);

  auto message = [&](const InputDataShape& d) {
    absl::StatusOr<std::string> s = FixOpenInputDims(seq.dump(), "m.keras", d);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.status().message());
  };
  EXPECT_THAT(message(data({7, 4})),
              HasSubstr("the input \"input_layer\" declares the example shape (None, 3) "
                        "and its data's examples are (7, 4)"));
  EXPECT_THAT(message(data({7})), HasSubstr("(7,): not of one rank"));
  EXPECT_THAT(message(nullptr), HasSubstr("here there is no data"));
  EXPECT_THAT(message([](const std::string&, bool) -> absl::StatusOr<Shape> {
                return absl::InvalidArgumentError("d.npz has no array 'x_train'");
              }),
              HasSubstr("has no array"));

  // A functional model of two inputs asks for each open one by name.
  Json two = Model(
      {Call(NamedInput("q", {nullptr, nullptr, 6}), {}),
       Call(NamedInput("kv", {nullptr, 5, 7}), {}), Call(Attention("mha", 2, 3, 2, 5), {"q", "kv"}),
       Call(Layer("GlobalAveragePooling1D",
                  {{"name", "pool"}, {"data_format", "channels_last"}, {"keepdims", false}}),
            {"mha"}),
       Call(SeqDense("out", 2, "linear"), {"pool"})},
      {"q", "kv"}, "out");
  std::vector<std::string> asked;
  auto named = FixOpenInputDims(two.dump(), "m.keras",
                                [&](const std::string& name, bool only) -> absl::StatusOr<Shape> {
                                  EXPECT_FALSE(only);
                                  asked.push_back(name);
                                  return Shape{4, 6};
                                });
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_THAT(asked, ElementsAre("q"));
  auto two_model = ModelFromKerasConfig(*named, "m.keras");
  ASSERT_TRUE(two_model.ok()) << two_model.status();
  EXPECT_EQ(ShapeText(two_model->inputs()[0].shape), ShapeText({4, 6}));
}

// return_state=True in a functional model: the state h (output 1) is the
// last step of the returned sequence, or the output itself; gradients
// through it match central differences. An LSTM's c, a Bidirectional's
// states and a Sequential's are exit 2.
TEST(KerasSequenceTest, ReturnedStateHIsTheLastStep) {
  auto at = [](const std::string& layer, int index) {
    return Json{{"class_name", "__keras_tensor__"},
                {"config", {{"shape", {nullptr}}, {"keras_history", {layer, 0, index}}}}};
  };
  auto call = [&](Json layer, const std::vector<Json>& args) {
    layer["name"] = layer["config"]["name"];
    Json a = Json::array();
    for (const Json& t : args) a.push_back(t);
    layer["inbound_nodes"] = Json::array({{{"args", a}, {"kwargs", Json::object()}}});
    return layer;
  };
  Json lstm = Lstm("lstm", 4, true);
  lstm["config"]["return_state"] = true;
  Json gru = Gru("gru", 3, false);
  gru["config"]["return_state"] = true;
  auto model = [&](const Json& last_state) {
    return Model({Call(NamedInput("x", {nullptr, 6, 3}), {}), call(lstm, {at("x", 0)}),
                  call(gru, {at("lstm", 0)}),
                  call(Layer("Concatenate", {{"name", "cat"}, {"axis", -1}}),
                       {at("lstm", 1), last_state, at("gru", 0)}),
                  call(testing::Dense("out", 2, "linear"), {at("cat", 0)})},
                 {"x"}, "out");
  };
  const Json m = model(at("gru", 1));
  auto parsed = Parse(m);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->graph().tensor(parsed->graph().num_tensors() - 2).shape, Shape({4 + 3 + 3}));
  CheckGradients(m, 2);

  // h is the sequence's last step: the model of h alone predicts what a
  // model of the sequence's last step, through the same weights, does.
  auto alone = Parse(Model({Call(NamedInput("x", {nullptr, 6, 3}), {}), call(lstm, {at("x", 0)}),
                            call(testing::Dense("out", 2, "linear"), {at("lstm", 1)})},
                           {"x"}, "out"));
  Json last = Lstm("lstm", 4, false);
  auto plain =
      Parse(Sequential({Input({nullptr, 6, 3}), last, testing::Dense("out", 2, "linear")}));
  ASSERT_TRUE(alone.ok() && plain.ok()) << alone.status() << plain.status();
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto ae = Executor::Create(&*alone, backend->get());
  auto pe = Executor::Create(&*plain, backend->get());
  ASSERT_TRUE(ae.ok() && pe.ok());
  const auto params = plain->Initialize(4);
  ASSERT_TRUE((*ae)->SetParameters(params).ok());
  ASSERT_TRUE((*pe)->SetParameters(params).ok());
  std::vector<float> x(2 * 6 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i));
  std::vector<float> want, got;
  ASSERT_TRUE((*pe)->Predict(x, &want).ok());
  ASSERT_TRUE((*ae)->Predict(x, &got).ok());
  EXPECT_EQ(got, want);

  EXPECT_THAT(std::string(Parse(model(at("lstm", 2))).status().message()),
              HasSubstr("its cell state c (return_state's third output) is taken: not supported"));
  EXPECT_THAT(std::string(Parse(model(at("gru", 2))).status().message()),
              HasSubstr("it has outputs 0 to 1"));
  EXPECT_THAT(std::string(Parse(model(at("x", 1))).status().message()),
              HasSubstr("it has one output"));
  EXPECT_THAT(std::string(Parse(model(at("gru", -1))).status().message()),
              HasSubstr("is not an integer in [0, 1024)"));
  EXPECT_THAT(std::string(Parse(model(at("gru", 5000))).status().message()),
              HasSubstr("is not an integer in [0, 1024)"));

  // A GRU going backwards: h is the step its loop ends on, the output of
  // the same GRU without return_sequences.
  Json back = Gru("gru", 3, true, true);
  back["config"]["return_state"] = true;
  auto back_h = Parse(Model({Call(NamedInput("x", {nullptr, 6, 3}), {}), call(back, {at("x", 0)}),
                             call(testing::Dense("out", 2, "linear"), {at("gru", 1)})},
                            {"x"}, "out"));
  auto back_plain = Parse(Sequential(
      {Input({nullptr, 6, 3}), Gru("gru", 3, false, true), testing::Dense("out", 2, "linear")}));
  ASSERT_TRUE(back_h.ok() && back_plain.ok()) << back_h.status() << back_plain.status();
  auto bh = Executor::Create(&*back_h, backend->get());
  auto bp = Executor::Create(&*back_plain, backend->get());
  ASSERT_TRUE(bh.ok() && bp.ok());
  const auto back_params = back_plain->Initialize(5);
  ASSERT_TRUE((*bh)->SetParameters(back_params).ok());
  ASSERT_TRUE((*bp)->SetParameters(back_params).ok());
  ASSERT_TRUE((*bp)->Predict(x, &want).ok());
  ASSERT_TRUE((*bh)->Predict(x, &got).ok());
  EXPECT_EQ(got, want);
  Json second = Lstm("second", 4, false);  // started from the first's state
  Json started = call(second, {at("lstm", 0)});
  started["inbound_nodes"][0]["kwargs"] = {{"initial_state", {at("lstm", 1), at("lstm", 1)}}};
  EXPECT_THAT(std::string(Parse(Model({Call(NamedInput("x", {nullptr, 6, 3}), {}),
                                       call(lstm, {at("x", 0)}), started,
                                       call(testing::Dense("out", 2, "linear"), {at("second", 0)})},
                                      {"x"}, "out"))
                              .status()
                              .message()),
              HasSubstr("initial_state, constants): the state starts at zeros here"));
  EXPECT_THAT(std::string(Parse(Sequential({Input({nullptr, 6, 3}), lstm})).status().message()),
              HasSubstr("return_state=True in a Bidirectional or a Sequential model"));
}

TEST(KerasSequenceTest, GradientsThroughLstmsMatchCentralDifferences) {
  CheckGradients(LstmModel(), 2);
  for (const std::string mode : {"concat", "sum", "ave", "mul"}) {
    SCOPED_TRACE(mode);
    CheckGradients(BidirectionalModel(mode), 2);
  }
}

// Masks (Embedding(mask_zero=True), Masking): a model over 5 steps whose
// masked steps are padding predicts what the same model, with the same
// variables, predicts over the 3 real steps alone, wherever the padding
// is: the recurrent layers keep their state over a masked step,
// attention attends to kept keys only, and the masked mean averages the
// kept steps.
Json MaskedLayers(const std::string& kind, int steps, bool masking) {
  std::vector<Json> layers = {Call(NamedInput("x", {nullptr, steps, 2}), {})};
  std::string last = "x";
  if (masking) {
    layers.push_back(Call(Layer("Masking", {{"name", "masking"}, {"mask_value", 0.0}}), {"x"}));
    last = "masking";
  }
  auto add = [&](Json layer, std::vector<std::string> args, Json kwargs = Json::object()) {
    last = layer["config"]["name"].get<std::string>();
    layers.push_back(Call(std::move(layer), args, std::move(kwargs)));
  };
  if (kind == "lstm") {
    add(Lstm("first", 3, true), {last});
    add(Lstm("second", 4, false), {last});
  } else if (kind == "gru_simple_rnn") {  // reset_after=False, then a SimpleRNN
    Json gru = Gru("first", 3, true);
    gru["config"]["reset_after"] = false;
    add(gru, {last});
    add(SimpleRnn("second", 4, "tanh", false), {last});
  } else if (kind == "bigru") {  // zeros at a masked step of the sequences, then the masked mean
    add(Layer("Bidirectional", {{"name", "bi"},
                                {"merge_mode", "concat"},
                                {"layer", Gru("forward_gru", 3, true)},
                                {"backward_layer", Gru("backward_gru", 3, true, true)}}),
        {last});
    add(Layer("GlobalAveragePooling1D", {{"name", "mean"}, {"data_format", "channels_last"}}),
        {last});
  } else {  // attention over the kept steps; a Dense and an Add pass the mask on
    const std::string in = last;
    add(testing::Dense("proj", 4, "tanh"), {in});
    const std::string proj = last;
    add(Attention("mha", 2, 3, 3, nullptr), {proj, proj});
    add(Layer("Add", {{"name", "add"}}), {proj, last});
    add(Layer("GlobalAveragePooling1D", {{"name", "mean"}, {"data_format", "channels_last"}}),
        {last});
  }
  add(testing::Dense("out", 2, "linear"), {last});
  return Model(layers, {"x"}, "out");
}

TEST(KerasSequenceTest, MaskedStepsAreAsIfAbsent) {
  for (const std::string kind : {"lstm", "gru_simple_rnn", "bigru", "attention"}) {
    SCOPED_TRACE(kind);
    auto padded = Parse(MaskedLayers(kind, 5, true));
    auto alone = Parse(MaskedLayers(kind, 3, false));
    ASSERT_TRUE(padded.ok()) << padded.status();
    ASSERT_TRUE(alone.ok()) << alone.status();
    ASSERT_EQ(Variables(*padded), Variables(*alone));
    auto backend = CreateCpuBackend(1);
    ASSERT_TRUE(backend.ok());
    auto pe = Executor::Create(&*padded, backend->get());
    auto ae = Executor::Create(&*alone, backend->get());
    ASSERT_TRUE(pe.ok() && ae.ok());
    auto params = padded->Initialize(3);
    ASSERT_TRUE((*pe)->SetParameters(params).ok());
    ASSERT_TRUE((*ae)->SetParameters(params).ok());
    // Three examples of 3 steps, each padded to 5 its own way: at the end,
    // at the start, around.
    std::mt19937 rng(8);
    std::vector<float> real(3 * 3 * 2), x(3 * 5 * 2, 0.0f);
    for (float& v : real) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f + 0.0005f;
    const int first[3] = {0, 2, 1};
    for (int e = 0; e < 3; ++e) {
      for (int t = 0; t < 3; ++t) {
        for (int f = 0; f < 2; ++f) x[(e * 5 + first[e] + t) * 2 + f] = real[(e * 3 + t) * 2 + f];
      }
    }
    std::vector<float> want, got;
    ASSERT_TRUE((*ae)->Predict(real, &want).ok());
    ASSERT_TRUE((*pe)->Predict(x, &got).ok());
    ASSERT_EQ(got.size(), want.size());
    // Predictions equal, wherever the padding is.
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-5) << i;
    // And the gradients through the masked steps match central differences.
    ExpectGradientsMatchCentralDifferences(pe->get(), *padded, x, {0, 1, 0}, LossOptions{}, params,
                                           2);
  }
}

TEST(KerasSequenceTest, EmbeddingMaskZeroReachesTheLayersKerasPassesItTo) {
  // Ids with 0 as padding: the mask passes the Dense and reaches the LSTM;
  // a Conv1D drops it (as Keras does), so a mean after it is unmasked.
  auto ids = [](const std::string& tail) {
    std::vector<Json> layers = {
        Call(Layer("InputLayer",
                   {{"batch_shape", {nullptr, 6}}, {"dtype", "int32"}, {"name", "ids"}}),
             {}),
        Call(Layer("Embedding",
                   {{"name", "emb"}, {"input_dim", 9}, {"output_dim", 4}, {"mask_zero", true}}),
             {"ids"}),
        Call(testing::Dense("d", 4, "tanh"), {"emb"})};
    if (tail == "lstm") {
      layers.push_back(Call(Lstm("rnn", 3, false), {"d"}));
      layers.push_back(Call(testing::Dense("out", 2, "linear"), {"rnn"}));
    } else if (tail == "conv") {
      layers.push_back(Call(Conv1D("conv", 3, 2, "same", 1, 1, "relu"), {"d"}));
      layers.push_back(Call(
          Layer("GlobalAveragePooling1D", {{"name", "mean"}, {"data_format", "channels_last"}}),
          {"conv"}));
      layers.push_back(Call(testing::Dense("out", 2, "linear"), {"mean"}));
    } else {  // the mask reaches the output: refused
      layers.push_back(Call(testing::Dense("out", 2, "linear"), {"d"}));
    }
    return Model(layers, {"ids"}, "out");
  };
  auto lstm = Parse(ids("lstm"));
  ASSERT_TRUE(lstm.ok()) << lstm.status();
  const auto& layers = lstm->layers();
  auto rnn = std::find_if(layers.begin(), layers.end(),
                          [](const compute::LayerSpec& l) { return l.name == "rnn"; });
  ASSERT_NE(rnn, layers.end());
  EXPECT_EQ(rnn->sources.size(), 2u);
  auto conv = Parse(ids("conv"));
  ASSERT_TRUE(conv.ok()) << conv.status();
  for (const compute::LayerSpec& l : conv->layers()) {
    EXPECT_NE(l.kind, compute::LayerSpec::kMaskedMean) << l.name;
  }
  EXPECT_THAT(Parse(ids("output")).status().message(),
              HasSubstr("reaches the model's output, where Keras would mask the loss"));
  // The padding's row of the table (id 0) does not reach the LSTM's
  // output; a kept id's row does.
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*lstm, backend->get());
  ASSERT_TRUE(exec.ok());
  auto params = lstm->Initialize(4);
  ASSERT_EQ(lstm->variables()[0].name, "emb/embeddings");
  const std::vector<float> x = {3, 1, 4, 1, 0, 0, 0, 0, 2, 5, 6, 7};
  auto predict = [&](const std::vector<std::vector<float>>& p) {
    std::vector<float> out;
    EXPECT_TRUE((*exec)->SetParameters(p).ok());
    EXPECT_TRUE((*exec)->Predict(x, &out).ok());
    return out;
  };
  const std::vector<float> base = predict(params);
  auto row0 = params, row3 = params;
  for (int f = 0; f < 4; ++f) {
    row0[0][f] += 0.5f;
    row3[0][3 * 4 + f] += 0.5f;
  }
  EXPECT_EQ(predict(row0), base);
  EXPECT_NE(predict(row3), base);
}

// Keras's runtime clears the masks of the tensors a MultiHeadAttention
// takes: a residual Add of its query then has none (an OR with none), so a
// second block's attention is unmasked; the masked mean still gets the
// mask Keras's saved graph records for it (its mask=, here a LogicalOr op
// layer), and an LSTM with zero_output_for_mask returning its last step is
// refused.
TEST(KerasSequenceTest, AttentionClearsTheMasksOfItsInputsAsKerasRuns) {
  auto ids = Call(
      Layer("InputLayer", {{"batch_shape", {nullptr, 6}}, {"dtype", "int32"}, {"name", "ids"}}),
      {});
  auto emb =
      Call(Layer("Embedding",
                 {{"name", "emb"}, {"input_dim", 9}, {"output_dim", 4}, {"mask_zero", true}}),
           {"ids"});
  Json op = Call(Layer("LogicalOr", {{"name", "logical_or"}}), {"emb", "emb"});
  op["module"] = "keras.src.ops.numpy";
  Json mean =
      Call(Layer("GlobalAveragePooling1D", {{"name", "mean"}, {"data_format", "channels_last"}}),
           {"norm2"}, {{"mask", Tensor("logical_or")}});
  auto m = Parse(Model({ids, emb, Call(Attention("mha1", 2, 2, 2, nullptr), {"emb", "emb"}),
                        Call(Layer("Add", {{"name", "add1"}}), {"emb", "mha1"}),
                        Call(LayerNorm("norm1", -1), {"add1"}),
                        Call(Attention("mha2", 2, 2, 2, nullptr), {"norm1", "norm1"}),
                        Call(Layer("Add", {{"name", "add2"}}), {"norm1", "mha2"}),
                        Call(LayerNorm("norm2", -1), {"add2"}), op, mean,
                        Call(testing::Dense("out", 2, "linear"), {"mean"})},
                       {"ids"}, "out"));
  ASSERT_TRUE(m.ok()) << m.status();
  auto find = [&](const std::string& name) -> const compute::LayerSpec* {
    for (const compute::LayerSpec& l : m->layers()) {
      if (l.name == name) return &l;
    }
    return nullptr;
  };
  ASSERT_NE(find("mha1/mask"), nullptr);
  EXPECT_TRUE(find("mha1/mask")->query_mask && find("mha1/mask")->value_mask);
  EXPECT_EQ(find("mha2/mask"), nullptr);  // unmasked, no causal mask
  ASSERT_NE(find("mean"), nullptr);
  EXPECT_EQ(find("mean")->kind, compute::LayerSpec::kMaskedMean);

  Json last = Lstm("rnn", 3, false);
  last["config"]["zero_output_for_mask"] = true;
  EXPECT_THAT(Parse(Model({ids, emb, Call(last, {"emb"}),
                           Call(testing::Dense("out", 2, "linear"), {"rnn"})},
                          {"ids"}, "out"))
                  .status()
                  .message(),
              HasSubstr("zero_output_for_mask=True with a mask and return_sequences=False"));
}

// Masks where pscluster does not follow Keras: refused, naming the layer.
TEST(KerasSequenceTest, MasksItCannotFollowAreRefused) {
  auto masking = [](Json value) {
    return Layer("Masking", {{"name", "masking"}, {"mask_value", std::move(value)}});
  };
  const std::vector<std::pair<Json, std::string>> bad = {
      {Sequential({Input({nullptr, 5, 2}), masking("zero"), testing::Dense("out", 2, "linear")}),
       "layer \"masking\" (Masking): mask_value \"zero\" (a finite number is) is not supported"},
      {Sequential({Input({nullptr, 4, 4, 2}), masking(0.0)}),
       "Masking of [4,4,2] (supported: a (steps, features) sequence)"},
      {Sequential({Input({nullptr, 5, 2}), masking(0.0),
                   Layer("Softmax", {{"name", "soft"}, {"axis", -1}})}),
       "layer \"soft\" (Softmax): a Keras mask"},
      {Model({Call(NamedInput("x", {nullptr, 5, 2}), {}), Call(masking(0.0), {"x"}),
              Call(Layer("Concatenate", {{"name", "cat"}, {"axis", 1}}), {"masking", "masking"}),
              Call(Layer("GlobalAveragePooling1D", {{"name", "mean"}}), {"cat"}),
              Call(testing::Dense("out", 2, "linear"), {"mean"})},
             {"x"}, "out"),
       "a Concatenate of masked sequences along their steps"},
  };
  for (const auto& [config, message] : bad) {
    EXPECT_THAT(Parse(config).status().message(), HasSubstr(message)) << config.dump();
  }
}

TEST(KerasSequenceTest, UnsupportedOptionsAreErrorsNamingTheLayer) {
  auto pool = [](const std::string& cls) {
    return Layer(cls, {{"name", "p"}, {"pool_size", {2}}, {"padding", "valid"}});
  };
  const std::vector<std::pair<Json, std::string>> bad = {
      {Sequential({Input({nullptr, 8, 8, 3}), Conv1D("c", 2, 3, "valid", 1, 1, "relu")}),
       "layer \"c\" (Conv1D): needs a (steps, channels) input; it gets [8,8,3]"},
      {Sequential({Input({nullptr, 8, 3}), Conv1D("c", 2, 3, "full", 1, 1, "relu")}),
       "padding \"full\" (supported: valid, same, causal)"},
      {Sequential({Input({nullptr, 2, 3}), Conv1D("c", 2, 5, "valid", 1, 1, "relu")}),
       "window leaves no output of its [2,3] input"},
      {Sequential({Input({nullptr, 8}), pool("MaxPooling1D")}),
       "layer \"p\" (MaxPooling1D): needs a (steps, channels) input; it gets [8]"},
      {Sequential({Input({nullptr, 8, 3}), LayerNorm("n", 1)}),
       "axis 1 (supported: the last axes, e.g. -1 or [-2, -1])"},
      {Sequential({Input({nullptr, 8, 3}), LayerNorm("n", 3)}), "axis 3 is not axes of [8,3]"},
      {Sequential({Input({nullptr, 8, 3}),
                   Layer("LayerNormalization", {{"name", "n"}, {"rms_scaling", true}})}),
       "rms_scaling=True is not supported"},
      {Sequential(
           {Input({nullptr, 8, 3}), Einsum("e", "abc,dc->abd", {nullptr, 4}, nullptr, "linear")}),
       "equation \"abc,dc->abd\" (not a dense layer's form"},
      {Sequential(
           {Input({nullptr, 8, 3}), Einsum("e", "abc,cde->abde", {nullptr, 2, 4}, "d", "linear")}),
       "bias_axes \"d\" (supported: none, or \"de\""},
      {Sequential({Input({nullptr, 8, 3}), Einsum("e", "abc,cd->abd", nullptr, nullptr, "linear")}),
       "'output_shape' null does not give the kernel's 1 output axes"},
      {Sequential({Input({nullptr, 8, 3}), Layer("Permute", {{"name", "p"}, {"dims", {1, 1}}})}),
       "'dims' [1,1] is not a permutation of the axes 1..2 of [8,3]"},
      {Sequential({Input({nullptr, 8, 3}), Layer("RepeatVector", {{"name", "r"}, {"n", 2}})}),
       "layer \"r\" (RepeatVector): needs a (features,) input; it gets [8,3]"},
      {Sequential({Input({nullptr, 8, 3}), Layer("Softmax", {{"name", "s"}, {"axis", 0}})}),
       "axis 0 (supported: one axis of [8,3] but the batch) is not supported"},
      {Sequential({Input({nullptr, 8}), Lstm("l", 2, false)}),
       "layer \"l\" (LSTM): needs a (steps, features) input; it gets [8]"},
      {Sequential({Input({nullptr, 8, 3}), [] {
                     Json l = Lstm("l", 2, false);
                     l["config"]["activation"] = "relu";
                     return l;
                   }()}),
       "activation \"relu\" with recurrent_activation \"sigmoid\" (supported: tanh and "
       "sigmoid"},
      {Sequential({Input({nullptr, 8, 3}), [] {
                     Json l = Lstm("l", 2, false);
                     l["config"]["return_state"] = true;
                     return l;
                   }()}),
       "return_state=True in a Bidirectional or a Sequential model is not supported"},
      {Sequential({Input({nullptr, 8, 3}), [] {
                     Json l = Lstm("l", 2, false);
                     l["config"]["recurrent_dropout"] = 0.2;
                     return l;
                   }()}),
       "dropout or recurrent_dropout in an LSTM"},
      {Sequential({Input({nullptr, 8, 3}),
                   Layer("Bidirectional", {{"name", "bi"},
                                           {"merge_mode", nullptr},
                                           {"layer", Lstm("f", 2, true)}})}),
       "merge_mode=None (the two directions as two outputs) is not supported"},
  };
  for (const auto& [config, message] : bad) {
    auto r = Parse(config);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(r.status().message(), HasSubstr(message));
  }
  // MultiHeadAttention's call and options.
  auto attention = [](Json layer, Json kwargs, std::vector<std::string> args = {"t", "t"}) {
    return Model(
        {Call(NamedInput("t", {nullptr, 5, 8}), {}), Call(layer, args, kwargs),
         Call(Layer("Flatten", {{"name", "flat"}, {"data_format", "channels_last"}}), {"mha"}),
         Call(testing::Dense("out", 2, "linear"), {"flat"})},
        {"t"}, "out");
  };
  Json gated = Attention("mha", 2, 3, 3, nullptr);
  gated["config"]["use_gate"] = true;
  Json window = Attention("mha", 2, 3, 3, nullptr);
  window["config"]["sliding_window"] = 2;
  Json axes = Attention("mha", 2, 3, 3, nullptr);
  axes["config"]["attention_axes"] = {2};
  const std::vector<std::pair<Json, std::string>> calls = {
      {attention(Attention("mha", 2, 3, 3, nullptr), {{"return_attention_scores", true}}),
       "return_attention_scores=True (a second output) is not supported"},
      {attention(Attention("mha", 2, 3, 3, nullptr), {{"query_mask", Tensor("t")}}),
       "the call argument 'query_mask' is not supported"},
      {attention(Attention("mha", 2, 3, 3, nullptr), {{"attention_mask", Tensor("t")}}),
       "an attention_mask of shape [5,8] that is not a model input of (query steps, value "
       "steps) = (5, 5)"},
      {attention(Attention("mha", 2, 3, 3, nullptr), Json::object(), {"t"}),
       "needs its query and value tensors"},
      {attention(gated, Json::object()), "use_gate=True is not supported"},
      {attention(window, Json::object()), "a sliding_window is not supported"},
      {attention(axes, Json::object()), "attention_axes [2] (supported: [1])"},
  };
  for (const auto& [config, message] : calls) {
    auto r = Parse(config);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(r.status().message(), HasSubstr(message));
  }
}

}  // namespace
}  // namespace keras
}  // namespace psc
