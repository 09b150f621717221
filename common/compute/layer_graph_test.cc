// The model as a graph: the shape rules and their errors, and the executor on
// a graph whose tensors feed several layers (residual connections), checked
// against central differences of the loss.
#include "common/compute/layer_graph.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/compute/cpu_backend.h"
#include "common/compute/elementwise_ops.h"
#include "common/compute/forwarding_backend.h"
#include "common/compute/model.h"
#include "common/keras/keras_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

LayerSpec Conv(const std::string& name, int64_t in, int64_t out, Window w, bool relu,
               std::vector<int> sources) {
  LayerSpec l{LayerSpec::kConv, name, in, out, relu};
  l.window = w;
  l.sources = std::move(sources);
  return l;
}

LayerSpec Of(LayerSpec::Kind kind, const std::string& name, std::vector<int> sources) {
  LayerSpec l{kind, name};
  l.sources = std::move(sources);
  return l;
}

// A residual network in miniature (LayerGraph ids in the comments):
//   1 c1 = relu(conv3x3(input))          feeds c2 and add   (shared)
//   2 c2 = conv3x3(c1), 3 bn = BN(c2)
//   4 add = bn + c1, 5 act = relu(add)   feeds proj and pool (shared)
//   6 proj = conv1x1/2(act), 7 pool = maxpool2x2/2 same(act)
//   8 sum = proj + pool + proj           proj twice in one layer
//   9 gap = global average, 10 out = Dense(3)
std::vector<LayerSpec> ResidualLayers() {
  std::vector<LayerSpec> layers;
  layers.push_back(Conv("c1", 2, 4, kConv3x3Same, true, {0}));
  layers.push_back(Conv("c2", 4, 4, kConv3x3Same, false, {1}));
  LayerSpec bn = Of(LayerSpec::kBatchNorm, "bn", {2});
  bn.inputs = bn.outputs = 4;
  layers.push_back(bn);
  layers.push_back(Of(LayerSpec::kAdd, "add", {3, 1}));
  LayerSpec act = Of(LayerSpec::kActivation, "act", {4});
  act.activation = Activation::kRelu;
  layers.push_back(act);
  layers.push_back(Conv("proj", 4, 4, Window{1, 1, 2, 2, Padding::kValid}, false, {5}));
  LayerSpec pool = Of(LayerSpec::kPool, "pool", {5});
  pool.inputs = pool.outputs = 4;
  pool.window = Window{2, 2, 2, 2, Padding::kSame};
  layers.push_back(pool);
  layers.push_back(Of(LayerSpec::kAdd, "sum", {6, 7, 6}));
  LayerSpec gap = Of(LayerSpec::kGlobalPool, "gap", {8});
  gap.pooling = GlobalPooling::kAverage;
  layers.push_back(gap);
  LayerSpec out{LayerSpec::kDense, "out", 4, 3};
  layers.push_back(out);  // no sources: the previous layer's output
  return layers;
}

TEST(LayerGraphTest, ShapesAndConsumersOfAResidualGraph) {
  auto m = Model::Build("res", {6, 6, 2}, ResidualLayers(), {}, false);
  ASSERT_TRUE(m.ok()) << m.status();
  const LayerGraph& g = m->graph();
  EXPECT_EQ(g.num_tensors(), 11);
  EXPECT_EQ(g.tensor(0).shape, (Shape{6, 6, 2}));
  EXPECT_EQ(g.tensor(4).shape, (Shape{6, 6, 4}));
  EXPECT_EQ(g.tensor(6).shape, (Shape{3, 3, 4}));
  EXPECT_EQ(g.tensor(7).shape, (Shape{3, 3, 4}));
  EXPECT_EQ(g.tensor(10).shape, (Shape{3}));
  EXPECT_EQ(TensorTypeText(g.tensor(8)), "(3, 3, 4) float32");
  EXPECT_THAT(g.consumers(1), ElementsAre(1, 3));
  EXPECT_THAT(g.consumers(6), ElementsAre(7, 7));
  EXPECT_THAT(g.sources(9), ElementsAre(9));
  EXPECT_TRUE(g.IsShared(1));
  EXPECT_TRUE(g.IsShared(5));
  EXPECT_FALSE(g.IsShared(2));
  EXPECT_EQ(g.BatchShape(6, 8), (Shape{8, 3, 3, 4}));
  // Variables follow the layers: c1, c2, bn (4), proj, out.
  EXPECT_EQ(m->variables().size(), 2u + 2 + 4 + 2 + 2);
  EXPECT_EQ(m->variables()[8].name, "proj/kernel");
  EXPECT_EQ(m->variables()[8].shape, (Shape{1, 1, 4, 4}));
}

TEST(LayerGraphTest, ShapeErrorsNameTheLayersAndShapes) {
  std::vector<LayerSpec> layers = ResidualLayers();
  layers[7].sources = {6, 5};  // (3, 3, 4) + (6, 6, 4)
  auto m = Model::Build("res", {6, 6, 2}, layers, {}, false);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(),
              HasSubstr("res: layer sum adds inputs of shapes (3, 3, 4) and (6, 6, 4)"));
  EXPECT_THAT(m.status().message(), HasSubstr("(proj (3, 3, 4), act (6, 6, 4))"));

  layers = ResidualLayers();
  layers[3].sources = {3};  // an Add of one
  m = Model::Build("res", {6, 6, 2}, layers, {}, false);
  EXPECT_THAT(m.status().message(), HasSubstr("layer add takes 1 inputs; it needs two or more"));

  layers = ResidualLayers();
  layers[5].sources = {7};  // a later tensor
  m = Model::Build("res", {6, 6, 2}, layers, {}, false);
  EXPECT_THAT(m.status().message(), HasSubstr("layer proj takes tensor 7, which is not"));

  layers = ResidualLayers();
  layers[6].sources = {4};  // act's output then feeds proj only; pool's input is add
  layers[7].sources = {6, 7};
  layers.insert(layers.begin() + 4, Of(LayerSpec::kAdd, "dead", {3, 1}));  // an unused output
  for (size_t i = 5; i < layers.size(); ++i) {
    for (int& t : layers[i].sources) t += t >= 5 ? 1 : 0;
  }
  m = Model::Build("res", {6, 6, 2}, layers, {}, false);
  EXPECT_THAT(m.status().message(), HasSubstr("the output of layer dead is not used"));

  LayerSpec dense{LayerSpec::kDense, "d", 5, 3};
  LayerSpec conv = Conv("conv", 3, 2, kConv3x3Same, false, {});
  m = Model::Build("m", {5}, {conv, dense}, {}, false);
  EXPECT_THAT(m.status().message(),
              HasSubstr("layer conv needs a (height, width, channels) or (steps, channels) "
                        "input; it gets (5,)"));

  // A reshape's target must hold the input's values; a product past them
  // (even one that wraps 64 bits) is refused.
  for (const Shape& target : {Shape{2, 2}, Shape{int64_t{1} << 40, int64_t{1} << 40, 1 << 20}}) {
    LayerSpec reshape{LayerSpec::kFlatten, "r"};
    reshape.target = target;
    LayerSpec head{LayerSpec::kDense, "d", 5, 3};
    m = Model::Build("m", {5}, {reshape, head}, {}, false);
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(m.status().message(), HasSubstr("layer r reshapes (5,) (5 values) to"));
  }

  // An input's block must lie in the packed input, and come from it.
  LayerSpec in{LayerSpec::kInput, "in"};
  in.sources = {0};
  in.target = {3};
  in.offset = 3;
  LayerSpec head{LayerSpec::kDense, "d", 3, 2};
  head.sources = {1};
  m = Model::Build("m", {5}, {in, head}, {}, false);
  EXPECT_THAT(m.status().message(), HasSubstr("layer in takes (3,) from element 3 of the packed "
                                              "inputs (5,)"));
  in.offset = 2;
  EXPECT_TRUE(Model::Build("m", {5}, {in, head}, {}, false).ok());
  LayerSpec again = in;
  again.name = "again";
  again.sources = {1};
  head.sources = {2};
  m = Model::Build("m", {5}, {in, again, head}, {}, false);
  EXPECT_THAT(m.status().message(), HasSubstr("layer again is an input: it takes the model's"));

  // A crop must leave something, of an (H, W, C) input, by four sizes.
  LayerSpec crop{LayerSpec::kCrop, "crop"};
  crop.pads = {1, 1, 0, 0};
  LayerSpec flat_head{LayerSpec::kDense, "d", 6, 2};
  m = Model::Build("m", {2, 3, 1}, {crop, flat_head}, {}, false);
  EXPECT_THAT(m.status().message(),
              HasSubstr("layer crop crops (2, 3, 1) by (1, 1, 0, 0) (top, bottom, left, right)"));
  crop.pads = {1, 1};
  m = Model::Build("m", {4, 3, 1}, {crop, flat_head}, {}, false);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
}

// A chain's layers with their sources spelled out build the same model as
// with none.
TEST(LayerGraphTest, ExplicitChainSourcesAreTheDefault) {
  auto implicit = keras::BuiltinModel("mlp");
  ASSERT_TRUE(implicit.ok());
  std::vector<LayerSpec> layers = implicit->layers();
  for (size_t i = 0; i < layers.size(); ++i) layers[i].sources = {static_cast<int>(i)};
  auto explicit_ = Model::Build("mlp", implicit->input_shape(), layers, {}, false);
  ASSERT_TRUE(explicit_.ok());
  for (int t = 0; t < implicit->graph().num_tensors(); ++t) {
    EXPECT_EQ(implicit->graph().tensor(t), explicit_->graph().tensor(t));
    EXPECT_EQ(implicit->graph().consumers(t), explicit_->graph().consumers(t));
  }
}

// Counts the Add and Copy ops the backward pass runs.
class CountingBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status Run(absl::string_view op, absl::Span<const DeviceTensor* const> in,
                   const OpAttrs& attrs, absl::Span<DeviceTensor* const> out) override {
    if (op == elementwise::kAdd) ++adds;
    if (op == elementwise::kCopy) ++copies;
    return ForwardingBackend::Run(op, in, attrs, out);
  }
  int adds = 0, copies = 0;
};

// The executor on the residual graph: every trainable variable's gradient
// against central differences of the training loss, so a contribution
// overwritten instead of added (or added twice) fails it; the hook sees
// each layer with variables once, top down.
TEST(LayerGraphTest, GradientsOfSharedTensorsAddUp) {
  auto cpu = CreateCpuBackend(1);
  ASSERT_TRUE(cpu.ok());
  CountingBackend backend(cpu->get());
  auto model = Model::Build("res", {6, 6, 2}, ResidualLayers(), {}, false);
  ASSERT_TRUE(model.ok()) << model.status();
  auto exec = Executor::Create(&*model, &backend);
  ASSERT_TRUE(exec.ok());
  auto params = model->Initialize(11);
  for (size_t v = 0; v < params.size(); ++v) {  // non-zero biases, gamma and beta off 1 and 0
    if (model->moving_averages()[v]) continue;
    const std::string& name = model->variables()[v].name;
    if (name.find("/bias") != std::string::npos || name.find("/beta") != std::string::npos) {
      for (float& x : params[v]) x = 0.05f;
    }
    if (name.find("/gamma") != std::string::npos) {
      for (float& x : params[v]) x = 1.3f;
    }
  }
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  std::mt19937 rng(7);
  const int n = 5;
  std::vector<float> images(n * 72);
  std::vector<int32_t> labels(n);
  for (float& x : images) x = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  for (int32_t& y : labels) y = static_cast<int32_t>(rng() % 3);
  std::vector<int> hooked;
  (*exec)->SetGradientReadyHook([&](int layer) {
    hooked.push_back(layer);
    return absl::OkStatus();
  });
  StepResult r;
  ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f, &r).ok());
  EXPECT_THAT(hooked, ElementsAre(9, 5, 2, 1, 0));
  // Backward, top down: sum copies into proj (6) and pool (7) and adds
  // proj's second contribution; pool starts act's gradient (5), proj adds
  // to it; add copies into bn (3) and starts c1's (1), c2 adds to it.
  // Forward: add once, sum twice.
  EXPECT_EQ(backend.copies, 3 + 1);
  EXPECT_EQ(backend.adds, 1 + 1 + 1 + 1 + 2);
  std::vector<std::vector<float>> grads;
  ASSERT_TRUE((*exec)->CopyGradients(&grads).ok());
  (*exec)->SetGradientReadyHook(nullptr);
  auto loss = [&](const std::vector<std::vector<float>>& p) {
    EXPECT_TRUE((*exec)->SetParameters(p).ok());
    StepResult e;
    EXPECT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f, &e).ok());
    return e.loss_sum;
  };
  std::mt19937 pick(5);
  int checked = 0;
  for (size_t v = 0; v < params.size(); ++v) {
    if (model->moving_averages()[v]) continue;
    for (int sample = 0; sample < 6; ++sample) {
      const size_t i = pick() % params[v].size();
      const float eps = 1e-3f;
      auto plus = params, minus = params;
      plus[v][i] += eps;
      minus[v][i] -= eps;
      const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
      EXPECT_NEAR(grads[v][i], numeric, 3e-3 + 2e-2 * std::fabs(numeric))
          << model->variables()[v].name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6 * 10);  // c1, c2, proj, out: kernel, bias; bn: gamma, beta
}

// trainable=False: a frozen Conv2D and BatchNormalization under a trainable
// head. Their "gradients" are 0 (the moving statistics' too), the frozen
// BatchNormalization normalizes with its moving statistics in training (so
// the training loss is the evaluation loss: nothing else differs), and the
// trainable variables' gradients match central differences through it.
TEST(LayerGraphTest, FrozenLayersHaveNoGradientsAndNormalizeWithTheirMovingStatistics) {
  auto cpu = CreateCpuBackend(1);
  ASSERT_TRUE(cpu.ok());
  std::vector<LayerSpec> layers;
  layers.push_back(Conv("c0", 2, 2, kConv3x3Same, false, {}));  // trainable, below the frozen
  layers.push_back(Conv("c1", 2, 4, kConv3x3Same, false, {}));
  layers.back().trainable = false;
  LayerSpec bn{LayerSpec::kBatchNorm, "bn", 4, 4};
  bn.trainable = false;
  layers.push_back(bn);
  LayerSpec act{LayerSpec::kActivation, "act"};
  act.activation = Activation::kTanh;
  layers.push_back(act);
  layers.push_back(Conv("c2", 4, 3, kConv3x3Same, true, {}));
  layers.push_back(LayerSpec{LayerSpec::kDense, "out", 5 * 5 * 3, 3});
  auto model = Model::Build("frozen", {5, 5, 2}, layers, {}, false);
  ASSERT_TRUE(model.ok()) << model.status();
  // c0 (kernel, bias), then c1 and bn frozen: variables 2..7.
  EXPECT_FALSE(model->moving_averages()[0].has_value());
  for (int v = 2; v < 8; ++v) EXPECT_EQ(model->moving_averages()[v], 1.0f) << v;
  auto exec = Executor::Create(&*model, cpu->get());
  ASSERT_TRUE(exec.ok());
  auto params = model->Initialize(5);
  for (float& x : params[6]) x = 0.3f;  // moving mean
  for (float& x : params[7]) x = 2.0f;  // moving variance
  for (float& x : params[4]) x = 1.4f;  // gamma
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  std::mt19937 rng(3);
  const int n = 4;
  std::vector<float> images(n * 50);
  std::vector<int32_t> labels(n);
  for (float& x : images) x = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  for (int32_t& y : labels) y = static_cast<int32_t>(rng() % 3);
  StepResult train, eval;
  ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f, &train).ok());
  std::vector<std::vector<float>> grads;
  ASSERT_TRUE((*exec)->CopyGradients(&grads).ok());
  for (int v = 2; v < 8; ++v) {
    for (float g : grads[v]) ASSERT_EQ(g, 0.0f) << model->variables()[v].name;
  }
  ASSERT_TRUE((*exec)->Evaluate(images, labels, &eval).ok());
  EXPECT_EQ(train.loss_sum, eval.loss_sum);
  auto loss = [&](const std::vector<std::vector<float>>& p) {
    EXPECT_TRUE((*exec)->SetParameters(p).ok());
    StepResult e;
    EXPECT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f, &e).ok());
    return e.loss_sum;
  };
  std::mt19937 pick(9);
  int checked = 0;
  for (size_t v = 0; v < params.size(); ++v) {
    if (v >= 2 && v < 8) continue;  // frozen
    for (int sample = 0; sample < 6; ++sample) {
      const size_t i = pick() % params[v].size();
      const float eps = 1e-3f;
      auto plus = params, minus = params;
      plus[v][i] += eps;
      minus[v][i] -= eps;
      const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
      EXPECT_NEAR(grads[v][i], numeric, 3e-3 + 2e-2 * std::fabs(numeric))
          << model->variables()[v].name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6 * 6);  // c0, c2, out: kernel and bias; c0's through the frozen ones
}

// The other merges on a graph: Concatenate along the channels and along
// the height, Multiply (a source twice: x * x), Subtract and a three-way
// Average; every trainable variable against central differences.
TEST(LayerGraphTest, GradientsThroughEveryMergeMatchFiniteDifferences) {
  auto cpu = CreateCpuBackend(1);
  ASSERT_TRUE(cpu.ok());
  std::vector<LayerSpec> layers;
  layers.push_back(Conv("a", 2, 3, kConv3x3Same, false, {0}));  // 1: (4, 4, 3)
  layers.push_back(Conv("b", 2, 2, kConv3x3Same, false, {0}));  // 2: (4, 4, 2)
  LayerSpec cat = Of(LayerSpec::kConcat, "cat", {1, 2});        // 3: (4, 4, 5)
  cat.axis = 2;
  layers.push_back(cat);
  layers.push_back(Conv("c", 5, 5, kConv3x3Same, false, {3}));   // 4: (4, 4, 5)
  layers.push_back(Of(LayerSpec::kMultiply, "mul", {4, 3, 4}));  // 5: c * cat * c
  layers.push_back(Of(LayerSpec::kSubtract, "sub", {5, 3}));     // 6: mul - cat
  layers.push_back(Of(LayerSpec::kAverage, "avg", {6, 4, 3}));   // 7
  LayerSpec rows = Of(LayerSpec::kConcat, "rows", {7, 6});       // 8: (8, 4, 5)
  rows.axis = 0;
  layers.push_back(rows);
  LayerSpec act = Of(LayerSpec::kActivation, "act", {8});
  act.activation = Activation::kTanh;
  layers.push_back(act);  // 9
  layers.push_back(LayerSpec{LayerSpec::kDense, "out", 8 * 4 * 5, 3});
  auto model = Model::Build("merges", {4, 4, 2}, layers, {}, false);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->graph().tensor(3).shape, (Shape{4, 4, 5}));
  EXPECT_EQ(model->graph().tensor(8).shape, (Shape{8, 4, 5}));
  auto exec = Executor::Create(&*model, cpu->get());
  ASSERT_TRUE(exec.ok());
  auto params = model->Initialize(21);
  for (size_t v = 0; v < params.size(); ++v) {
    if (model->variables()[v].name.find("/bias") != std::string::npos) {
      for (float& x : params[v]) x = 0.1f;
    }
  }
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  std::mt19937 rng(4);
  const int n = 3;
  std::vector<float> images(n * 32);
  std::vector<int32_t> labels(n);
  for (float& x : images) x = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
  for (int32_t& y : labels) y = static_cast<int32_t>(rng() % 3);
  StepResult r;
  ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f, &r).ok());
  std::vector<std::vector<float>> grads;
  ASSERT_TRUE((*exec)->CopyGradients(&grads).ok());
  StepResult e;
  ASSERT_TRUE((*exec)->Evaluate(images, labels, &e).ok());
  EXPECT_EQ(r.loss_sum, e.loss_sum);  // no batch statistics: forward is forward
  auto loss = [&](const std::vector<std::vector<float>>& p) {
    EXPECT_TRUE((*exec)->SetParameters(p).ok());
    StepResult s;
    EXPECT_TRUE((*exec)->Evaluate(images, labels, &s).ok());
    return s.loss_sum;
  };
  std::mt19937 pick(6);
  int checked = 0;
  for (size_t v = 0; v < params.size(); ++v) {
    for (int sample = 0; sample < 6; ++sample) {
      const size_t i = pick() % params[v].size();
      const float eps = 1e-3f;
      auto plus = params, minus = params;
      plus[v][i] += eps;
      minus[v][i] -= eps;
      const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
      EXPECT_NEAR(grads[v][i], numeric, 3e-3 + 2e-2 * std::fabs(numeric))
          << model->variables()[v].name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6 * 8);
}

}  // namespace
}  // namespace compute
}  // namespace psc
