#include "common/keras/keras_config.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/compute/cpu_backend.h"
#include "common/compute/cpu_conv.h"
#include "common/keras/keras_test_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace keras {
namespace {

using compute::Activation;
using compute::ConvAlgorithm;
using compute::CreateCpuBackend;
using compute::Executor;
using compute::GlobalPooling;
using compute::Initializer;
using compute::InputTransform;
using compute::LayerSpec;
using compute::LossKind;
using compute::LossOptions;
using compute::Model;
using compute::Padding;
using compute::Shape;
using compute::ShapeText;
using compute::StepResult;
using compute::SummaryRow;
using compute::Window;

using Json = nlohmann::json;
using testing::Dense;
using testing::ExpectGradientsMatchCentralDifferences;
using ::testing::HasSubstr;
using testing::Input;
using testing::Layer;
using testing::Parse;
using testing::Sequential;
using testing::Variables;

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
Json Flatten() { return Layer("Flatten", {{"name", "flatten"}, {"data_format", "channels_last"}}); }

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

TEST(KerasConfigTest, TheBuiltInModelsAreKerasConfigs) {
  auto cnn = keras::BuiltinModel("seed_cnn");
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
  auto mlp = keras::BuiltinModel("mlp");
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

// Conv2D(tanh), LeakyReLU, GlobalAveragePooling2D, Dropout, Dense(sigmoid),
// a ReLU layer that cannot fuse, GlobalMaxPooling's sibling: every new layer.
Json NewLayersModel(bool max_pool) {
  return Sequential(
      {Input({nullptr, 12, 10, 3}),
       Layer("AveragePooling2D", {{"name", "avg"}, {"pool_size", {2, 2}}}), Conv("c1", 4, "tanh"),
       Layer("LeakyReLU", {{"name", "leaky"}, {"negative_slope", 0.1}}),
       Layer(max_pool ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D",
             {{"name", "gap"}, {"data_format", "channels_last"}, {"keepdims", false}}),
       Layer("Dropout", {{"name", "drop"}, {"rate", 0.25}, {"noise_shape", nullptr}}),
       Dense("d", 7, "sigmoid"), Layer("ReLU", {{"name", "relu_after_sigmoid"}}),
       Dense("out", 3, "linear")});
}

TEST(KerasConfigTest, TheNewLayersParseAsKerasCountsThem) {
  auto m = Parse(NewLayersModel(false));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->layers().size(), 8u);
  EXPECT_EQ(m->layers()[0].pooling, GlobalPooling::kAverage);
  EXPECT_EQ(m->layers()[1].activation, Activation::kTanh);
  EXPECT_EQ(m->layers()[2].kind, LayerSpec::kActivation);
  EXPECT_EQ(m->layers()[2].alpha, 0.1f);
  EXPECT_EQ(m->layers()[3].kind, LayerSpec::kGlobalPool);
  EXPECT_EQ(m->layers()[4].kind, LayerSpec::kDropout);
  EXPECT_EQ(m->layers()[5].activation, Activation::kSigmoid);
  EXPECT_EQ(m->layers()[6].kind, LayerSpec::kActivation);  // a ReLU after a sigmoid: its own
  EXPECT_EQ(m->summary()[3].output, (Shape{4}));
  EXPECT_EQ(m->num_parameters(), (27 * 4 + 4) + (4 * 7 + 7) + (7 * 3 + 3));
  // Rate 0 is Keras's identity: no layer.
  Json zero = NewLayersModel(true);
  zero["config"]["layers"][5]["config"]["rate"] = 0.0;
  auto z = Parse(zero);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->layers().size(), 7u);
  EXPECT_EQ(z->layers()[3].pooling, GlobalPooling::kMax);
  // 2x2 pools: MaxPooling2D and AveragePooling2D.
  Json pools = Sequential({Input({nullptr, 8, 8, 2}),
                           Layer("AveragePooling2D", {{"name", "avg"}, {"pool_size", {2, 2}}}),
                           Pool("max"), Flatten(), Dense("out", 3, "linear")});
  auto p = Parse(pools);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->layers()[0].pooling, GlobalPooling::kAverage);
  EXPECT_EQ(p->layers()[1].pooling, GlobalPooling::kMax);
  EXPECT_EQ(p->summary()[0].keras_class, "AveragePooling2D");
  EXPECT_EQ(p->variables()[0].shape, (Shape{2 * 2 * 2, 3}));
}

// The executor's wiring of the new layers, on the CPU: the gradient of the
// training loss (dropout's masks fixed by the key) against central
// differences of the same loss.
TEST(KerasConfigTest, TheNewLayersTrainWithGradientsMatchingFiniteDifferences) {
  for (bool max_pool : {false, true}) {
    SCOPED_TRACE(max_pool ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D");
    auto m = Parse(NewLayersModel(max_pool));
    ASSERT_TRUE(m.ok()) << m.status();
    auto backend = CreateCpuBackend(1);
    ASSERT_TRUE(backend.ok());
    auto exec = Executor::Create(&*m, backend->get());
    ASSERT_TRUE(exec.ok());
    auto params = m->Initialize(9);
    for (size_t v = 1; v < params.size(); v += 2) {
      for (float& b : params[v]) b = 0.1f;
    }
    std::mt19937 rng(4);
    std::vector<float> x(5 * 12 * 10 * 3);
    for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    const std::vector<int32_t> labels = {0, 1, 2, 1, 0};
    auto loss = [&](const std::vector<std::vector<float>>& p, std::vector<std::vector<float>>* g) {
      EXPECT_TRUE((*exec)->SetParameters(p).ok());
      (*exec)->SetDropoutKey(11, 3, 0);
      StepResult r;
      EXPECT_TRUE((*exec)->ComputeGradients(x, labels, 1.0f, &r).ok());
      if (g != nullptr) {
        EXPECT_TRUE((*exec)->CopyGradients(g).ok());
      }
      return r.loss_sum;
    };
    std::vector<std::vector<float>> grads;
    loss(params, &grads);
    for (size_t v = 0; v < params.size(); ++v) {
      for (int sample = 0; sample < 5; ++sample) {
        const size_t i = rng() % params[v].size();
        const float eps = 2e-3f;
        auto plus = params, minus = params;
        plus[v][i] += eps;
        minus[v][i] -= eps;
        const double numeric = (loss(plus, nullptr) - loss(minus, nullptr)) / (2 * eps);
        EXPECT_NEAR(grads[v][i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
            << m->variables()[v].name << "[" << i << "]";
      }
    }
    // Dropout masks: the same key, the same step; another step, others.
    StepResult a, b, c;
    ASSERT_TRUE((*exec)->SetParameters(params).ok());
    (*exec)->SetDropoutKey(11, 3, 0);
    ASSERT_TRUE((*exec)->ComputeGradients(x, labels, 1.0f, &a).ok());
    (*exec)->SetDropoutKey(11, 3, 0);
    ASSERT_TRUE((*exec)->ComputeGradients(x, labels, 1.0f, &b).ok());
    (*exec)->SetDropoutKey(11, 4, 0);
    ASSERT_TRUE((*exec)->ComputeGradients(x, labels, 1.0f, &c).ok());
    EXPECT_EQ(a.loss_sum, b.loss_sum);
    EXPECT_NE(a.loss_sum, c.loss_sum);
    // Evaluation skips the dropout: no key changes it.
    StepResult e1, e2;
    (*exec)->SetDropoutKey(1, 1, 0);
    ASSERT_TRUE((*exec)->Evaluate(x, labels, &e1).ok());
    (*exec)->SetDropoutKey(2, 2, 0);
    ASSERT_TRUE((*exec)->Evaluate(x, labels, &e2).ok());
    EXPECT_EQ(e1.loss_sum, e2.loss_sum);
  }
}

// A Rescaling or Normalization layer first: the model's input transform,
// as Keras 3 writes it (axis [-1] per feature, [] for one value), with no
// variables and a row of its own for the weights file.
TEST(KerasConfigTest, RescalingAndNormalizationAtTheInputAreTheInputTransform) {
  auto per_feature = Parse(Sequential({Input({nullptr, 3}),
                                       Layer("Normalization", {{"name", "norm"},
                                                               {"axis", {-1}},
                                                               {"invert", false},
                                                               {"mean", {1.0, 2.0, 3.0}},
                                                               {"variance", {4.0, 9.0, 0.0}}}),
                                       Dense("d", 2, "linear")}));
  ASSERT_TRUE(per_feature.ok()) << per_feature.status();
  const InputTransform& t = per_feature->input_transform();
  EXPECT_EQ(t.kind, InputTransform::Kind::kNormalize);
  EXPECT_EQ(t.layer, "norm");
  EXPECT_EQ(t.mean, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(t.variance, (std::vector<float>{4, 9, 0}));
  EXPECT_EQ(per_feature->variables().size(), 2u);
  EXPECT_EQ(per_feature->summary()[0].keras_class, "Normalization");
  EXPECT_EQ(per_feature->summary()[0].variables, 0);

  auto images = Parse(Sequential(
      {Input({nullptr, 4, 4, 1}),
       Layer("Rescaling", {{"name", "rescaling"}, {"scale", 0.00392156862745098}, {"offset", 0.5}}),
       Flatten(), Dense("d", 2, "linear")}));
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->input_transform().kind, InputTransform::Kind::kRescale);
  EXPECT_EQ(images->input_transform().scale, static_cast<float>(0.00392156862745098));
  EXPECT_EQ(images->input_transform().offset, 0.5f);

  auto scalar = Parse(
      Sequential({Input({nullptr, 4, 4, 1}),
                  Layer("Normalization",
                        {{"name", "n"}, {"axis", Json::array()}, {"mean", 5.0}, {"variance", 4.0}}),
                  Flatten(), Dense("d", 2, "linear")}));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->input_transform().mean, (std::vector<float>{5}));
  EXPECT_EQ(
      Parse(Sequential({Input({nullptr, 8}), Dense("d", 2, "linear")}))->input_transform().kind,
      InputTransform::Kind::kNone);
}

// Where the CPU backend keeps activations blocked (16-channel convolutions
// on AVX-512), the new layers read and write them as the plain NHWC path
// does: one step on both convolution paths agrees.
TEST(KerasConfigTest, TheNewLayersAgreeAcrossConvolutionPaths) {
  for (const char* pool : {"GlobalAveragePooling2D", "GlobalMaxPooling2D"}) {
    SCOPED_TRACE(pool);
    auto m = Parse(Sequential(
        {Input({nullptr, 9, 9, 16}), Conv("c1", 32, "linear"),
         Layer("Activation", {{"name", "tanh"}, {"activation", "tanh"}}),
         Layer("AveragePooling2D", {{"name", "avg"}, {"pool_size", {2, 2}}}),  // 9 -> 4: the floor
         Conv("c2", 32, "sigmoid"), Layer("LeakyReLU", {{"name", "leaky"}}),
         Layer(pool, {{"name", "pool"}}), Layer("Dropout", {{"name", "drop"}, {"rate", 0.3}}),
         Dense("out", 4, "linear")}));
    ASSERT_TRUE(m.ok()) << m.status();
    std::mt19937 rng(8);
    std::vector<float> x(6 * 9 * 9 * 16);
    for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    const std::vector<int32_t> labels = {0, 1, 2, 3, 1, 2};
    std::vector<std::vector<float>> grads[2];
    StepResult r[2];
    for (int path = 0; path < 2; ++path) {
      auto backend = CreateCpuBackend(
          {.threads = 1, .conv = path == 0 ? ConvAlgorithm::kAuto : ConvAlgorithm::kDirect});
      ASSERT_TRUE(backend.ok());
      auto exec = Executor::Create(&*m, backend->get());
      ASSERT_TRUE(exec.ok());
      ASSERT_TRUE((*exec)->SetParameters(m->Initialize(6)).ok());
      (*exec)->SetDropoutKey(1, 2, 0);
      ASSERT_TRUE((*exec)->ComputeGradients(x, labels, 1.0f / 6, &r[path]).ok());
      ASSERT_TRUE((*exec)->CopyGradients(&grads[path]).ok());
    }
    EXPECT_NEAR(r[0].loss_sum, r[1].loss_sum, 1e-4 * std::fabs(r[1].loss_sum));
    for (size_t v = 0; v < grads[1].size(); ++v) {
      double scale = 0;
      for (float g : grads[1][v]) scale = std::max(scale, std::fabs(static_cast<double>(g)));
      int bad = 0;
      for (size_t i = 0; i < grads[1][v].size(); ++i) {
        bad += !(std::fabs(grads[0][v][i] - grads[1][v][i]) <= 1e-3 * scale + 1e-7);
      }
      EXPECT_EQ(bad, 0) << m->variables()[v].name << " (largest |gradient| " << scale << ")";
    }
  }
}

// A batch split over two executors draws the masks one executor draws
// over the whole batch: the masks follow the examples.
TEST(KerasConfigTest, DropoutMasksFollowTheExamplesNotTheSplit) {
  auto m = Parse(
      Sequential({Input({nullptr, 40}), Dense("h", 64, "relu"),
                  Layer("Dropout", {{"name", "drop"}, {"rate", 0.5}}), Dense("out", 3, "linear")}));
  ASSERT_TRUE(m.ok()) << m.status();
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok());
  ASSERT_TRUE((*exec)->SetParameters(m->Initialize(2)).ok());
  std::vector<float> x(8 * 40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1;
  const std::vector<int32_t> labels = {0, 1, 2, 0, 1, 2, 0, 1};
  StepResult whole, first, second;
  (*exec)->SetDropoutKey(5, 7, 0);
  ASSERT_TRUE((*exec)->ComputeGradients(x, labels, 1.0f, &whole).ok());
  (*exec)->SetDropoutKey(5, 7, 0);
  ASSERT_TRUE((*exec)
                  ->ComputeGradients(absl::MakeConstSpan(x).subspan(0, 5 * 40),
                                     absl::MakeConstSpan(labels).subspan(0, 5), 1.0f, &first)
                  .ok());
  (*exec)->SetDropoutKey(5, 7, 5);
  ASSERT_TRUE((*exec)
                  ->ComputeGradients(absl::MakeConstSpan(x).subspan(5 * 40),
                                     absl::MakeConstSpan(labels).subspan(5), 1.0f, &second)
                  .ok());
  EXPECT_NEAR(first.loss_sum + second.loss_sum, whole.loss_sum, 1e-5 * whole.loss_sum);
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

// Strided and "valid" convolutions of any kernel, without bias, pooling
// windows (strides default to the pool size), BatchNormalization's four
// variables and its moving averages, a Dense without bias: shapes,
// variables and summary as Keras gives them.
TEST(KerasConfigTest, WindowsBiasesAndBatchNormalization) {
  Json strided = Conv("strided", 8, "linear");
  strided["config"]["kernel_size"] = {5, 3};
  strided["config"]["strides"] = {2, 2};
  strided["config"]["use_bias"] = false;
  Json valid = Conv("valid", 6, "relu");
  valid["config"]["padding"] = "valid";
  Json pool =
      Layer("AveragePooling2D",
            {{"name", "avg"}, {"pool_size", {3, 3}}, {"strides", nullptr}, {"padding", "same"}});
  Json bn = Layer("BatchNormalization", {{"name", "bn"},
                                         {"axis", -1},
                                         {"momentum", 0.9},
                                         {"epsilon", 0.01},
                                         {"center", true},
                                         {"scale", true}});
  Json bn2 = Layer("BatchNormalization", {{"name", "bn2"}, {"axis", 1}, {"center", false}});
  Json head = Dense("head", 16, "linear");
  head["config"]["use_bias"] = false;
  auto m =
      Parse(Sequential({Input({nullptr, 28, 28, 1}), strided, bn, Layer("ReLU", {{"name", "relu"}}),
                        valid, pool, Flatten(), head, bn2, Dense("out", 10, "softmax")}));
  ASSERT_TRUE(m.ok()) << m.status();
  // 28 -> 14 (5x3/2 same) -> 12 (3x3 valid) -> 4 (3x3/3 same).
  EXPECT_EQ(m->summary()[0].output, (Shape{14, 14, 8}));
  EXPECT_EQ(m->summary()[0].params, 5 * 3 * 1 * 8);  // no bias
  EXPECT_EQ(m->summary()[1].params, 4 * 8);
  EXPECT_EQ(m->summary()[1].variables, 4);
  EXPECT_EQ(m->summary()[3].output, (Shape{12, 12, 6}));
  EXPECT_EQ(m->summary()[4].output, (Shape{4, 4, 6}));
  EXPECT_EQ(m->summary()[7].params, 3 * 16);  // no beta
  EXPECT_EQ(m->summary()[7].variables, 3);
  EXPECT_THAT(Variables(*m),
              ::testing::ElementsAre(
                  "strided/kernel [5,3,1,8]", "bn/gamma [8]", "bn/beta [8]", "bn/moving_mean [8]",
                  "bn/moving_variance [8]", "valid/kernel [3,3,8,6]", "valid/bias [6]",
                  "head/kernel [96,16]", "bn2/gamma [16]", "bn2/moving_mean [16]",
                  "bn2/moving_variance [16]", "out/kernel [16,10]", "out/bias [10]"));
  std::vector<std::optional<float>> moving;
  for (const auto& a : m->moving_averages()) moving.push_back(a);
  EXPECT_EQ(moving[3], 0.9f);
  EXPECT_EQ(moving[4], 0.9f);
  EXPECT_EQ(moving[9], 0.99f);  // Keras's default
  EXPECT_FALSE(moving[1].has_value());
  EXPECT_FALSE(moving[8].has_value());
  const LayerSpec& l0 = m->layers()[0];
  EXPECT_EQ(l0.window, (Window{5, 3, 2, 2, Padding::kSame}));
  EXPECT_FALSE(l0.bias);
  EXPECT_EQ(m->layers()[4].window, (Window{3, 3, 3, 3, Padding::kSame}));
  EXPECT_DOUBLE_EQ(m->layers()[1].epsilon, 0.01);
  // Initial values: gamma and the moving variance ones, beta and the mean zeros.
  const auto init = m->Initialize(7);
  EXPECT_EQ(init[1], std::vector<float>(8, 1.0f));
  EXPECT_EQ(init[2], std::vector<float>(8, 0.0f));
  EXPECT_EQ(init[3], std::vector<float>(8, 0.0f));
  EXPECT_EQ(init[4], std::vector<float>(8, 1.0f));
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
  Json mish_conv = Conv("conv", 4, "mish");
  Json big_kernel = Conv("conv9", 4);
  big_kernel["config"]["kernel_size"] = {9, 9};
  big_kernel["config"]["padding"] = "valid";
  Json grouped = Conv("grouped", 4);
  grouped["config"]["groups"] = 3;
  Json dilated = Conv("dilated", 4);
  dilated["config"]["dilation_rate"] = {0, 2};
  Json causal = Conv("causal", 4);
  causal["config"]["padding"] = "causal";
  Json zero_stride = Pool("p0");
  zero_stride["config"]["strides"] = {0, 2};
  Json orthogonal = Dense("d", 2, "linear");
  orthogonal["config"]["kernel_initializer"] = {{"class_name", "Identity"}};
  Json with_unknown = Dense("d", 2, "linear");
  with_unknown["config"]["lora_extra"] = 4;
  Json quantized = Dense("d", 2, "linear");
  quantized["config"]["quantization_config"] = {{"mode", "int8"}};
  auto policy = [](const Json& dtype) {
    Json d = Dense("d", 2, "linear");
    d["config"]["dtype"] = dtype;
    return d;
  };
  const std::vector<Case> cases = {
      {Sequential({Input({nullptr, 8, 8, 1}),
                   Layer("GroupNormalization", {{"name", "group_normalization"}}), Flatten(),
                   Dense("d", 2, "linear")}),
       "layer \"group_normalization\" (GroupNormalization): this layer is not supported "
       "(supported: InputLayer, Rescaling and Normalization (with its mean and variance) as the "
       "first layer, Conv2D"},
      {Sequential({Input({nullptr, 8, 8, 1}),
                   Layer("BatchNormalization", {{"name", "bn"}, {"synchronized", true}}), Flatten(),
                   Dense("d", 2, "linear")}),
       "synchronized=True (SyncBatchNormalization)"},
      {Sequential({Input({nullptr, 8, 8, 1}),
                   Layer("BatchNormalization", {{"name", "bn"}, {"axis", 1}}), Flatten(),
                   Dense("d", 2, "linear")}),
       "axis 1 (supported: the last axis, -1 or 3) is not supported"},
      {Sequential({Input({nullptr, 8, 8, 1}),
                   Layer("BatchNormalization", {{"name", "bn"}, {"momentum", 1.0}}), Flatten(),
                   Dense("d", 2, "linear")}),
       "momentum 1 must be in [0, 1)"},
      {Sequential({Input({nullptr, 8, 8, 1}), grouped, Flatten(), Dense("d", 2, "linear")}),
       "layer \"grouped\" (Conv2D): its 1 input channels and 4 filters must both be divisible "
       "by groups=3"},
      {Sequential({Input({nullptr, 8, 8, 1}), dilated, Flatten(), Dense("d", 2, "linear")}),
       "'dilation_rate' (0, 2) must be in [1, 1048576]"},
      {Sequential({Input({nullptr, 8, 8, 1}),
                   Layer("UpSampling2D", {{"name", "up"}, {"size", {0, 2}}}), Flatten(),
                   Dense("d", 2, "linear")}),
       "layer \"up\" (UpSampling2D): 'size' (0, 2) must be in [1, 1048576]"},
      {Sequential({Input({nullptr, 8, 8, 1}),
                   Layer("UpSampling2D", {{"name", "up"}, {"interpolation", "bilinear"}}),
                   Flatten(), Dense("d", 2, "linear")}),
       "interpolation \"bilinear\" (supported: nearest) is not supported"},
      {Sequential({Input({nullptr, 8, 8, 2}),
                   Layer("DepthwiseConv2D", {{"name", "dw"}, {"kernel_size", 3}, {"groups", 2}}),
                   Flatten(), Dense("d", 2, "linear")}),
       "layer \"dw\" (DepthwiseConv2D): 'groups' (Keras 2's, always 1 here) is not supported"},
      {Sequential({Input({nullptr, 8, 8, 1}), causal, Flatten(), Dense("d", 2, "linear")}),
       "padding \"causal\" (supported: same, valid) is not supported"},
      {Sequential({Input({nullptr, 8, 8, 1}), zero_stride, Flatten(), Dense("d", 2, "linear")}),
       "sizes and strides must be in [1, 1048576]"},
      {Sequential({Input({nullptr, 8}),
                   Layer("Dropout", {{"name", "dropout"}, {"rate", 0.5}, {"noise_shape", {1, 8}}}),
                   Dense("d", 2, "linear")}),
       "(Dropout): noise_shape is not supported"},
      {Sequential({Input({nullptr, 8, 8, 1}), Conv("c", 4), Flatten()}),
       "must end in a Dense layer (the classes' logits or softmax; one sigmoid"},
      {add_node, "layer \"b\" (Dense): takes 2 inputs; it takes one"},
      {fork, "the output of layer \"c\" is not used (a second output, or a dead branch)"},
      {Sequential({Input({nullptr, 8, 8, 1}), mish_conv, Flatten(), Dense("d", 2, "linear")}),
       "activation \"mish\" (supported: linear, relu, relu6, sigmoid, hard_sigmoid, tanh"},
      {Sequential({Input({nullptr, 8, 8, 1}), big_kernel, Flatten(), Dense("d", 2, "linear")}),
       "layer \"conv9\" (Conv2D): its 9x9/1 valid window leaves no output of its [8,8,1] "
       "input"},
      {Sequential({Input({nullptr, 8}), orthogonal}), "kernel_initializer Identity is not"},
      {Sequential({Input({nullptr, 8, 8, 1}), Conv("c", 4), Dense("d", 2, "linear")}),
       "the model must end in a Dense layer"},  // Keras's Dense on (8, 8, 4): (8, 8, 2)
      {Sequential({Input({nullptr, 8}), Dense("d", 2, "relu"), Layer("Softmax", {{"name", "sm"}})}),
       "the model's output softmax (sm) must be a Dense's activation or follow a Dense without "
       "activation"},
      {Sequential({Dense("d", 2, "linear")}), "declares no input shape"},
      {Json{{"class_name", "Sequential"}}, "not a Keras model config"},
      // Nothing silently ignored: an option the reader does not know, and
      // every dtype policy pscluster does not compute in, in each form Keras
      // writes it (those it does: dtype_policy_test.cc).
      {Sequential({Input({nullptr, 8}), Dense("d", 2, "linear"),
                   Layer("Softmax", {{"name", "sm"}, {"axis", 0}})}),
       "layer \"sm\" (Softmax): axis 0 (supported: one axis of [2] but the batch) is not "
       "supported"},
      {Sequential({Input({nullptr, 8}), with_unknown}),
       "layer \"d\" (Dense): the option 'lora_extra' (pscluster does not know it"},
      {Sequential({Input({nullptr, 8}), quantized}), "a quantized layer is not supported"},
      {Sequential({Input({nullptr, 8}), policy("float64")}),
       "layer \"d\" (Dense): the dtype policy \"float64\" is not supported (supported: float32, "
       "mixed_bfloat16"},
      {Sequential({Input({nullptr, 8}), policy(Json{{"module", "keras"},
                                                    {"class_name", "DTypePolicy"},
                                                    {"config", {{"name", "int8"}}}})}),
       "the dtype policy \"int8\" is not supported"},
      {Sequential({Input({nullptr, 8}),
                   policy(Json{{"class_name", "Policy"}, {"config", {{"name", "mixed_int8"}}}})}),
       "the dtype policy \"mixed_int8\" is not supported"},
      {Sequential({Input({nullptr, 8}), policy(Json{{"class_name", "DTypePolicyMap"},
                                                    {"config", {{"default_policy", "float32"}}}})}),
       "layer \"d\" (Dense): the dtype policy DTypePolicyMap is not supported"},
      {Sequential({Input({nullptr, 8}),
                   policy(Json{{"class_name", "QuantizedFloat8DTypePolicy"},
                               {"config", {{"mode", "float8"}, {"source_name", "float32"}}}})}),
       "the dtype policy QuantizedFloat8DTypePolicy is not supported"},
      {Sequential({Input({nullptr, 8}), Dense("a", 4, "relu"),
                   Layer("Rescaling", {{"name", "late"}, {"scale", 0.5}}),
                   Dense("d", 2, "linear")}),
       "layer \"late\" (Rescaling): a Rescaling or Normalization layer other than the first"},
      {Sequential({Input({nullptr, 8}),
                   Layer("Normalization", {{"name", "adapted"}, {"axis", {-1}}}),
                   Dense("d", 2, "linear")}),
       "layer \"adapted\" (Normalization): has no mean and variance in its config"},
      {Sequential(
           {Input({nullptr, 8}),
            Layer("Normalization",
                  {{"name", "n3"}, {"axis", {-1}}, {"mean", {1, 2, 3}}, {"variance", {1, 1, 1}}}),
            Dense("d", 2, "linear")}),
       "'mean' holds 3 values for 8 features"},
      {Sequential({Input({nullptr, 8}),
                   policy(Json{{"class_name", "QuantizedDTypePolicy"},
                               {"config", {{"mode", "int8"}, {"source_name", "float32"}}}})}),
       "the dtype policy QuantizedDTypePolicy is not supported"},
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
}  // namespace keras
}  // namespace psc

namespace psc {
namespace keras {
namespace {

// A functional model of named nodes, each with the layers it takes, as
// Keras 3's to_json() writes one (keras_history of each input tensor).
struct NodeSpec {
  Json layer;
  std::vector<std::string> inbound;
};
Json Graph(const std::vector<NodeSpec>& nodes, const std::string& output) {
  Json out = Json::array();
  for (const NodeSpec& n : nodes) {
    Json entry = n.layer;
    entry["name"] = n.layer["config"]["name"];
    entry["inbound_nodes"] = Json::array();
    if (!n.inbound.empty()) {
      Json args = Json::array();
      for (const std::string& in : n.inbound) {
        args.push_back({{"class_name", "__keras_tensor__"},
                        {"config", {{"shape", {nullptr}}, {"keras_history", {in, 0, 0}}}}});
      }
      // One input: the tensor itself; several (a merge): a list of them.
      Json call = args.size() == 1 ? args : Json::array({args});
      entry["inbound_nodes"].push_back({{"args", call}, {"kwargs", Json::object()}});
    }
    out.push_back(entry);
  }
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "graph"},
            {"layers", out},
            {"input_layers", {{"input_layer", 0, 0}}},
            {"output_layers", {{output, 0, 0}}}}}};
}
Json Merge(const std::string& cls, const std::string& name) {
  return Layer(cls, {{"name", name}, {"trainable", true}, {"dtype", "float32"}});
}
Json Act(const std::string& name, const std::string& f) {
  return Layer("Activation", {{"name", name}, {"activation", f}});
}
Json Gap() {
  return Layer("GlobalAveragePooling2D",
               {{"name", "gap"}, {"data_format", "channels_last"}, {"keepdims", false}});
}

// A residual block: each layer takes the tensors its call named, whatever
// the order the config lists them in; the block's shortcut feeds two layers.
TEST(KerasGraphTest, AResidualBlockIsAGraphOfItsCalls) {
  const std::vector<NodeSpec> nodes = {
      {Input({nullptr, 8, 8, 1}), {}},
      {Conv("a", 4, "relu"), {"input_layer"}},
      {Merge("Add", "add"), {"b", "a"}},  // listed before "b": read after it
      {Conv("b", 4, "linear"), {"a"}},
      {Act("r", "relu"), {"add"}},
      {Gap(), {"r"}},
      {Dense("out", 3, "linear"), {"gap"}},
  };
  auto m = Parse(Graph(nodes, "out"));
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& layers = m->layers();
  ASSERT_EQ(layers.size(), 6u);
  std::vector<std::string> names;
  for (const LayerSpec& l : layers) names.push_back(l.name);
  EXPECT_THAT(names, ::testing::ElementsAre("a", "b", "add", "r", "gap", "out"));
  EXPECT_EQ(layers[2].kind, LayerSpec::kAdd);
  EXPECT_THAT(m->graph().sources(2), ::testing::ElementsAre(2, 1));  // b's output, a's
  EXPECT_TRUE(m->graph().IsShared(1));
  EXPECT_TRUE(layers[0].relu);
  EXPECT_EQ(layers[3].kind, LayerSpec::kActivation);  // after a merge: its own layer
  EXPECT_EQ(m->variables().size(), 6u);
  EXPECT_EQ(m->summary()[2].keras_class, "Add");
  EXPECT_EQ(m->summary()[2].output, (Shape{8, 8, 4}));
}

// A ReLU after a Conv2D whose output also feeds a merge is not fused into
// it: the merge takes the convolution's output before the ReLU.
// Concatenate's axis counts the batch, as Keras's: -1 and 3 are the
// channels of (H, W, C) inputs, 1 the height.
TEST(KerasGraphTest, ConcatenateTakesKerasAxes) {
  for (const auto& [axis, want, shape] :
       {std::tuple{-1, 2, Shape{8, 8, 8}}, std::tuple{3, 2, Shape{8, 8, 8}},
        std::tuple{1, 0, Shape{16, 8, 4}}}) {
    const std::vector<NodeSpec> nodes = {
        {Input({nullptr, 8, 8, 1}), {}},
        {Conv("a", 4, "relu"), {"input_layer"}},
        {Conv("b", 4, "linear"), {"input_layer"}},
        {Layer("Concatenate", {{"name", "cat"}, {"axis", axis}}), {"a", "b"}},
        {Gap(), {"cat"}},
        {Dense("out", 3, "linear"), {"gap"}},
    };
    auto m = Parse(Graph(nodes, "out"));
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->layers()[2].kind, LayerSpec::kConcat);
    EXPECT_EQ(m->layers()[2].axis, want) << axis;
    EXPECT_EQ(m->graph().tensor(3).shape, shape) << axis;
    EXPECT_EQ(m->summary()[2].output, shape) << axis;
  }
}

TEST(KerasGraphTest, AnActivationIsFusedOnlyIntoItsInputsOnlyConsumer) {
  const std::vector<NodeSpec> nodes = {
      {Input({nullptr, 8, 8, 1}), {}},
      {Conv("a", 4, "linear"), {"input_layer"}},
      {Act("r", "relu"), {"a"}},
      {Merge("Add", "add"), {"r", "a"}},
      {Gap(), {"add"}},
      {Dense("out", 3, "linear"), {"gap"}},
  };
  auto m = Parse(Graph(nodes, "out"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->layers()[0].relu);
  EXPECT_EQ(m->layers()[1].kind, LayerSpec::kActivation);
  EXPECT_THAT(m->graph().sources(2), ::testing::ElementsAre(2, 1));
  // Alone after it, it is fused.
  const std::vector<NodeSpec> chain = {
      {Input({nullptr, 8, 8, 1}), {}},
      {Conv("a", 4, "linear"), {"input_layer"}},
      {Act("r", "relu"), {"a"}},
      {Gap(), {"r"}},
      {Dense("out", 3, "linear"), {"gap"}},
  };
  auto fused = Parse(Graph(chain, "out"));
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_TRUE(fused->layers()[0].relu);
  EXPECT_EQ(fused->layers().size(), 3u);
}

// Keras's activations by name and as layers, with their parameters;
// hard_sigmoid as the config's Keras version defines it.
TEST(KerasGraphTest, ActivationsAreReadAsTheirKerasVersionDefinesThem) {
  const std::vector<NodeSpec> nodes = {
      {Input({nullptr, 6}), {}},
      {Dense("a", 4, "hard_sigmoid"), {"input_layer"}},
      {Layer("ReLU",
             {{"name", "r6"}, {"max_value", 6.0}, {"negative_slope", 0.0}, {"threshold", 0.0}}),
       {"a"}},
      {Layer("ELU", {{"name", "e"}, {"alpha", 0.5}}), {"r6"}},
      {Dense("b", 4, "selu"), {"e"}},
      {Dense("c", 4, "relu6"), {"b"}},
      {Dense("out", 3, "linear"), {"c"}},
  };
  Json config = Graph(nodes, "out");
  auto m = Parse(config);
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& l = m->layers();
  EXPECT_EQ(l[0].activation, Activation::kHardSigmoid);
  EXPECT_EQ(l[1].activation, Activation::kClippedRelu);
  EXPECT_EQ(l[1].alpha, 6.0f);
  EXPECT_EQ(l[2].activation, Activation::kElu);
  EXPECT_EQ(l[2].alpha, 0.5f);
  EXPECT_EQ(l[3].activation, Activation::kSelu);
  EXPECT_EQ(l[4].activation, Activation::kClippedRelu);
  config["keras_version"] = "2.15.0";  // tf.keras's to_json()
  m = Parse(config);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->layers()[0].activation, Activation::kHardSigmoidKeras2);
  // A threshold, or a max_value with a slope, is refused.
  Json thr = Graph(nodes, "out");
  thr["config"]["layers"][2]["config"]["threshold"] = 0.5;
  EXPECT_THAT(std::string(Parse(thr).status().message()), HasSubstr("ReLU with a threshold"));
  Json both = Graph(nodes, "out");
  both["config"]["layers"][2]["config"]["negative_slope"] = 0.1;
  EXPECT_THAT(std::string(Parse(both).status().message()),
              HasSubstr("ReLU with both max_value and negative_slope"));
}

// trainable=False: the layer is frozen, its variables moving averages of
// momentum 1 (never updated), a BatchNormalization's moving statistics too.
TEST(KerasGraphTest, AFrozenLayersVariablesNeverChange) {
  Json frozen = Conv("frozen", 4);
  frozen["config"]["trainable"] = false;
  Json bn = Layer("BatchNormalization", {{"name", "bn"}, {"trainable", false}, {"momentum", 0.9}});
  auto m = Parse(
      Sequential({Input({nullptr, 8, 8, 1}), frozen, bn, Flatten(), Dense("d", 2, "linear")}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->layers()[0].trainable);
  EXPECT_FALSE(m->layers()[1].trainable);
  EXPECT_TRUE(m->layers()[2].trainable);
  std::vector<std::string> frozen_names;
  for (size_t v = 0; v < m->variables().size(); ++v) {
    const auto& ma = m->moving_averages()[v];
    if (ma.has_value() && *ma == 1.0f) frozen_names.push_back(m->variables()[v].name);
  }
  EXPECT_THAT(frozen_names,
              ::testing::ElementsAre("frozen/kernel", "frozen/bias", "bn/gamma", "bn/beta",
                                     "bn/moving_mean", "bn/moving_variance"));
  EXPECT_FALSE(m->moving_averages()[6].has_value());  // d/kernel
}

// A Flatten's output taken by a layer other than Dense (a
// BatchNormalization, a merge) is made (features,) by a kFlatten layer
// first; a Dense takes the flattened view as it is.
TEST(KerasGraphTest, AFlattenIsMaterializedWhereADenseDoesNotTakeIt) {
  auto bn =
      Parse(Sequential({Input({nullptr, 4, 4, 2}), Flatten(),
                        Layer("BatchNormalization", {{"name", "bn"}}), Dense("d", 2, "linear")}));
  ASSERT_TRUE(bn.ok()) << bn.status();
  ASSERT_EQ(bn->layers().size(), 3u);
  EXPECT_EQ(bn->layers()[0].kind, LayerSpec::kFlatten);
  EXPECT_EQ(bn->graph().tensor(1).shape, (Shape{32}));
  EXPECT_EQ(bn->variables()[0].name, "bn/gamma");
  EXPECT_EQ(bn->variables()[0].shape, (Shape{32}));
  const std::vector<NodeSpec> nodes = {
      {Input({nullptr, 4, 4, 2}), {}},
      {Conv("a", 3, "relu"), {"input_layer"}},
      {Layer("Flatten", {{"name", "fa"}}), {"a"}},
      {Layer("Flatten", {{"name", "fi"}}), {"input_layer"}},
      {Layer("Concatenate", {{"name", "cat"}}), {"fa", "fi"}},
      {Dense("out", 3, "linear"), {"cat"}},
  };
  auto m = Parse(Graph(nodes, "out"));
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<LayerSpec::Kind> kinds;
  for (const LayerSpec& l : m->layers()) kinds.push_back(l.kind);
  EXPECT_THAT(kinds,
              ::testing::ElementsAre(LayerSpec::kConv, LayerSpec::kFlatten, LayerSpec::kFlatten,
                                     LayerSpec::kConcat, LayerSpec::kDense));
  EXPECT_EQ(m->graph().tensor(4).shape, (Shape{48 + 32}));
  auto plain = Parse(Sequential({Input({nullptr, 4, 4, 2}), Flatten(), Dense("d", 2, "linear")}));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->layers().size(), 1u);  // the Dense flattens: no copy
}

TEST(KerasGraphTest, WhatAGraphMayNotBeIsAnErrorNamingIt) {
  struct Case {
    Json model;
    std::string want;
  };
  Json shared = Graph({{Input({nullptr, 8}), {}},
                       {Dense("a", 8, "relu"), {"input_layer"}},
                       {Dense("out", 2, "linear"), {"a"}}},
                      "out");
  shared["config"]["layers"][1]["inbound_nodes"].push_back(
      shared["config"]["layers"][1]["inbound_nodes"][0]);
  Json two_inputs = Graph({{Input({nullptr, 8}), {}},
                           {Dense("a", 8, "relu"), {"input_layer"}},
                           {Dense("out", 2, "linear"), {"a"}}},
                          "out");
  Json second = Input({nullptr, 8});
  second["config"]["name"] = "other";
  second["name"] = "other";
  second["inbound_nodes"] = Json::array();
  two_inputs["config"]["layers"].push_back(second);
  const std::vector<Case> cases = {
      {Graph({{Input({nullptr, 8, 8, 1}), {}},
              {Conv("a", 4, "relu"), {"input_layer"}},
              {Pool("p"), {"a"}},
              {Merge("Add", "add"), {"a", "p"}},
              {Gap(), {"add"}},
              {Dense("out", 2, "linear"), {"gap"}}},
             "out"),
       "layer \"add\" (Add): adds inputs of shapes [8,8,4] and [4,4,4]; they must be equal"},
      {Graph({{Input({nullptr, 8}), {}},
              {Dense("a", 8, "relu"), {"input_layer"}},
              {Merge("Add", "add"), {"a"}},
              {Dense("out", 2, "linear"), {"add"}}},
             "out"),
       "layer \"add\" (Add): takes 1 input(s); a merge takes two or more"},
      {Graph({{Input({nullptr, 8}), {}},
              {Dense("a", 8, "relu"), {"input_layer"}},
              {Dense("b", 8, "relu"), {"input_layer"}},
              {Merge("Subtract", "sub"), {"a", "b", "a"}},
              {Dense("out", 2, "linear"), {"sub"}}},
             "out"),
       "layer \"sub\" (Subtract): subtracts 3 inputs; it takes exactly two"},
      {Graph({{Input({nullptr, 8, 8, 1}), {}},
              {Conv("a", 4, "relu"), {"input_layer"}},
              {Pool("p"), {"a"}},
              {Layer("Concatenate", {{"name", "cat"}, {"axis", -1}}), {"a", "p"}},
              {Gap(), {"cat"}},
              {Dense("out", 2, "linear"), {"gap"}}},
             "out"),
       "layer \"cat\" (Concatenate): concatenates inputs of shapes [8,8,4] and [4,4,4]; the axes "
       "other than the concatenated one must be equal"},
      {Graph({{Input({nullptr, 8}), {}},
              {Dense("a", 8, "relu"), {"input_layer"}},
              {Dense("b", 8, "relu"), {"input_layer"}},
              {Layer("Concatenate", {{"name", "cat"}, {"axis", 0}}), {"a", "b"}},
              {Dense("out", 2, "linear"), {"cat"}}},
             "out"),
       "layer \"cat\" (Concatenate): axis 0 of rank-2 inputs (the batch axis, or none)"},
      {shared, "layer \"a\" is called 2 times (a shared layer): not supported yet"},
      {two_inputs,
       "input_layers (input_layer) are not the layers that take no input (input_layer, other)"},
      {Graph({{Input({nullptr, 8}), {}},
              {Dense("a", 8, "relu"), {"input_layer"}},
              {Dense("out", 2, "linear"), {"a"}},
              {Dense("x", 2, "linear"), {"a"}}},
             "out"),
       "the output of layer \"x\" is not used"},
      {Graph({{Input({nullptr, 8}), {}},
              {Dense("a", 8, "relu"), {"b"}},
              {Dense("b", 8, "relu"), {"a"}},
              {Dense("out", 2, "linear"), {"b"}}},
             "out"),
       "the graph has a cycle"},
      {Graph({{Input({nullptr, 8}), {}},
              {Dense("a", 8, "relu"), {"nowhere"}},
              {Dense("out", 2, "linear"), {"a"}}},
             "out"),
       "layer \"a\" takes \"nowhere\", which is no layer of the model"},
      {Graph({{Input({nullptr, 8}), {}},
              {Layer("Rescaling", {{"name", "scale"}, {"scale", 0.5}}), {"input_layer"}},
              {Dense("a", 2, "linear"), {"input_layer"}},
              {Merge("Add", "add"), {"scale", "a"}},
              {Dense("out", 2, "linear"), {"add"}}},
             "out"),
       "layer \"scale\" (Rescaling): a Rescaling or Normalization layer other than the first"},
  };
  for (const Case& c : cases) {
    auto m = Parse(c.model);
    ASSERT_FALSE(m.ok()) << c.want;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.want;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.want));
  }
}

// A binary classifier: one sigmoid unit (or one logit) under
// binary_crossentropy, its gradient through the graph matching central
// differences of the loss, and its outputs what Predict returns.
TEST(KerasGraphTest, ABinaryClassifierTrainsOnOneSigmoidOrLogit) {
  for (const std::string act : {"sigmoid", "linear"}) {
    SCOPED_TRACE(act);
    auto m = Parse(Sequential({Input({nullptr, 6}), Dense("h", 5, "tanh"), Dense("out", 1, act)}));
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->classes(), 1);
    EXPECT_EQ(m->output_activation(), act);
    auto backend = CreateCpuBackend(1);
    ASSERT_TRUE(backend.ok());
    auto exec = Executor::Create(&*m, backend->get());
    ASSERT_TRUE(exec.ok());
    auto params = m->Initialize(3);
    std::mt19937 rng(7);
    std::vector<float> x(4 * 6);
    for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    const std::vector<int32_t> labels = {0, 1, 1, 0};
    LossOptions o;
    o.kind = LossKind::kBinaryCrossEntropy;
    o.label_smoothing = 0.1f;
    const double at =
        ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, labels, o, params, 3);
    // Evaluation gives the same loss; Predict the model's outputs.
    ASSERT_TRUE((*exec)->SetParameters(params).ok());
    StepResult e;
    ASSERT_TRUE((*exec)->Evaluate(x, labels, o, &e).ok());
    EXPECT_DOUBLE_EQ(e.loss_sum, at);
    std::vector<float> out;
    ASSERT_TRUE((*exec)->Predict(x, &out).ok());
    ASSERT_EQ(out.size(), 4u);
    int64_t correct = 0;
    for (size_t i = 0; i < 4; ++i) {
      if (act == "sigmoid") {
        EXPECT_TRUE(out[i] > 0 && out[i] < 1) << out[i];
      }
      correct += (out[i] > 0.5f) == (labels[i] == 1);
    }
    EXPECT_EQ(e.correct, correct);
    // A label other than 0 or 1 names the example.
    StepResult bad;
    auto status = (*exec)->ComputeGradients(x, std::vector<int32_t>{0, 1, 2, 0}, o, &bad);
    EXPECT_THAT(status.message(), HasSubstr("label 2 of example 2 is not 0 or 1"));
  }
}

// A regression: an output of 2 units (a sigmoid on one of the checks)
// under each regression loss, on float targets; the gradient through the
// graph matches central differences of the loss, evaluation gives the
// same loss, and there is no accuracy (nothing counted correct).
TEST(KerasGraphTest, ARegressionTrainsOnFloatTargets) {
  for (const std::string act : {"linear", "sigmoid"}) {
    for (LossKind kind :
         {LossKind::kMeanSquaredError, LossKind::kMeanAbsoluteError, LossKind::kHuber}) {
      SCOPED_TRACE(::testing::Message() << act << " loss " << static_cast<int>(kind));
      auto m =
          Parse(Sequential({Input({nullptr, 5}), Dense("h", 6, "tanh"), Dense("out", 2, act)}));
      ASSERT_TRUE(m.ok()) << m.status();
      auto backend = CreateCpuBackend(1);
      ASSERT_TRUE(backend.ok());
      auto exec = Executor::Create(&*m, backend->get());
      ASSERT_TRUE(exec.ok());
      auto params = m->Initialize(5);
      std::mt19937 rng(3);
      std::vector<float> x(4 * 5);
      for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
      // Far enough from the outputs that no error sits at |e|'s kink or
      // at Huber's delta within the differences' step.
      const std::vector<float> targets = {2.0f, -1.5f, 0.9f, 3.0f, -2.0f, 1.7f, -0.8f, 2.5f};
      const std::vector<int32_t> labels(4, 0);
      LossOptions o;
      o.kind = kind;
      o.targets = targets;
      o.huber_delta = 1.5f;
      const std::vector<float> weights = {1.0f, 0.5f, 2.0f, 1.0f};
      o.weights = weights;
      const double at =
          ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, labels, o, params, 2);
      EXPECT_GT(at, 0);
      ASSERT_TRUE((*exec)->SetParameters(params).ok());
      StepResult e;
      ASSERT_TRUE((*exec)->Evaluate(x, labels, o, &e).ok());
      EXPECT_DOUBLE_EQ(e.loss_sum, at);
      EXPECT_EQ(e.correct, 0);
      // Targets of another size than the outputs are refused.
      LossOptions short_targets = o;
      short_targets.targets = absl::MakeConstSpan(targets).subspan(0, 6);
      StepResult bad;
      EXPECT_THAT((*exec)->ComputeGradients(x, labels, short_targets, &bad).message(),
                  HasSubstr("6 targets"));
    }
  }
}

Json Embedding(const std::string& name, int input_dim, int output_dim) {
  return Layer("Embedding",
               {{"name", name},
                {"input_dim", input_dim},
                {"output_dim", output_dim},
                {"embeddings_initializer",
                 {{"module", "keras.initializers"},
                  {"class_name", "RandomUniform"},
                  {"config", {{"minval", -0.05}, {"maxval", 0.05}, {"seed", nullptr}}}}},
                {"embeddings_regularizer", nullptr},
                {"activity_regularizer", nullptr},
                {"embeddings_constraint", nullptr},
                {"mask_zero", false}});
}

// Embeddings of two inputs of ids (int32, as keras.Input(dtype="int32")
// declares them), one a bag of 3 ids flattened, concatenated with an input
// of values into a Dense: the rows looked up are the tables', the inputs of
// ids are marked with their tables' bound, and the gradients (the tables'
// rows included: repeated ids add up) match central differences.
TEST(KerasGraphTest, EmbeddingsLookUpRowsOfInputsOfIdsAndTrainThem) {
  auto input = [](const std::string& name, Json shape, const char* dtype) {
    Json l = Input(std::move(shape));
    l["config"]["name"] = name;
    l["config"]["dtype"] = dtype;
    return l;
  };
  Json j =
      Graph({{input("user", {nullptr, 1}, "int32"), {}},
             {input("items", {nullptr, 3}, "int64"), {}},
             {input("dense", {nullptr, 2}, "float32"), {}},
             {Embedding("user_emb", 5, 2), {"user"}},
             {Embedding("item_emb", 7, 2), {"items"}},
             {Layer("Flatten", {{"name", "fu"}, {"data_format", "channels_last"}}), {"user_emb"}},
             {Layer("Flatten", {{"name", "fi"}, {"data_format", "channels_last"}}), {"item_emb"}},
             {Layer("Concatenate", {{"name", "cat"}, {"axis", -1}}), {"fu", "fi", "dense"}},
             {Dense("out", 2, "linear"), {"cat"}}},
            "out");
  j["config"]["input_layers"] = {{"user", 0, 0}, {"items", 0, 0}, {"dense", 0, 0}};
  auto m = Parse(j);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->inputs().size(), 3u);
  EXPECT_EQ(m->inputs()[0].id_limit, 5);
  EXPECT_EQ(m->inputs()[0].table, "user_emb");
  EXPECT_EQ(m->inputs()[1].id_limit, 7);
  EXPECT_EQ(m->inputs()[2].id_limit, 0);
  EXPECT_THAT(Variables(*m),
              ::testing::ElementsAre("user_emb/embeddings [5,2]", "item_emb/embeddings [7,2]",
                                     "out/kernel [10,2]", "out/bias [2]"));
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto params = m->Initialize(4);
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  // Two examples: user, 3 items (one repeated), 2 values.
  const std::vector<float> x = {4, 0, 6, 0, 0.5f, -1, 1, 3, 3, 2, 2, 0.25f};
  std::vector<float> out;
  ASSERT_TRUE((*exec)->Predict(x, &out).ok());
  ASSERT_EQ(out.size(), 4u);
  for (int i = 0; i < 2; ++i) {
    const float* e = &x[i * 6];
    std::vector<double> cat;
    for (int k = 0; k < 2; ++k) cat.push_back(params[0][static_cast<int>(e[0]) * 2 + k]);
    for (int f = 1; f <= 3; ++f) {
      for (int k = 0; k < 2; ++k) cat.push_back(params[1][static_cast<int>(e[f]) * 2 + k]);
    }
    cat.push_back(e[4]);
    cat.push_back(e[5]);
    for (int u = 0; u < 2; ++u) {
      double want = params[3][u];
      for (int r = 0; r < 10; ++r) want += cat[r] * params[2][r * 2 + u];
      EXPECT_NEAR(out[i * 2 + u], want, 1e-6) << "example " << i << " unit " << u;
    }
  }
  LossOptions o;
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {0, 1}, o, params, 1);
  // A row no id touched has a zero gradient.
  std::vector<std::vector<float>> grads;
  ASSERT_TRUE((*exec)->CopyGradients(&grads).ok());
  EXPECT_EQ(grads[1][5 * 2], 0.0f) << "item 5 is in no example";
  // An id out of the table's range is refused by the kernel, naming it.
  std::vector<float> bad = x;
  bad[1] = 7;
  StepResult r;
  absl::Status refused = (*exec)->ComputeGradients(bad, {0, 1}, o, &r);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("is not a row of a table of 7 rows"));

  // What is refused: an Embedding of another layer's output, mask_zero on
  // ids that are not one sequence (a Flatten drops the mask, as Keras's).
  Json of_dense =
      Graph({{input("v", {nullptr, 2}, "float32"), {}},
             {Dense("d", 2, "linear"), {"v"}},
             {Embedding("e", 4, 2), {"d"}},
             {Layer("Flatten", {{"name", "f"}, {"data_format", "channels_last"}}), {"e"}},
             {Dense("out", 2, "linear"), {"f"}}},
            "out");
  of_dense["config"]["input_layers"] = {{"v", 0, 0}};
  EXPECT_THAT(Parse(of_dense).status().message(), HasSubstr("takes another layer's output"));
  Json masked = Sequential({input("ids", {nullptr, 3}, "int32"), Embedding("e", 4, 2), Flatten(),
                            Dense("out", 2, "linear")});
  masked["config"]["layers"][1]["config"]["mask_zero"] = true;
  EXPECT_TRUE(Parse(masked).ok()) << Parse(masked).status();
  Json grid = Sequential({input("ids", {nullptr, 3, 2}, "int32"), Embedding("e", 4, 2), Flatten(),
                          Dense("out", 2, "linear")});
  grid["config"]["layers"][1]["config"]["mask_zero"] = true;
  EXPECT_THAT(Parse(grid).status().message(),
              HasSubstr("mask_zero=True on ids of shape [3,2] (supported: a sequence"));
}

// Dot as a DLRM's interaction and as matrix factorization: the stacked
// rows of two tables and a dense input reshaped to (1, 2), concatenated
// along the steps into (4, 2), dotted with itself over (2, 2) into (4, 4);
// two rows dotted over (1, 1) into (1,); and a transposed pair over (1, 2).
// Outputs are the products Keras defines; gradients (a tensor that feeds
// both factors gets both contributions) match central differences.
TEST(KerasGraphTest, DotIsKerasBatchDotAndTrains) {
  auto input = [](const std::string& name, Json shape, const char* dtype) {
    Json l = Input(std::move(shape));
    l["config"]["name"] = name;
    l["config"]["dtype"] = dtype;
    return l;
  };
  auto flatten = [](const std::string& name) {
    return Layer("Flatten", {{"name", name}, {"data_format", "channels_last"}});
  };
  auto dot = [](const std::string& name, Json axes) {
    return Layer("Dot", {{"name", name}, {"axes", axes}, {"normalize", false}});
  };
  Json reshape = Layer("Reshape", {{"name", "r"}, {"target_shape", {1, 2}}});
  Json j = Graph({{input("ids", {nullptr, 3}, "int32"), {}},
                  {input("v", {nullptr, 2}, "float32"), {}},
                  {Embedding("emb", 6, 2), {"ids"}},
                  {reshape, {"v"}},
                  {Layer("Concatenate", {{"name", "stack"}, {"axis", 1}}), {"emb", "r"}},
                  {dot("inter", {2, 2}), {"stack", "stack"}},
                  {Embedding("emb2", 6, 3), {"ids"}},
                  {dot("tr", {1, 2}), {"emb", "emb2"}},
                  {flatten("fi"), {"inter"}},
                  {flatten("ft"), {"tr"}},
                  {Dense("p", 2, "tanh"), {"v"}},
                  {dot("mf", -1), {"p", "v"}},
                  {Layer("Concatenate", {{"name", "cat"}, {"axis", -1}}), {"fi", "ft", "mf"}},
                  {Dense("out", 2, "linear"), {"cat"}}},
                 "out");
  j["config"]["input_layers"] = {{"ids", 0, 0}, {"v", 0, 0}};
  auto m = Parse(j);
  ASSERT_TRUE(m.ok()) << m.status();
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto params = m->Initialize(6);
  // Larger values than the initializer's, so the products are not tiny.
  for (auto& p : params) {
    for (size_t i = 0; i < p.size(); ++i) p[i] = 0.3f * std::sin(1.7f * i + p.size());
  }
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  const std::vector<float> x = {1, 4, 1, 0.5f, -1, 5, 0, 2, 2, 0.25f};
  LossOptions o;
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {0, 1}, o, params, 1);
  // The Dots' values, through the linear head of one example: the gradient
  // of its kernel's row r is cat[r] times dL/dlogit (the bias's gradient).
  const std::vector<float> x0(x.begin(), x.begin() + 5);
  std::vector<std::vector<double>> rows;  // the interaction's: e1, e4, e1 and v
  for (int f = 0; f < 3; ++f) {
    rows.push_back(
        {params[0][static_cast<int>(x0[f]) * 2], params[0][static_cast<int>(x0[f]) * 2 + 1]});
  }
  rows.push_back({x0[3], x0[4]});
  StepResult r;
  std::vector<std::vector<float>> grads;
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  ASSERT_TRUE((*exec)->ComputeGradients(x0, {0}, o, &r).ok());
  ASSERT_TRUE((*exec)->CopyGradients(&grads).ok());
  const int kernel = 4;  // emb, emb2, p/kernel, p/bias, out/kernel
  ASSERT_EQ(m->variables()[kernel].name, "out/kernel");
  ASSERT_EQ(m->variables()[kernel].shape, (Shape{16 + 6 + 1, 2}));
  const double dlogit = grads[kernel + 1][0];  // out/bias's gradient is dL/dlogit
  ASSERT_NE(dlogit, 0.0);
  for (int i = 0; i < 4; ++i) {
    for (int jj = 0; jj < 4; ++jj) {
      const double want = rows[i][0] * rows[jj][0] + rows[i][1] * rows[jj][1];
      EXPECT_NEAR(grads[kernel][(i * 4 + jj) * 2] / dlogit, want, 1e-5) << i << "," << jj;
    }
  }
  // Dot over (1, 2) of emb (3, 2) and emb2 (3, 3): (2, 3), [a][b] the sum
  // over k of emb[k][a] * emb2[b][k] (emb's steps against emb2's values).
  for (int a = 0; a < 2; ++a) {
    for (int bb = 0; bb < 3; ++bb) {
      double want = 0;
      for (int k = 0; k < 3; ++k) {
        want += params[0][static_cast<int>(x0[k]) * 2 + a] *
                params[1][static_cast<int>(x0[bb]) * 3 + k];
      }
      EXPECT_NEAR(grads[kernel][(16 + a * 3 + bb) * 2] / dlogit, want, 1e-5) << a << "," << bb;
    }
  }
  // normalize=True is read (its math: the L2Normalize op's reference and
  // KerasModelTest.mf's normalized twin).
  Json normalized = j;
  for (Json& l : normalized["config"]["layers"]) {
    if (l["config"]["name"] == "mf") l["config"]["normalize"] = true;
  }
  auto cosine = Parse(normalized);
  ASSERT_TRUE(cosine.ok()) << cosine.status();
  for (size_t i = 0; i < cosine->layers().size(); ++i) {
    EXPECT_EQ(cosine->layers()[i].dot_normalize, cosine->layers()[i].name == "mf");
    EXPECT_FALSE(m->layers()[i].dot_normalize);
  }
  auto cosine_exec = Executor::Create(&*cosine, backend->get());
  ASSERT_TRUE(cosine_exec.ok()) << cosine_exec.status();
  ASSERT_TRUE((*cosine_exec)->SetParameters(params).ok());
  ExpectGradientsMatchCentralDifferences(cosine_exec->get(), *cosine, x, {0, 1}, o, params, 1);
  // What is refused: inputs of different ranks.
  Json ranks = Graph({{input("ids", {nullptr, 3}, "int32"), {}},
                      {input("v", {nullptr, 2}, "float32"), {}},
                      {Embedding("emb", 6, 2), {"ids"}},
                      {dot("d", {2, 1}), {"emb", "v"}},
                      {flatten("f"), {"d"}},
                      {Dense("out", 2, "linear"), {"f"}}},
                     "out");
  ranks["config"]["input_layers"] = {{"ids", 0, 0}, {"v", 0, 0}};
  EXPECT_THAT(Parse(ranks).status().message(), HasSubstr("both (K,) or both of rank 2"));
}

// One input of ids, Sequential: it becomes the model's one packed input.
TEST(KerasGraphTest, ASequentialEmbeddingMarksItsInputAsIds) {
  Json input = Input({nullptr, 4});
  input["config"]["dtype"] = "int32";
  input["config"]["name"] = "tokens";
  auto m = Parse(
      Sequential({input, Embedding("e", 10, 3),
                  Layer("GlobalAveragePooling1D",
                        {{"name", "avg"}, {"data_format", "channels_last"}, {"keepdims", false}}),
                  Dense("out", 2, "linear")}));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->inputs().size(), 1u);
  EXPECT_EQ(m->inputs()[0].name, "tokens");
  EXPECT_EQ(m->inputs()[0].id_limit, 10);
  EXPECT_EQ(m->input_shape(), (Shape{4}));
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto params = m->Initialize(5);
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  const std::vector<float> x = {1, 2, 2, 9};
  std::vector<float> out;
  ASSERT_TRUE((*exec)->Predict(x, &out).ok());
  for (int u = 0; u < 2; ++u) {
    double want = params[2][u];
    for (int k = 0; k < 3; ++k) {
      double mean = 0;
      for (float id : x) mean += params[0][static_cast<int>(id) * 3 + k];
      want += mean / 4 * params[1][k * 2 + u];
    }
    EXPECT_NEAR(out[u], want, 1e-6) << u;
  }
  LossOptions o;
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {1}, o, params, 1);
}

// Several inputs: the model's input packs them in input_layers' order
// (not the config's), each a kInput layer taking its block; the output is
// the one Concatenate and Dense of the two make, and the gradients through
// the packed input match central differences.
TEST(KerasGraphTest, SeveralInputsArePackedInTheModelsInputOrder) {
  auto input = [](const std::string& name, Json shape) {
    Json l = Input(std::move(shape));
    l["config"]["name"] = name;
    return l;
  };
  Json j = Graph({{input("g", {nullptr, 2}), {}},
                  {input("f", {nullptr, 3}), {}},
                  {Layer("Concatenate", {{"name", "cat"}, {"axis", -1}}), {"g", "f"}},
                  {Dense("out", 2, "linear"), {"cat"}}},
                 "out");
  j["config"]["input_layers"] = {{"f", 0, 0}, {"g", 0, 0}};
  auto m = Parse(j);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->inputs().size(), 2u);
  EXPECT_EQ(m->inputs()[0].name, "f");
  EXPECT_EQ(m->inputs()[0].shape, (Shape{3}));
  EXPECT_EQ(m->inputs()[0].offset, 0);
  EXPECT_EQ(m->inputs()[1].name, "g");
  EXPECT_EQ(m->inputs()[1].offset, 3);
  EXPECT_EQ(m->input_shape(), (Shape{5}));
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok());
  auto params = m->Initialize(2);
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  // Two examples, packed f then g.
  const std::vector<float> x = {1, 2, 3, 4, 5, -1, 0.5f, 2, -3, 1.5f};
  std::vector<float> out;
  ASSERT_TRUE((*exec)->Predict(x, &out).ok());
  ASSERT_EQ(out.size(), 4u);
  for (int i = 0; i < 2; ++i) {
    // Concatenate([g, f]): the kernel's rows are g's two, then f's three.
    const float* e = &x[i * 5];
    const float cat[5] = {e[3], e[4], e[0], e[1], e[2]};
    for (int u = 0; u < 2; ++u) {
      double want = params[1][u];
      for (int r = 0; r < 5; ++r) want += static_cast<double>(cat[r]) * params[0][r * 2 + u];
      EXPECT_NEAR(out[i * 2 + u], want, 1e-5) << "example " << i << " unit " << u;
    }
  }
  LossOptions o;
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {0, 1}, o, params, 1);
  // What is refused, naming it: an input without a shape, and a Rescaling
  // after one of several inputs (the examples are read as they are).
  Json no_shape = j;
  no_shape["config"]["layers"][0]["config"].erase("batch_shape");
  EXPECT_THAT(Parse(no_shape).status().message(),
              HasSubstr("the input \"g\" declares no batch_shape"));
  Json rescaled = Graph({{input("g", {nullptr, 2}), {}},
                         {input("f", {nullptr, 3}), {}},
                         {Layer("Rescaling", {{"name", "scale"}, {"scale", 0.5}}), {"f"}},
                         {Layer("Concatenate", {{"name", "cat"}, {"axis", -1}}), {"g", "scale"}},
                         {Dense("out", 2, "linear"), {"cat"}}},
                        "out");
  rescaled["config"]["input_layers"] = {{"f", 0, 0}, {"g", 0, 0}};
  EXPECT_THAT(Parse(rescaled).status().message(),
              HasSubstr("a Rescaling or Normalization layer other than the first layer"));
}

// ZeroPadding2D and Cropping2D: copies with a zero border, in every form
// Keras takes the sizes; an identity Dense shows the values.
TEST(KerasGraphTest, PaddingAndCroppingMoveTheValuesAndZeroTheBorder) {
  auto identity_head = [](const Model& m, int units) {
    std::vector<std::vector<float>> p = m.Initialize(1);
    p[0].assign(static_cast<size_t>(units) * units, 0.0f);
    for (int i = 0; i < units; ++i) p[0][static_cast<size_t>(i) * units + i] = 1.0f;
    p[1].assign(static_cast<size_t>(units), 0.0f);
    return p;
  };
  auto predict = [&](const Json& j, int units, const std::vector<float>& x) {
    auto m = Parse(j);
    EXPECT_TRUE(m.ok()) << m.status();
    auto backend = CreateCpuBackend(1);
    auto exec = Executor::Create(&*m, backend->get());
    EXPECT_TRUE(exec.ok());
    EXPECT_TRUE((*exec)->SetParameters(identity_head(*m, units)).ok());
    std::vector<float> out;
    EXPECT_TRUE((*exec)->Predict(x, &out).ok());
    return out;
  };
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};  // a 2x3 image, one channel
  auto pad = [](Json padding) {
    return Layer("ZeroPadding2D", {{"name", "pad"}, {"padding", padding}});
  };
  // ((1, 0), (0, 1)): a row on top, a column on the right: 3x4.
  EXPECT_EQ(predict(Sequential({Input({nullptr, 2, 3, 1}), pad({{1, 0}, {0, 1}}), Flatten(),
                                Dense("out", 12, "linear")}),
                    12, x),
            (std::vector<float>{0, 0, 0, 0, 1, 2, 3, 0, 4, 5, 6, 0}));
  // 1: every side; (1, 0): rows only.
  EXPECT_EQ(predict(Sequential({Input({nullptr, 2, 3, 1}), pad({1, 0}), Flatten(),
                                Dense("out", 12, "linear")}),
                    12, x),
            (std::vector<float>{0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0}));
  EXPECT_EQ(predict(Sequential(
                        {Input({nullptr, 2, 3, 1}), pad(1), Flatten(), Dense("out", 20, "linear")}),
                    20, x)[6],
            1.0f);
  // Cropping ((1, 0), (1, 1)) of the 2x3 image leaves its (1, 1): 5.
  EXPECT_EQ(
      predict(Sequential({Input({nullptr, 2, 3, 1}),
                          Layer("Cropping2D", {{"name", "crop"}, {"cropping", {{1, 0}, {1, 1}}}}),
                          Flatten(), Dense("out", 1, "linear")}),
              1, x),
      (std::vector<float>{5}));
  // What is refused, naming the layer and the value.
  const std::vector<std::pair<Json, std::string>> bad = {
      {Layer("Cropping2D", {{"name", "crop"}, {"cropping", {{1, 1}, {0, 0}}}}),
       "layer \"crop\" (Cropping2D): crops [2,3,1] by [[1,1],[0,0]]: nothing is left"},
      {pad(-1), "'padding' -1 is not an int"},
      {pad({{1, 2, 3}}), "'padding' [[1,2,3]] is not an int"},
      {Layer("ZeroPadding2D", {{"name", "pad"}, {"padding", 1}, {"data_format", "channels_first"}}),
       "data_format \"channels_first\""},
  };
  for (const auto& [layer, message] : bad) {
    auto m =
        Parse(Sequential({Input({nullptr, 2, 3, 1}), layer, Flatten(), Dense("out", 2, "linear")}));
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(m.status().message(), HasSubstr(message));
  }
}

// A cropped tensor that also feeds an Add: its gradient is the padded-back
// branch's plus the Add's, the border of the crop's part zero at every
// step (a second step's gradients too match central differences).
TEST(KerasGraphTest, GradientsThroughPaddingAndCroppingMatchCentralDifferences) {
  Json padded = Layer("ZeroPadding2D", {{"name", "pad2"}, {"padding", {{1, 0}, {2, 1}}}});
  Json j = Graph(
      {{Input({nullptr, 6, 6, 1}), {}},
       {Layer("ZeroPadding2D", {{"name", "pad"}, {"padding", {{1, 2}, {0, 1}}}}), {"input_layer"}},
       {Conv("a", 2, "tanh"), {"pad"}},
       {Layer("Cropping2D", {{"name", "crop"}, {"cropping", {{1, 0}, {2, 1}}}}), {"a"}},
       {Conv("b", 2, "tanh"), {"crop"}},
       {padded, {"b"}},
       {Merge("Add", "add"), {"a", "pad2"}},
       {Gap(), {"add"}},
       {Dense("out", 3, "linear"), {"gap"}}},
      "out");
  auto m = Parse(j);
  ASSERT_TRUE(m.ok()) << m.status();
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok());
  auto params = m->Initialize(4);
  std::mt19937 rng(9);
  std::vector<float> other(2 * 36), x(2 * 36);
  for (float& v : other) v = static_cast<float>(rng() % 2000) / 500.0f - 2.0f;
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  // A first step on other values leaves its gradients in the buffers.
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  StepResult r;
  ASSERT_TRUE((*exec)->ComputeGradients(other, std::vector<int32_t>{2, 1}, LossOptions{}, &r).ok());
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {0, 2}, LossOptions{}, params, 1);
}

// A Maximum or Minimum of more than two is Keras's left fold: a chain of
// layers of two ("max/1", then "max"), whose gradients match central
// differences.
// Conv2D's dilation_rate and groups, and DepthwiseConv2D (Keras's
// kernel [KH, KW, C, M]): shapes and counts as Keras's summary
// gives them, and the executor's gradients through them against central
// differences of its loss.
TEST(KerasConfigTest, DilatedGroupedAndDepthwiseConvolutions) {
  Json grouped = Conv("grouped", 6, "tanh");
  grouped["config"]["dilation_rate"] = {2, 1};
  grouped["config"]["groups"] = 2;
  Json depthwise = Layer("DepthwiseConv2D", {{"name", "depthwise"},
                                             {"kernel_size", {3, 3}},
                                             {"strides", {2, 2}},
                                             {"padding", "valid"},
                                             {"depth_multiplier", 2},
                                             {"dilation_rate", {1, 1}},
                                             {"activation", "sigmoid"},
                                             {"use_bias", true},
                                             {"depthwise_initializer", "he_uniform"},
                                             {"depthwise_regularizer", nullptr}});
  Json separable = Layer("SeparableConv2D", {{"name", "separable"},
                                             {"filters", 5},
                                             {"kernel_size", {2, 2}},
                                             {"padding", "same"},
                                             {"depth_multiplier", 1},
                                             {"activation", "tanh"},
                                             {"use_bias", true},
                                             {"pointwise_initializer", "glorot_normal"}});
  Json up = Layer("UpSampling2D", {{"name", "up"},
                                   {"size", {2, 1}},
                                   {"data_format", "channels_last"},
                                   {"interpolation", "nearest"}});
  auto m = Parse(Sequential({Input({nullptr, 9, 9, 4}), grouped, depthwise, separable, up,
                             Flatten(), Dense("out", 3, "linear")}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->summary()[0].output, (Shape{9, 9, 6}));
  EXPECT_EQ(m->summary()[0].params, 3 * 3 * 2 * 6 + 6);
  EXPECT_EQ(m->summary()[1].keras_class, "DepthwiseConv2D");
  EXPECT_EQ(m->summary()[1].output, (Shape{4, 4, 12}));  // (9 - 3) / 2 + 1
  EXPECT_EQ(m->summary()[1].params, 3 * 3 * 6 * 2 + 12);
  // A SeparableConv2D: one row of three variables in Keras's order.
  EXPECT_EQ(m->summary()[2].output, (Shape{4, 4, 5}));
  EXPECT_EQ(m->summary()[2].params, 2 * 2 * 12 + 12 * 5 + 5);
  EXPECT_EQ(m->summary()[2].variables, 3);
  EXPECT_THAT(Variables(*m),
              ::testing::ElementsAre("grouped/kernel [3,3,2,6]", "grouped/bias [6]",
                                     "depthwise/kernel [3,3,6,2]", "depthwise/bias [12]",
                                     "separable/depthwise_kernel [2,2,12,1]",
                                     "separable/pointwise_kernel [1,1,12,5]", "separable/bias [5]",
                                     "out/kernel [160,3]", "out/bias [3]"));
  EXPECT_EQ(m->summary()[3].output, (Shape{8, 4, 5}));  // UpSampling2D((2, 1))
  EXPECT_EQ(m->layers()[3].kernel_init.kind, Initializer::Kind::kGlorotNormal);
  EXPECT_EQ(m->layers()[0].window, (Window{3, 3, 1, 1, Padding::kSame, 2, 1, 2}));
  EXPECT_EQ(m->layers()[1].window, (Window{3, 3, 2, 2, Padding::kValid, 1, 1, 6}));
  EXPECT_TRUE(m->layers()[1].depthwise);
  EXPECT_EQ(m->layers()[1].kernel_init.kind, Initializer::Kind::kHeUniform);

  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto params = m->Initialize(5);
  std::mt19937 rng(6);
  for (auto& v : params) {
    for (float& f : v) f = static_cast<float>(rng() % 2000) / 2000.0f - 0.5f;
  }
  std::vector<float> x(3 * 9 * 9 * 4);
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {0, 2, 1}, LossOptions{}, params, 5);
  // UpSampling2D repeats each value over its block.
  {
    // Seen through a Dense of the identity.
    auto small =
        Parse(Sequential({Input({nullptr, 2, 3, 2}), up, Flatten(), Dense("o", 24, "linear")}));
    ASSERT_TRUE(small.ok()) << small.status();
    auto e = Executor::Create(&*small, backend->get());
    ASSERT_TRUE(e.ok()) << e.status();
    std::vector<std::vector<float>> p = {std::vector<float>(24 * 24, 0.0f),
                                         std::vector<float>(24, 0.0f)};
    for (int i = 0; i < 24; ++i) p[0][i * 24 + i] = 1.0f;
    ASSERT_TRUE((*e)->SetParameters(p).ok());
    std::vector<float> in(2 * 3 * 2);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
    std::vector<float> got;
    ASSERT_TRUE((*e)->Predict(in, &got).ok());
    std::vector<float> want;  // rows repeated twice, columns once
    for (int row = 0; row < 4; ++row) {
      for (int col = 0; col < 3; ++col) {
        for (int ch = 0; ch < 2; ++ch) want.push_back(in[(row / 2 * 3 + col) * 2 + ch]);
      }
    }
    EXPECT_EQ(got, want);
  }
  // A depth_multiplier of 0 is Keras's error too.
  Json zero = depthwise;
  zero["config"]["depth_multiplier"] = 0;
  auto bad =
      Parse(Sequential({Input({nullptr, 9, 9, 4}), zero, Flatten(), Dense("o", 3, "linear")}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'depth_multiplier' must be a positive integer"));
}

// Conv2DTranspose: Keras's output extents and kernel shape, its bias (and
// activation) a layer of its own, and the gradients through both against
// central differences.
TEST(KerasGraphTest, ATransposedConvolutionIsAConvolutionsDataGradient) {
  auto transpose = [](const std::string& name, int filters, Json kernel, Json strides,
                      const std::string& padding, const std::string& act, bool bias) {
    return Layer("Conv2DTranspose", {{"name", name},
                                     {"filters", filters},
                                     {"kernel_size", kernel},
                                     {"strides", strides},
                                     {"padding", padding},
                                     {"output_padding", nullptr},
                                     {"dilation_rate", {1, 1}},
                                     {"activation", act},
                                     {"use_bias", bias}});
  };
  auto m = Parse(Sequential({Input({nullptr, 5, 4, 2}),
                             transpose("t1", 3, {3, 2}, {2, 1}, "same", "tanh", true),
                             transpose("t2", 2, {2, 2}, {2, 2}, "valid", "linear", false),
                             transpose("t3", 2, {1, 1}, {1, 2}, "valid", "sigmoid", false),
                             Flatten(), Dense("out", 3, "linear")}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->summary()[0].keras_class, "Conv2DTranspose");
  EXPECT_EQ(m->summary()[0].output, (Shape{10, 4, 3}));  // "same": in x strides
  EXPECT_EQ(m->summary()[0].params, 3 * 2 * 3 * 2 + 3);
  EXPECT_EQ(m->summary()[1].output, (Shape{20, 8, 2}));   // "valid": + max(k - s, 0)
  EXPECT_EQ(m->summary()[2].output, (Shape{20, 16, 2}));  // a 1x1 kernel, stride 2: gaps
  EXPECT_THAT(Variables(*m),
              ::testing::ElementsAre("t1/kernel [3,2,3,2]", "t1/bias [3]", "t2/kernel [2,2,2,3]",
                                     "t3/kernel [1,1,2,2]", "out/kernel [640,3]", "out/bias [3]"));
  std::vector<std::string> names;
  for (const LayerSpec& l : m->layers()) names.push_back(l.name);
  EXPECT_THAT(names, ::testing::ElementsAre("t1", "t1/bias", "t2", "t3", "t3/sigmoid", "out"));
  EXPECT_EQ(m->layers()[1].kind, LayerSpec::kBiasAdd);
  EXPECT_EQ(m->layers()[1].activation, Activation::kTanh);
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto params = m->Initialize(8);
  std::mt19937 rng(13);
  for (auto& v : params) {
    for (float& f : v) f = static_cast<float>(rng() % 2000) / 2000.0f - 0.5f;
  }
  std::vector<float> x(2 * 5 * 4 * 2);
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {1, 2}, LossOptions{}, params, 3);
  // output_padding gives the extent as Keras computes it, (in - 1) x
  // stride + kernel - 2 x pad + output_padding (pad 1 for a 3x3 "same"),
  // and the gradients still match: 5 -> 10 and 4 -> 7.
  Json padded = transpose("t4", 2, {3, 3}, {2, 2}, "same", "linear", true);
  padded["config"]["output_padding"] = {1, 0};
  auto p =
      Parse(Sequential({Input({nullptr, 5, 4, 2}), padded, Flatten(), Dense("o", 3, "linear")}));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->summary()[0].output, (Shape{10, 7, 2}));
  auto pexec = Executor::Create(&*p, backend->get());
  ASSERT_TRUE(pexec.ok()) << pexec.status();
  auto pparams = p->Initialize(9);
  for (auto& v : pparams) {
    for (float& f : v) f = static_cast<float>(rng() % 2000) / 2000.0f - 0.5f;
  }
  ASSERT_TRUE((*pexec)->SetParameters(pparams).ok());
  ExpectGradientsMatchCentralDifferences(pexec->get(), *p, x, {1, 2}, LossOptions{}, pparams, 3);
  // Exit 2 naming the layer: output_padding not below the strides; an
  // extent the convolution does not take back to the input (a 2x2 "same"
  // kernel: (5 - 1) x 2 + 2 - 2 = 8, which it takes to 4, not 5).
  padded["config"]["output_padding"] = {2, 0};
  auto big =
      Parse(Sequential({Input({nullptr, 5, 4, 2}), padded, Flatten(), Dense("o", 3, "linear")}));
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("t4"));
  EXPECT_THAT(big.status().message(), HasSubstr("less than the strides (2, 2)"));
  Json even = transpose("t5", 2, {2, 2}, {2, 2}, "same", "linear", true);
  even["config"]["output_padding"] = {0, 0};
  auto back =
      Parse(Sequential({Input({nullptr, 5, 4, 2}), even, Flatten(), Dense("o", 3, "linear")}));
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("t5"));
  EXPECT_THAT(back.status().message(), HasSubstr("does not take back"));
}

// The layers' output gradients share tensors where their lives do not
// meet: in a chain of four same-shaped Dense layers, two tensors take
// turns (and the output's gradient has its own); the gradients are still
// the loss's.
TEST(KerasGraphTest, GradientsOfOneShapeShareTensorsWhereTheirLivesDoNotMeet) {
  auto m =
      Parse(Sequential({Input({nullptr, 8}), Dense("a", 8, "tanh"), Dense("b", 8, "tanh"),
                        Dense("c", 8, "tanh"), Dense("d", 8, "tanh"), Dense("out", 3, "linear")}));
  ASSERT_TRUE(m.ok()) << m.status();
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok());
  auto params = m->Initialize(2);
  std::mt19937 rng(21);
  std::vector<float> x(4 * 8);
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {0, 2, 1, 1}, LossOptions{}, params,
                                         3);
  // Each tanh's output lives until its own backward; the gradients take
  // their turns in two more [4, 8] tensors (and the logits' one [4, 3]):
  // six [4, 8] and two [4, 3], where a tensor each would take eight and two.
  EXPECT_EQ((*exec)->BufferElements(), (6 * 8 + 2 * 3) * 4);
}

// Evaluation and predict keep no activation for a backward pass: a layer's
// output tensor is reused once its last consumer has run (an identity
// Dropout's consumers count for its input), and what they compute is what
// the training pass's own tensors hold.
TEST(KerasGraphTest, ThePassForwardAloneSharesActivationTensors) {
  const auto graph = [](bool dropout) {
    std::vector<NodeSpec> nodes = {{Input({nullptr, 8}), {}},
                                   {Dense("a", 8, "tanh"), {"input_layer"}},
                                   {Dense("b", 8, "tanh"), {"a"}}};
    if (dropout) nodes.push_back({Layer("Dropout", {{"name", "drop"}, {"rate", 0.5}}), {"b"}});
    nodes.push_back({Dense("c", 8, "tanh"), {dropout ? "drop" : "b"}});
    nodes.push_back({Merge("Add", "add"), {"a", "c"}});
    nodes.push_back({Dense("d", 8, "tanh"), {"add"}});
    nodes.push_back({Dense("out", 3, "linear"), {"d"}});
    return Graph(nodes, "out");
  };
  auto m = Parse(graph(true));
  auto plain = Parse(graph(false));  // the same variables, no Dropout
  ASSERT_TRUE(m.ok() && plain.ok());
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  auto plain_exec = Executor::Create(&*plain, backend->get());
  ASSERT_TRUE(exec.ok() && plain_exec.ok());
  const auto params = m->Initialize(4);
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  ASSERT_TRUE((*plain_exec)->SetParameters(params).ok());
  std::mt19937 rng(22);
  std::vector<float> x(4 * 8);
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  std::vector<float> predicted, again, trained;
  ASSERT_TRUE((*exec)->Predict(x, &predicted).ok());
  // a lives until add, b (through drop) until c; add reuses b's tensor and d
  // a's: three [4, 8] tensors where training keeps six, and the output.
  EXPECT_EQ((*exec)->BufferElements(), (3 * 8 + 3) * 4);
  ASSERT_TRUE((*exec)->Predict(x, &again).ok());
  EXPECT_EQ(again, predicted);
  StepResult r;
  ASSERT_TRUE((*plain_exec)->ComputeGradients(x, {0, 1, 2, 0}, LossOptions{}, &r).ok());
  ASSERT_TRUE((*plain_exec)->CopyOutputs(&trained).ok());
  // Training keeps a, b, c, add and d (each read by a backward) and gives
  // the gradients two more [4, 8] tensors as add's and d's die: seven, and
  // the logits' and their gradient's.
  EXPECT_EQ((*plain_exec)->BufferElements(), (7 * 8 + 2 * 3) * 4);
  EXPECT_EQ(predicted, trained);
}

// Training shares the output tensors no backward op reads (a
// BatchNormalization's under a ReLU layer, an Add's, a gate's product)
// once their forward consumers have run: the steps compute bit for bit
// what they compute with a tensor for every output, in less memory.
TEST(KerasGraphTest, TrainingSharesTheActivationsNoBackwardOpReads) {
  auto bn = [](const std::string& name) {
    return Layer("BatchNormalization", {{"name", name}, {"momentum", 0.9}, {"epsilon", 1e-3}});
  };
  const std::vector<NodeSpec> nodes = {
      {Input({nullptr, 6, 6, 3}), {}},
      {Conv("c1", 4, "linear"), {"input_layer"}},
      {bn("bn1"), {"c1"}},
      {Act("r1", "relu"), {"bn1"}},
      {Conv("c2", 4, "linear"), {"r1"}},
      {bn("bn2"), {"c2"}},
      {Merge("Add", "add"), {"bn2", "r1"}},
      {Act("r2", "relu"), {"add"}},
      {Conv("gate", 4, "sigmoid"), {"r2"}},
      {Merge("Multiply", "gated"), {"r2", "gate"}},
      {Act("r3", "tanh"), {"gated"}},
      {Gap(), {"r3"}},
      {Dense("out", 3, "linear"), {"gap"}},
  };
  auto m = Parse(Graph(nodes, "out"));
  ASSERT_TRUE(m.ok()) << m.status();
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto shared = Executor::Create(&*m, backend->get());
  auto own = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(shared.ok() && own.ok());
  (*own)->set_share_training_activations_for_testing(false);
  const auto params = m->Initialize(5);
  ASSERT_TRUE((*shared)->SetParameters(params).ok());
  ASSERT_TRUE((*own)->SetParameters(params).ok());
  std::mt19937 rng(23);
  for (int step = 0; step < 2; ++step) {  // the second over the first's buffers
    std::vector<float> x(4 * 6 * 6 * 3);
    for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    const std::vector<int32_t> labels = {0, 2, 1, static_cast<int32_t>(step)};
    StepResult a, b;
    ASSERT_TRUE((*shared)->ComputeGradients(x, labels, LossOptions{}, &a).ok());
    ASSERT_TRUE((*own)->ComputeGradients(x, labels, LossOptions{}, &b).ok());
    EXPECT_EQ(a.loss_sum, b.loss_sum);
    std::vector<std::vector<float>> ga, gb;
    ASSERT_TRUE((*shared)->CopyGradients(&ga).ok());
    ASSERT_TRUE((*own)->CopyGradients(&gb).ok());
    EXPECT_EQ(ga, gb) << "step " << step;
    std::vector<float> oa, ob;
    ASSERT_TRUE((*shared)->CopyOutputs(&oa).ok());
    ASSERT_TRUE((*own)->CopyOutputs(&ob).ok());
    EXPECT_EQ(oa, ob);
  }
  // With every output kept to the end of the step: ten [4, 6, 6, 4] maps
  // and the gradients' three more, the pooling's [4, 4] and the logits'
  // [4, 3] and their gradients'. Shared: bn1, bn2, add and gated (read by
  // no backward op) die after their consumer and later outputs take their
  // tensors; the gradients take those of outputs whose last backward has
  // run: eight maps.
  const int64_t map = 4 * 6 * 6 * 4, small = 2 * (4 * 4 + 4 * 3);
  EXPECT_EQ((*own)->BufferElements(), 13 * map + small);
  EXPECT_EQ((*shared)->BufferElements(), 8 * map + small);
}

TEST(KerasGraphTest, AMaximumOfThreeIsAChainOfTwo) {
  Json j = Graph({{Input({nullptr, 6}), {}},
                  {Dense("a", 5, "tanh"), {"input_layer"}},
                  {Dense("b", 5, "tanh"), {"input_layer"}},
                  {Dense("c", 5, "linear"), {"input_layer"}},
                  {Merge("Maximum", "max"), {"a", "b", "c"}},
                  {Merge("Minimum", "min"), {"c", "a", "max", "b"}},
                  {Dense("out", 3, "linear"), {"min"}}},
                 "out");
  auto m = Parse(j);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> names;
  for (const LayerSpec& l : m->layers()) names.push_back(l.name);
  EXPECT_THAT(
      names, ::testing::ElementsAre("a", "b", "c", "max/1", "max", "min/1", "min/2", "min", "out"));
  EXPECT_THAT(m->graph().sources(3), ::testing::ElementsAre(1, 2));  // max(a, b)
  EXPECT_THAT(m->graph().sources(4), ::testing::ElementsAre(4, 3));  // then c
  EXPECT_THAT(m->graph().sources(7), ::testing::ElementsAre(7, 2));  // ..., then b
  EXPECT_EQ(m->summary().size(), 6u);                                // one row per Keras layer
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok());
  auto params = m->Initialize(3);
  std::mt19937 rng(12);
  std::vector<float> x(4 * 6);
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {0, 2, 1, 1}, LossOptions{}, params,
                                         1);
}

// gelu and silu take their gradient from their input: on a Dense or a
// Conv2D they become a layer of their own after it, which Model::Build
// insists on; gradients match central differences.
TEST(KerasGraphTest, GeluAndSiluAreUnfusedAndTakeTheirGradientFromTheirInput) {
  auto m = Parse(Sequential({Input({nullptr, 6}), Dense("h", 5, "gelu"), Dense("s", 4, "swish"),
                             Layer("Activation", {{"name", "act"}, {"activation", "silu"}}),
                             Dense("out", 3, "linear")}));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->layers().size(), 6u);
  EXPECT_EQ(m->layers()[0].name, "h");
  EXPECT_FALSE(m->layers()[0].activation.has_value());
  EXPECT_EQ(m->layers()[1].name, "h/gelu");
  EXPECT_EQ(m->layers()[1].activation, Activation::kGelu);
  EXPECT_EQ(m->layers()[3].name, "s/silu");
  EXPECT_EQ(m->layers()[4].activation, Activation::kSilu);
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok());
  auto params = m->Initialize(6);
  std::mt19937 rng(5);
  std::vector<float> x(3 * 6);
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 500.0f - 2.0f;
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {0, 2, 1}, LossOptions{}, params, 1);
  // One fused is refused: the in-place output would replace its input.
  std::vector<LayerSpec> layers = m->layers();
  layers[0].activation = Activation::kGelu;
  EXPECT_THAT(Model::Build("m", {6}, layers, {}, false).status().message(),
              HasSubstr("layer h's gelu must be a layer of its own, not fused"));
}

// A softmax anywhere is an op over the last axis (a Dense's activation in
// place, a Conv2D's over the channels, a Softmax layer of its own); the one
// that ends the model is folded into the cross-entropy, as before, whether
// it is the last Dense's activation or a layer after it. Gradients through
// the others match central differences.
TEST(KerasGraphTest, ASoftmaxAnywhereIsAnOpAndTheLastIsFoldedIntoTheLoss) {
  auto m = Parse(Sequential({Input({nullptr, 4, 4, 2}), Conv("c", 3, "softmax"), Flatten(),
                             Dense("h", 5, "softmax"), Dense("g", 6, "tanh"),
                             Layer("Softmax", {{"name", "inner"}}), Dense("out", 3, "linear"),
                             Layer("Activation", {{"name", "probs"}, {"activation", "softmax"}})}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->output_softmax());
  ASSERT_EQ(m->layers().size(), 5u);  // c, h, g, inner, out: "probs" is in the loss
  EXPECT_EQ(m->layers()[0].activation, Activation::kSoftmax);
  EXPECT_EQ(m->layers()[1].activation, Activation::kSoftmax);
  EXPECT_EQ(m->layers()[3].name, "inner");
  EXPECT_EQ(m->layers()[3].activation, Activation::kSoftmax);
  EXPECT_FALSE(m->layers()[4].activation.has_value());
  EXPECT_EQ(m->summary().back().name, "probs");
  // After a Flatten (a view of the (H, W, C) tensor), over all its features.
  auto flat =
      Parse(Sequential({Input({nullptr, 2, 2, 3}), Conv("c", 2, "linear"), Flatten(),
                        Layer("Softmax", {{"name", "over_all"}}), Dense("out", 3, "linear")}));
  ASSERT_TRUE(flat.ok()) << flat.status();
  ASSERT_EQ(flat->layers().size(), 4u);
  EXPECT_EQ(flat->layers()[1].kind, LayerSpec::kFlatten);
  EXPECT_EQ(flat->graph().tensor(3).shape, (Shape{8}));  // the softmax's output
  {
    auto backend = CreateCpuBackend(1);
    ASSERT_TRUE(backend.ok());
    auto exec = Executor::Create(&*flat, backend->get());
    ASSERT_TRUE(exec.ok()) << exec.status();
    const auto params = flat->Initialize(3);
    std::vector<float> x(2 * 12);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) / 3.0f - 1.0f;
    ExpectGradientsMatchCentralDifferences(exec->get(), *flat, x, {0, 2}, LossOptions{}, params, 1);
  }
  auto folded = Parse(Sequential({Input({nullptr, 6}), Dense("out", 3, "softmax")}));
  ASSERT_TRUE(folded.ok()) << folded.status();
  EXPECT_TRUE(folded->output_softmax());
  EXPECT_FALSE(folded->layers().back().activation.has_value());

  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto params = m->Initialize(8);
  std::mt19937 rng(6);
  std::vector<float> x(3 * 32);
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 500.0f - 2.0f;
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, {0, 2, 1}, LossOptions{}, params, 1);
}

// Reshape: the values row-major with Keras's target_shape (one -1
// inferred), a layer of its own that a convolution or a
// BatchNormalization takes; gradients through it match central
// differences.
TEST(KerasGraphTest, AReshapeFeedsConvolutionsAndNormalizations) {
  auto reshape = [](Json target) {
    return Layer("Reshape", {{"name", "reshape"}, {"target_shape", target}});
  };
  Json strided = Conv("c2", 4, "linear");
  strided["config"]["strides"] = {2, 2};
  // Smooth activations: central differences across a ReLU's kink are not
  // its gradient.
  auto m =
      Parse(Sequential({Input({nullptr, 6}), Dense("h", 12, "tanh"), reshape({2, -1, 3}),
                        Conv("c", 4, "tanh"), strided, reshape({-1}),
                        Layer("BatchNormalization", {{"name", "bn"}}), Dense("out", 3, "linear")}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->graph().tensor(2).shape, (Shape{2, 2, 3}));
  EXPECT_EQ(m->graph().tensor(5).shape, (Shape{4}));
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto exec = Executor::Create(&*m, backend->get());
  ASSERT_TRUE(exec.ok());
  auto params = m->Initialize(5);
  std::mt19937 rng(2);
  std::vector<float> x(4 * 6);
  for (float& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  const std::vector<int32_t> labels = {0, 1, 2, 1};
  ExpectGradientsMatchCentralDifferences(exec->get(), *m, x, labels, LossOptions{}, params, 5);
  const std::vector<std::pair<Json, std::string>> bad = {
      {Sequential({Input({nullptr, 12}), reshape({5}), Dense("d", 2, "linear")}),
       "layer \"reshape\" (Reshape): cannot reshape [12] (12 values) to [5]"},
      {Sequential({Input({nullptr, 12}), reshape({5, -1}), Dense("d", 2, "linear")}),
       "cannot reshape [12] (12 values) to [5,-1]"},
      {Sequential({Input({nullptr, 12}), reshape({1, 2, 3, 2}), Dense("d", 2, "linear")}),
       "a Reshape to [1,2,3,2] (rank 4; the layers take rank 1, 2 or 3) is not supported"},
      {Sequential({Input({nullptr, 12}), reshape({6, 2}), Dense("d", 2, "linear")}),
       "the model must end in a Dense layer"},
      {Sequential({Input({nullptr, 12}), reshape({-1, -1, 3}), Dense("d", 2, "linear")}),
       "has two -1"},
      {Sequential({Input({nullptr, 12}), reshape({0, 12, 1}), Dense("d", 2, "linear")}),
       "must hold integers >= 1"},
      // Dimensions whose product wraps 64 bits are refused, not multiplied.
      {Sequential({Input({nullptr, 12}),
                   reshape({int64_t{1} << 40, int64_t{1} << 40, int64_t{1} << 40}),
                   Dense("d", 2, "linear")}),
       "cannot reshape [12] (12 values) to"},
      {Sequential(
           {Input({nullptr, 12}), reshape({-1, int64_t{1} << 62, 4}), Dense("d", 2, "linear")}),
       "cannot reshape [12] (12 values) to"},
  };
  for (const auto& [config, message] : bad) {
    auto r = Parse(config);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(r.status().message(), HasSubstr(message));
  }
}

}  // namespace
}  // namespace keras
}  // namespace psc
