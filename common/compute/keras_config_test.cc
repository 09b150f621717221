#include "common/compute/keras_config.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/compute/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace compute {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

Json Layer(const std::string& cls, Json config) {
  return {{"module", "keras.layers"},
          {"class_name", cls},
          {"config", config},
          {"registered_name", nullptr}};
}
Json Input(Json batch_shape) {
  return Layer("InputLayer",
               {{"batch_shape", batch_shape}, {"dtype", "float32"}, {"name", "input_layer"}});
}
Json Conv(const std::string& name, int filters, const std::string& act = "relu") {
  return Layer("Conv2D",
               {{"name", name},
                {"filters", filters},
                {"kernel_size", {3, 3}},
                {"strides", {1, 1}},
                {"padding", "same"},
                {"data_format", "channels_last"},
                {"dilation_rate", {1, 1}},
                {"groups", 1},
                {"activation", act},
                {"use_bias", true},
                {"kernel_initializer",
                 {{"module", "keras.initializers"},
                  {"class_name", "GlorotUniform"},
                  {"config", {{"seed", nullptr}}}}},
                {"bias_initializer", {{"class_name", "Zeros"}, {"config", Json::object()}}},
                {"kernel_regularizer", nullptr}});
}
Json Pool(const std::string& name) {
  return Layer("MaxPooling2D", {{"name", name},
                                {"pool_size", {2, 2}},
                                {"strides", {2, 2}},
                                {"padding", "valid"},
                                {"data_format", "channels_last"}});
}
Json Dense(const std::string& name, int units, const std::string& act) {
  return Layer("Dense",
               {{"name", name}, {"units", units}, {"activation", act}, {"use_bias", true}});
}
Json Flatten() { return Layer("Flatten", {{"name", "flatten"}, {"data_format", "channels_last"}}); }
Json Sequential(Json layers) {
  return {{"module", "keras"},
          {"class_name", "Sequential"},
          {"config", {{"name", "sequential"}, {"layers", layers}}}};
}

// The functional form of a chain, as Keras 3's to_json() writes it.
Json Functional(const std::vector<Json>& layers) {
  Json out = Json::array();
  std::string previous;
  for (const Json& l : layers) {
    Json entry = l;
    const std::string name = l["config"]["name"];
    entry["name"] = name;
    entry["inbound_nodes"] = Json::array();
    if (!previous.empty()) {
      entry["inbound_nodes"].push_back(
          {{"args",
            {{{"class_name", "__keras_tensor__"},
              {"config", {{"shape", {nullptr}}, {"keras_history", {previous, 0, 0}}}}}}},
           {"kwargs", Json::object()}});
    }
    out.push_back(entry);
    previous = name;
  }
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "functional"},
            {"layers", out},
            {"input_layers", {{"input_layer", 0, 0}}},
            {"output_layers", {{previous, 0, 0}}}}}};
}

absl::StatusOr<Model> Parse(const Json& j) { return ModelFromKerasConfig(j.dump(), "model.json"); }

// "name [shape]" of each variable, to compare two models' variables.
std::vector<std::string> Variables(const Model& m) {
  std::vector<std::string> out;
  for (const auto& v : m.variables()) out.push_back(v.name + " " + ShapeText(v.shape));
  return out;
}

TEST(KerasConfigTest, TheBuiltInModelsAreKerasConfigs) {
  auto cnn = Model::Create("seed_cnn");
  ASSERT_TRUE(cnn.ok()) << cnn.status();
  EXPECT_EQ(cnn->name(), "seed_cnn");
  EXPECT_EQ(cnn->input_shape(), (Shape{28, 28, 1}));
  EXPECT_EQ(cnn->classes(), 10);
  EXPECT_FALSE(cnn->output_softmax());
  // Keras's summary: 6 convolutions, 3 pools, flatten, 2 dense.
  ASSERT_EQ(cnn->summary().size(), 12u);
  EXPECT_EQ(cnn->summary()[0].name, "conv2d");
  EXPECT_EQ(cnn->summary()[0].output, (Shape{28, 28, 32}));
  EXPECT_EQ(cnn->summary()[0].params, 320);
  EXPECT_EQ(cnn->summary()[2].keras_class, "MaxPooling2D");
  EXPECT_EQ(cnn->summary()[2].output, (Shape{14, 14, 32}));
  EXPECT_EQ(cnn->summary()[9].output, (Shape{1152}));
  int64_t total = 0;
  for (const SummaryRow& r : cnn->summary()) total += r.params;
  EXPECT_EQ(total, cnn->num_parameters());
  auto mlp = Model::Create("mlp");
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ(mlp->num_parameters(), 101770);
}

TEST(KerasConfigTest, SequentialFunctionalAndKeras2FormsGiveTheSameModel) {
  const std::vector<Json> layers = {Input({nullptr, 12, 10, 3}),
                                    Conv("c1", 4, "linear"),
                                    Layer("ReLU", {{"name", "relu"}}),
                                    Pool("p"),
                                    Flatten(),
                                    Dense("d", 5, "relu"),
                                    Dense("out", 3, "softmax")};
  auto seq = Parse(Sequential(layers));
  ASSERT_TRUE(seq.ok()) << seq.status();
  EXPECT_EQ(seq->input_shape(), (Shape{12, 10, 3}));
  EXPECT_TRUE(seq->layers()[0].relu);  // the ReLU layer fused into the convolution
  EXPECT_TRUE(seq->output_softmax());
  ASSERT_EQ(seq->variables().size(), 6u);
  EXPECT_EQ(seq->variables()[0].shape, (Shape{3, 3, 3, 4}));
  EXPECT_EQ(seq->variables()[2].name, "d/kernel");
  EXPECT_EQ(seq->variables()[2].shape, (Shape{6 * 5 * 4, 5}));

  auto fn = Parse(Functional(layers));
  ASSERT_TRUE(fn.ok()) << fn.status();
  EXPECT_EQ(Variables(*fn), Variables(*seq));
  EXPECT_EQ(fn->output_softmax(), seq->output_softmax());

  // Keras 2 (tf.keras): the input on the first layer, nested inbound nodes.
  Json first = Conv("c1", 4);
  first["config"]["batch_input_shape"] = {nullptr, 12, 10, 3};
  Json keras2 =
      Sequential({first, Pool("p"), Flatten(), Dense("d", 5, "relu"), Dense("out", 3, "linear")});
  auto k2 = Parse(keras2);
  ASSERT_TRUE(k2.ok()) << k2.status();
  EXPECT_EQ(Variables(*k2), Variables(*seq));
  Json nested = Functional(layers);
  for (Json& l : nested["config"]["layers"]) {
    Json nodes = Json::array();
    for (const Json& node : l["inbound_nodes"]) {
      const std::string from = node["args"][0]["config"]["keras_history"][0];
      nodes.push_back({{{from, 0, 0, Json::object()}}});
    }
    l["inbound_nodes"] = nodes;
  }
  auto k2fn = Parse(nested);
  ASSERT_TRUE(k2fn.ok()) << k2fn.status();
  EXPECT_EQ(Variables(*k2fn), Variables(*seq));
}

TEST(KerasConfigTest, ADenseModelOnFeaturesTrains) {
  auto m = Parse(
      Sequential({Input({nullptr, 6}), Dense("hidden", 8, "relu"), Dense("out", 3, "linear")}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->input_shape(), (Shape{6}));
  EXPECT_EQ(m->input_elements(), 6);
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE((*exec)->SetParameters(m->Initialize(3)).ok());
  std::vector<float> x(4 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) / 7.0f;
  StepResult r;
  ASSERT_TRUE((*exec)->ComputeGradients(x, {0, 1, 2, 1}, 0.25f, &r).ok());
  EXPECT_EQ(r.examples, 4);
  EXPECT_GT(r.loss_sum, 0);
  // A batch of the wrong example size names the input shape.
  EXPECT_THAT(std::string((*exec)->ComputeGradients({1, 2, 3}, {0}, 1, &r).message()),
              HasSubstr("examples of [6]"));
}

TEST(KerasConfigTest, InitializersFollowTheirDefinitions) {
  auto with_init = [](Json init) {
    Json d = Dense("d", 200, "linear");
    d["config"]["kernel_initializer"] = init;
    d["config"]["bias_initializer"] = {{"class_name", "Constant"}, {"config", {{"value", 0.5}}}};
    return Parse(Sequential({Input({nullptr, 100}), d}));
  };
  auto he = with_init({{"class_name", "HeUniform"}, {"config", {{"seed", nullptr}}}});
  ASSERT_TRUE(he.ok()) << he.status();
  auto v = he->Initialize(1);
  const double limit = std::sqrt(6.0 / 100);
  double max = 0;
  for (float x : v[0]) max = std::max(max, std::fabs(static_cast<double>(x)));
  EXPECT_LE(max, limit);
  EXPECT_GT(max, 0.95 * limit);
  for (float x : v[1]) EXPECT_EQ(x, 0.5f);
  EXPECT_EQ(he->initializers()[1].Text(), "constant(0.5)");

  auto normal = with_init({{"class_name", "GlorotNormal"}, {"config", Json::object()}});
  ASSERT_TRUE(normal.ok());
  auto n = normal->Initialize(1);
  const double stddev = std::sqrt(2.0 / 300) / .87962566103423978;
  double sq = 0;
  for (float x : n[0]) {
    EXPECT_LE(std::fabs(x), 2 * stddev + 1e-7);  // truncated at two standard deviations
    sq += static_cast<double>(x) * x;
  }
  // The truncated normal's variance is the untruncated target's.
  EXPECT_NEAR(std::sqrt(sq / n[0].size()), std::sqrt(2.0 / 300), 0.05 * std::sqrt(2.0 / 300));

  auto uniform =
      with_init({{"class_name", "RandomUniform"}, {"config", {{"minval", 1.0}, {"maxval", 2.0}}}});
  ASSERT_TRUE(uniform.ok());
  const auto u = uniform->Initialize(4);
  for (float x : u[0]) {
    EXPECT_GE(x, 1.0f);
    EXPECT_LT(x, 2.0f);
  }
  auto ones = with_init("ones");  // Keras 2 names them by string
  ASSERT_TRUE(ones.ok());
  const auto o = ones->Initialize(0);
  for (float x : o[0]) EXPECT_EQ(x, 1.0f);
}

TEST(KerasConfigTest, WhatIsNotSupportedIsAnErrorNamingItAndTheSupportedLayers) {
  struct Case {
    Json model;
    std::string want;
  };
  Json add_node = Functional({Input({nullptr, 8}), Dense("a", 4, "relu"), Dense("b", 2, "linear")});
  // "b" also takes the input: two inbound tensors.
  add_node["config"]["layers"][2]["inbound_nodes"][0]["args"].push_back(
      {{"class_name", "__keras_tensor__"}, {"config", {{"keras_history", {"input_layer", 0, 0}}}}});
  Json fork = Functional({Input({nullptr, 8}), Dense("a", 4, "relu"), Dense("b", 2, "linear")});
  Json c = fork["config"]["layers"][2];
  c["name"] = "c";
  c["config"]["name"] = "c";
  fork["config"]["layers"].push_back(c);  // "a" feeds "b" and "c"
  Json tanh_conv = Conv("conv", 4, "tanh");
  Json big_kernel = Conv("conv5", 4);
  big_kernel["config"]["kernel_size"] = {5, 5};
  Json orthogonal = Dense("d", 2, "linear");
  orthogonal["config"]["kernel_initializer"] = {{"class_name", "Orthogonal"}};
  const std::vector<Case> cases = {
      {Sequential({Input({nullptr, 8}), Layer("Dropout", {{"name", "dropout"}, {"rate", 0.5}}),
                   Dense("d", 2, "linear")}),
       "layer \"dropout\" (Dropout): this layer is not supported (supported: InputLayer, Conv2D"},
      {add_node, "layer \"b\" takes 2 inputs (a, input_layer): a branching graph"},
      {fork, "the output of \"a\" feeds 2 layers (b, c): a branching graph"},
      {Sequential({Input({nullptr, 8, 8, 1}), tanh_conv, Flatten(), Dense("d", 2, "linear")}),
       "activation \"tanh\" on a Conv2D is not supported"},
      {Sequential({Input({nullptr, 8, 8, 1}), big_kernel, Flatten(), Dense("d", 2, "linear")}),
       "kernel_size (5, 5) is not supported"},
      {Sequential({Input({nullptr, 8}), orthogonal}), "kernel_initializer Orthogonal is not"},
      {Sequential({Input({nullptr, 8, 8, 1}), Conv("c", 4), Dense("d", 2, "linear")}),
       "Keras applies Dense to its last axis, pscluster needs a Flatten"},
      {Sequential({Input({nullptr, 8}), Dense("d", 2, "relu")}),
       "must end in a Dense layer of the classes"},
      {Sequential({Input({nullptr, 8}), Dense("d", 2, "softmax"), Dense("e", 2, "linear")}),
       "comes after the model's softmax output"},
      {Sequential({Dense("d", 2, "linear")}), "declares no input shape"},
      {Json{{"class_name", "Sequential"}}, "not a Keras model config"},
  };
  for (const Case& c : cases) {
    auto m = Parse(c.model);
    ASSERT_FALSE(m.ok()) << c.want;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.want;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.want));
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("model.json")) << c.want;
  }
  EXPECT_FALSE(ModelFromKerasConfig("{not json", "x.json").ok());
  EXPECT_FALSE(ModelFromKerasConfig("", "x.json").ok());
}

}  // namespace
}  // namespace compute
}  // namespace psc
