#include "common/compute/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/compute/batch_norm_ops.h"
#include "common/compute/conv_ops.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/dense_ops.h"
#include "common/compute/forwarding_backend.h"
#include "common/compute/loss_ops.h"
#include "common/compute/model_shapes.h"
#include "common/compute/pooling_ops.h"
#include "common/keras/keras_config.h"
#include "common/optimizer/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {
namespace {

using ::testing::HasSubstr;

TEST(ModelTest, SeedCnnHasTheReferenceVariables) {
  auto m = keras::BuiltinModel("seed_cnn");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->num_parameters(), 435306);
  ASSERT_EQ(m->variables().size(), 16u);
  EXPECT_EQ(m->variables()[0].name, "conv2d/kernel");
  EXPECT_EQ(m->variables()[0].shape, (Shape{3, 3, 1, 32}));
  EXPECT_EQ(m->variables()[10].name, "conv2d_5/kernel");
  EXPECT_EQ(m->variables()[10].shape, (Shape{3, 3, 128, 128}));
  EXPECT_EQ(m->variables()[12].name, "dense/kernel");
  EXPECT_EQ(m->variables()[12].shape, (Shape{1152, 128}));
  EXPECT_EQ(m->variables()[15].name, "dense_1/bias");
  // The same list the chief places on the servers.
  const auto shapes = SeedCnnVariableShapes();
  ASSERT_EQ(shapes.size(), m->variables().size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ(shapes[i].name, m->variables()[i].name);
    EXPECT_EQ(shapes[i].shape, m->variables()[i].shape);
  }
}

TEST(ModelTest, MlpAndUnknownModels) {
  auto m = keras::BuiltinModel("mlp");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->num_parameters(), 101770);
  EXPECT_THAT(keras::BuiltinModel("resnet").status().message(),
              HasSubstr("unknown model \"resnet\"; expected seed_cnn, mlp, or a Keras model"));
}

TEST(ModelTest, GlorotUniformInitialization) {
  auto m = keras::BuiltinModel("seed_cnn");
  auto a = m->Initialize(7), b = m->Initialize(7), c = m->Initialize(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0], c[0]);
  // conv2d_1/kernel: fan_in = 9*32, fan_out = 9*32.
  const double limit = std::sqrt(6.0 / (288 + 288));
  double sum = 0, sq = 0;
  for (float v : a[2]) {
    EXPECT_LE(std::fabs(v), limit);
    sum += v;
    sq += v * v;
  }
  const double n = a[2].size();
  EXPECT_NEAR(sum / n, 0, 0.01);
  EXPECT_NEAR(sq / n, limit * limit / 3, 0.1 * limit * limit / 3);  // uniform variance
  for (float v : a[3]) EXPECT_EQ(v, 0.0f);                          // bias
}

TEST(ModelTest, ModelOpSpecsCoverEveryLayer) {
  auto model = keras::BuiltinModel("seed_cnn");
  ASSERT_TRUE(model.ok());
  const std::vector<OpSpec> specs = ModelOpSpecs(*model, 32);
  // 6 convs x (3 + ReLU backward), 3 pools x 2, 2 dense x 3 + 1 ReLU, the loss.
  EXPECT_EQ(specs.size(), 6u * 4 + 3 * 2 + 2 * 3 + 1 + 1);
  EXPECT_EQ(specs.front().input, (Shape{32, 28, 28, 1}));
  EXPECT_EQ(specs.back().input, (Shape{32, 10}));
  // Evaluation: forward ops and the loss only.
  const std::vector<OpSpec> eval = ModelOpSpecs(*model, 250, /*training=*/false);
  EXPECT_EQ(eval.size(), 6u + 3 + 2 + 1);
  for (const OpSpec& s : eval) {
    EXPECT_TRUE(s.op == conv::kConv2D || s.op == pooling::kMaxPool || s.op == dense::kDense ||
                s.op == loss::kSoftmaxCrossEntropy)
        << s.op;
    EXPECT_EQ(s.input[0], 250);
  }
}

// A backend that forwards to another and records what the executor asks of
// it beyond the ops.
class RecordingBackend : public ForwardingBackend {
 public:
  explicit RecordingBackend(std::unique_ptr<ComputeBackend> inner)
      : ForwardingBackend(inner.get()), owned_(std::move(inner)) {}
  absl::Status CopyBytesToHost(const DeviceTensor& src, void* dst, size_t bytes) override {
    ++single_copies;
    return ForwardingBackend::CopyBytesToHost(src, dst, bytes);
  }
  absl::Status CopyManyToHost(absl::Span<const DeviceTensor* const> src,
                              absl::Span<const absl::Span<float>> dst) override {
    many_copies.push_back(src.size());
    return ComputeBackend::CopyManyToHost(src, dst);  // the default, on CopyToHost
  }
  absl::Status Prepare(absl::Span<const OpSpec> specs) override {
    prepared.emplace_back(specs.begin(), specs.end());
    return ForwardingBackend::Prepare(specs);
  }

  std::vector<std::vector<OpSpec>> prepared;
  std::vector<size_t> many_copies;
  int single_copies = 0;

 private:
  std::unique_ptr<ComputeBackend> owned_;
};

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CreateCpuBackend(1);
    ASSERT_TRUE(backend.ok());
    backend_ = *std::move(backend);
  }
  void Batch(int n, uint32_t seed, std::vector<float>* images, std::vector<int32_t>* labels) {
    std::mt19937 rng(seed);
    images->resize(n * 28 * 28);
    labels->resize(n);
    for (float& x : *images) x = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    for (int32_t& y : *labels) y = static_cast<int32_t>(rng() % 10);
  }
  std::unique_ptr<ComputeBackend> backend_;
};

// The executor's wiring, end to end: central differences of the batch loss
// against the analytic gradient, for a sample of every variable of the mlp.
TEST_F(ExecutorTest, GradientsMatchFiniteDifferences) {
  auto model = keras::BuiltinModel("mlp");
  auto exec = Executor::Create(&*model, backend_.get());
  ASSERT_TRUE(exec.ok());
  auto params = model->Initialize(3);
  for (auto& b : {1, 3}) {  // non-zero biases too
    for (float& v : params[b]) v = 0.05f;
  }
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  std::vector<float> images;
  std::vector<int32_t> labels;
  Batch(6, 1, &images, &labels);
  StepResult r;
  ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f, &r).ok());
  std::vector<std::vector<float>> grads;
  ASSERT_TRUE((*exec)->CopyGradients(&grads).ok());
  auto loss = [&](const std::vector<std::vector<float>>& p) {
    EXPECT_TRUE((*exec)->SetParameters(p).ok());
    StepResult e;
    EXPECT_TRUE((*exec)->Evaluate(images, labels, &e).ok());
    return e.loss_sum;
  };
  std::mt19937 rng(5);
  for (size_t v = 0; v < params.size(); ++v) {
    for (int sample = 0; sample < 6; ++sample) {
      const size_t i = rng() % params[v].size();
      const float eps = 1e-2f;
      auto plus = params, minus = params;
      plus[v][i] += eps;
      minus[v][i] -= eps;
      const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
      EXPECT_NEAR(grads[v][i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << model->variables()[v].name << "[" << i << "]";
    }
  }
}

// The whole step through both convolution paths of the CPU backend: Winograd
// with channel-blocked activations handed from op to op (auto) and direct on
// NHWC. Each op is checked against the reference on its own (conformance
// suite); this checks the layouts as consecutive ops pass them on, where a
// mix-up errs by O(1), not by rounding.
TEST_F(ExecutorTest, SeedCnnStepAgreesAcrossConvolutionPaths) {
  auto model = keras::BuiltinModel("seed_cnn");
  ASSERT_TRUE(model.ok());
  std::vector<float> images;
  std::vector<int32_t> labels;
  Batch(16, 9, &images, &labels);
  std::vector<std::vector<float>> grads[2];
  StepResult results[2], evals[2];
  std::vector<std::string> chosen;
  for (int path = 0; path < 2; ++path) {
    auto backend = CreateCpuBackend(
        {.threads = 1, .conv = path == 0 ? ConvAlgorithm::kAuto : ConvAlgorithm::kDirect});
    ASSERT_TRUE(backend.ok());
    auto exec = Executor::Create(&*model, backend->get());
    ASSERT_TRUE(exec.ok());
    ASSERT_TRUE((*exec)->SetParameters(model->Initialize(4)).ok());
    ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 16, &results[path]).ok());
    ASSERT_TRUE((*exec)->CopyGradients(&grads[path]).ok());
    ASSERT_TRUE((*exec)->Evaluate(images, labels, &evals[path]).ok());
    if (path == 0) chosen = CpuConvolutionsChosen(**backend);
  }
  EXPECT_FALSE(chosen.empty());
  EXPECT_NEAR(results[0].loss_sum, results[1].loss_sum, 1e-4 * std::fabs(results[1].loss_sum));
  EXPECT_NEAR(evals[0].loss_sum, evals[1].loss_sum, 1e-4 * std::fabs(evals[1].loss_sum));
  EXPECT_EQ(evals[0].correct, evals[1].correct);
  for (size_t v = 0; v < grads[1].size(); ++v) {
    double scale = 0;
    for (float g : grads[1][v]) scale = std::max(scale, std::fabs(static_cast<double>(g)));
    ASSERT_EQ(grads[0][v].size(), grads[1][v].size());
    int bad = 0;
    for (size_t i = 0; i < grads[1][v].size(); ++i) {
      bad += !(std::fabs(grads[0][v][i] - grads[1][v][i]) <= 1e-3 * scale + 1e-7);
    }
    EXPECT_EQ(bad, 0) << model->variables()[v].name << " (largest |gradient| " << scale << ")";
  }
}

// An executor that evaluated first (and so held no gradient buffers) trains
// exactly like a fresh one.
TEST_F(ExecutorTest, TrainingAfterEvaluationMatchesAFreshExecutor) {
  auto model = keras::BuiltinModel("seed_cnn");
  ASSERT_TRUE(model.ok());
  std::vector<float> images;
  std::vector<int32_t> labels;
  Batch(8, 5, &images, &labels);
  std::vector<std::vector<float>> grads[2];
  for (int evaluate_first = 0; evaluate_first < 2; ++evaluate_first) {
    auto exec = Executor::Create(&*model, backend_.get());
    ASSERT_TRUE(exec.ok());
    ASSERT_TRUE((*exec)->SetParameters(model->Initialize(6)).ok());
    StepResult r;
    if (evaluate_first) {
      ASSERT_TRUE((*exec)->Evaluate(images, labels, &r).ok());
    }
    ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 8, &r).ok());
    ASSERT_TRUE((*exec)->CopyGradients(&grads[evaluate_first]).ok());
  }
  EXPECT_EQ(grads[0], grads[1]);
}

// R replicas' mean gradient equals one replica's on the whole batch: the
// basis of sync training's equivalence with single-process training.
TEST_F(ExecutorTest, HalfBatchGradientsAverageToTheFullBatch) {
  auto model = keras::BuiltinModel("seed_cnn");
  auto exec = Executor::Create(&*model, backend_.get());
  ASSERT_TRUE(exec.ok());
  ASSERT_TRUE((*exec)->SetParameters(model->Initialize(1)).ok());
  std::vector<float> images;
  std::vector<int32_t> labels;
  Batch(8, 2, &images, &labels);
  StepResult r;
  std::vector<std::vector<float>> full, a, b;
  ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 8, &r).ok());
  ASSERT_TRUE((*exec)->CopyGradients(&full).ok());
  const size_t half = 4 * 28 * 28;
  ASSERT_TRUE((*exec)
                  ->ComputeGradients(absl::MakeSpan(images).subspan(0, half),
                                     absl::MakeSpan(labels).subspan(0, 4), 1.0f / 4, &r)
                  .ok());
  ASSERT_TRUE((*exec)->CopyGradients(&a).ok());
  ASSERT_TRUE((*exec)
                  ->ComputeGradients(absl::MakeSpan(images).subspan(half),
                                     absl::MakeSpan(labels).subspan(4), 1.0f / 4, &r)
                  .ok());
  ASSERT_TRUE((*exec)->CopyGradients(&b).ok());
  double diff = 0, norm = 0;
  for (size_t v = 0; v < full.size(); ++v) {
    for (size_t i = 0; i < full[v].size(); ++i) {
      const double mean = (a[v][i] + b[v][i]) / 2.0;
      diff += (mean - full[v][i]) * (mean - full[v][i]);
      norm += full[v][i] * full[v][i];
    }
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-5);
}

TEST_F(ExecutorTest, TrainingOnOneBatchDrivesTheLossDown) {
  auto model = keras::BuiltinModel("seed_cnn");
  auto exec = Executor::Create(&*model, backend_.get());
  ASSERT_TRUE(exec.ok());
  auto params = model->Initialize(4);
  proto::OptimizerConfig config;
  config.set_kind(proto::OptimizerConfig::MOMENTUM);
  config.set_learning_rate(0.05);
  optimizer::Optimizer opt(*optimizer::CompleteOptimizerConfig(config));
  std::vector<std::vector<float>> slots(params.size());
  for (size_t v = 0; v < params.size(); ++v) slots[v].assign(params[v].size(), 0.0f);
  std::vector<float> images;
  std::vector<int32_t> labels;
  Batch(16, 3, &images, &labels);
  double first = 0, last = 0;
  for (int step = 0; step < 25; ++step) {
    ASSERT_TRUE((*exec)->SetParameters(params).ok());
    StepResult r;
    ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 16, &r).ok());
    if (step == 0) first = r.loss_sum / 16;
    last = r.loss_sum / 16;
    std::vector<std::vector<float>> grads;
    ASSERT_TRUE((*exec)->CopyGradients(&grads).ok());
    for (size_t v = 0; v < params.size(); ++v) {
      float* s = slots[v].data();
      opt.Apply(params[v].data(), grads[v].data(), params[v].size(), &s, step);
    }
  }
  EXPECT_LT(last, 0.8 * first) << "first " << first << " last " << last;
}

// The gradients come back in one CopyManyToHost (one round trip on a GPU),
// and Prepare hands the backend every op of each batch size asked for.
TEST_F(ExecutorTest, GradientsComeBackInOneTransferAndPrepareCoversEachBatch) {
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok());
  RecordingBackend recording(std::move(backend_));
  auto exec = Executor::Create(&*model, &recording);
  ASSERT_TRUE(exec.ok());
  ASSERT_TRUE((*exec)->SetParameters(model->Initialize(1)).ok());
  ASSERT_TRUE((*exec)->Prepare({16, 0, 5}, /*training=*/true).ok());
  ASSERT_EQ(recording.prepared.size(), 2u);  // 0 is skipped
  EXPECT_EQ(recording.prepared[0].size(), ModelOpSpecs(*model, 16).size());
  EXPECT_EQ(recording.prepared[1].front().input[0], 5);
  ASSERT_TRUE((*exec)->Prepare({250}, /*training=*/false).ok());
  EXPECT_EQ(recording.prepared.back().size(), ModelOpSpecs(*model, 250, false).size());

  std::vector<float> images;
  std::vector<int32_t> labels;
  Batch(16, 2, &images, &labels);
  StepResult r;
  ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 16, &r).ok());
  std::vector<std::vector<float>> grads;
  ASSERT_TRUE((*exec)->CopyGradients(&grads).ok());
  EXPECT_EQ(recording.many_copies, (std::vector<size_t>{model->variables().size()}));
  ASSERT_EQ(grads.size(), model->variables().size());
  std::vector<float> one(grads[0].size());
  ASSERT_TRUE((*exec)->CopyGradient(0, absl::MakeSpan(one)).ok());
  EXPECT_EQ(one, grads[0]);
}

// A model of the layers beyond seed_cnn's: a strided "same" convolution
// without bias (asymmetric padding), BatchNormalization of a 4-D and of a
// 2-D tensor, overlapping average pooling, a 3x3/2 "same" max pool, a Dense
// without bias. The first `frozen` layers are trainable=False.
absl::StatusOr<Model> WindowedBatchNormModel(size_t frozen = 0) {
  std::vector<LayerSpec> layers;
  LayerSpec conv{LayerSpec::kConv, "conv", 2, 6};
  conv.window = Window{3, 3, 2, 2, Padding::kSame};  // 10 -> 5: pads 0 before, 1 after
  conv.bias = false;
  layers.push_back(conv);
  LayerSpec bn{LayerSpec::kBatchNorm, "bn", 6, 6};
  bn.momentum = 0.9f;
  layers.push_back(bn);
  LayerSpec relu{LayerSpec::kActivation, "relu"};
  relu.activation = Activation::kRelu;
  layers.push_back(relu);
  LayerSpec avg{LayerSpec::kPool, "avg", 6, 6};
  avg.pooling = GlobalPooling::kAverage;
  avg.window = Window{2, 2, 1, 1, Padding::kValid};  // 5 -> 4
  layers.push_back(avg);
  LayerSpec max{LayerSpec::kPool, "max", 6, 6};
  max.window = Window{3, 3, 2, 2, Padding::kSame};  // 4 -> 2
  layers.push_back(max);
  LayerSpec dense{LayerSpec::kDense, "dense", 2 * 2 * 6, 5};
  dense.bias = false;
  layers.push_back(dense);
  LayerSpec bn2{LayerSpec::kBatchNorm, "bn2", 5, 5};
  bn2.center = false;
  layers.push_back(bn2);
  LayerSpec tanh{LayerSpec::kActivation, "tanh"};
  tanh.activation = Activation::kTanh;
  layers.push_back(tanh);
  layers.push_back(LayerSpec{LayerSpec::kDense, "out", 5, 3});
  for (size_t i = 0; i < frozen && i < layers.size(); ++i) layers[i].trainable = false;
  return Model::Build("windowed_bn", {10, 10, 2}, std::move(layers), {}, false);
}

void RandomBatch(int n, int64_t per, int classes, uint32_t seed, std::vector<float>* images,
                 std::vector<int32_t>* labels) {
  std::mt19937 rng(seed);
  images->resize(n * per);
  labels->resize(n);
  for (float& x : *images) x = static_cast<float>(rng() % 2000) / 1000.0f - 0.5f;
  for (int32_t& y : *labels) y = static_cast<int32_t>(rng() % classes);
}

// The executor's wiring for these layers: central differences of the
// training loss (batch statistics) against the analytic gradient of every
// trainable variable; the moving statistics' "gradients" are the batch's
// statistics, which an evaluation with them as moving statistics must
// reproduce exactly.
TEST_F(ExecutorTest, WindowsAndBatchNormalizationMatchFiniteDifferences) {
  auto model = WindowedBatchNormModel();
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->variables().size(), 1u + 4 + 1 + 3 + 2);
  auto exec = Executor::Create(&*model, backend_.get());
  ASSERT_TRUE(exec.ok());
  auto params = model->Initialize(3);
  std::mt19937 prng(4);
  for (size_t v = 0; v < params.size(); ++v) {  // gammas and betas off 1 and 0
    if (model->moving_averages()[v]) continue;
    if (model->variables()[v].name.find("/gamma") != std::string::npos ||
        model->variables()[v].name.find("/beta") != std::string::npos) {
      for (float& x : params[v]) x += static_cast<float>(prng() % 100) / 200.0f - 0.25f;
    }
  }
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  std::vector<float> images;
  std::vector<int32_t> labels;
  RandomBatch(6, 200, 3, 1, &images, &labels);
  StepResult r;
  ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f, &r).ok());
  std::vector<std::vector<float>> grads;
  ASSERT_TRUE((*exec)->CopyGradients(&grads).ok());
  const double train_loss = r.loss_sum;
  auto loss = [&](const std::vector<std::vector<float>>& p) {
    EXPECT_TRUE((*exec)->SetParameters(p).ok());
    StepResult e;
    EXPECT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f, &e).ok());
    return e.loss_sum;
  };
  std::mt19937 rng(5);
  for (size_t v = 0; v < params.size(); ++v) {
    if (model->moving_averages()[v]) continue;
    for (int sample = 0; sample < 6; ++sample) {
      const size_t i = rng() % params[v].size();
      const float eps = 1e-3f;
      auto plus = params, minus = params;
      plus[v][i] += eps;
      minus[v][i] -= eps;
      const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
      EXPECT_NEAR(grads[v][i], numeric, 3e-3 + 2e-2 * std::fabs(numeric))
          << model->variables()[v].name << "[" << i << "]";
    }
  }
  // The moving statistics' "gradients": put them in as the moving
  // statistics, and evaluation normalizes as the training pass did.
  auto with_batch_stats = params;
  for (size_t v = 0; v < params.size(); ++v) {
    if (model->moving_averages()[v]) with_batch_stats[v] = grads[v];
  }
  for (float var : grads[4]) EXPECT_GT(var, 0.0f);  // bn/moving_variance: a variance
  ASSERT_TRUE((*exec)->SetParameters(with_batch_stats).ok());
  StepResult e;
  ASSERT_TRUE((*exec)->Evaluate(images, labels, &e).ok());
  EXPECT_NEAR(e.loss_sum, train_loss, 1e-4 * std::fabs(train_loss));
  // With the initial moving statistics (mean 0, variance 1) it differs.
  ASSERT_TRUE((*exec)->SetParameters(params).ok());
  ASSERT_TRUE((*exec)->Evaluate(images, labels, &e).ok());
  EXPECT_GT(std::fabs(e.loss_sum - train_loss), 1e-3);
}

// A sample of two replicas: their batch statistics differ from the whole
// batch's, so BatchNormalization makes R replicas differ from one over the
// whole batch (as under Keras's MirroredStrategy), while their trainable
// gradients still have the full batch's shapes.
TEST_F(ExecutorTest, BatchStatisticsAreEachReplicasOwn) {
  auto model = WindowedBatchNormModel();
  ASSERT_TRUE(model.ok());
  auto exec = Executor::Create(&*model, backend_.get());
  ASSERT_TRUE(exec.ok());
  ASSERT_TRUE((*exec)->SetParameters(model->Initialize(2)).ok());
  std::vector<float> images;
  std::vector<int32_t> labels;
  RandomBatch(8, 200, 3, 2, &images, &labels);
  StepResult r;
  std::vector<std::vector<float>> full, half;
  ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 8, &r).ok());
  ASSERT_TRUE((*exec)->CopyGradients(&full).ok());
  ASSERT_TRUE((*exec)
                  ->ComputeGradients(absl::MakeSpan(images).subspan(0, 4 * 200),
                                     absl::MakeSpan(labels).subspan(0, 4), 1.0f / 4, &r)
                  .ok());
  ASSERT_TRUE((*exec)->CopyGradients(&half).ok());
  ASSERT_EQ(full.size(), half.size());
  EXPECT_NE(full[3], half[3]) << "bn/moving_mean: a half batch has its own mean";
}

// The seed CNN (layers: conv2d, conv2d_1, pool, conv2d_2, conv2d_3, pool,
// conv2d_4, conv2d_5, pool, dense, dense_1) and the windowed model above
// (conv without bias, bn, relu, avg, max, dense without bias, bn2 without
// beta, tanh, out), with the layers that have variables, top down.
struct HookCase {
  absl::StatusOr<Model> model;
  std::vector<int> layers_with_variables;
};
std::vector<HookCase> HookCases() {
  std::vector<HookCase> cases;
  cases.push_back({keras::BuiltinModel("seed_cnn"), {10, 9, 7, 6, 4, 3, 1, 0}});
  cases.push_back({WindowedBatchNormModel(), {8, 6, 5, 1, 0}});
  return cases;
}

std::vector<uint32_t> Bits(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  if (!values.empty()) std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

// Records the backward ops that make variable gradients (W: a weight
// gradient, B: BatchNormalization's) and data gradients (D) of convolutions
// and dense layers, into a log the test's hook writes to too.
class BackwardOrderBackend : public ForwardingBackend {
 public:
  BackwardOrderBackend(ComputeBackend* inner, std::vector<std::string>* log)
      : ForwardingBackend(inner), log_(log) {}
  absl::Status Run(absl::string_view op, absl::Span<const DeviceTensor* const> in,
                   const OpAttrs& attrs, absl::Span<DeviceTensor* const> out) override {
    if (op == batch_norm::kBatchNormBackward) log_->push_back("B");
    if (op == dense::kDenseBackwardData || op == conv::kConv2DBackwardData) log_->push_back("D");
    if (op == dense::kDenseBackwardWeights || op == conv::kConv2DBackwardWeights) {
      log_->push_back("W");
    }
    return ForwardingBackend::Run(op, in, attrs, out);
  }

 private:
  std::vector<std::string>* const log_;
};

TEST(ModelTest, LayerVariableIndices) {
  EXPECT_TRUE(LayerVariableIndices(LayerVariables{}).empty());
  EXPECT_EQ(LayerVariableIndices(LayerVariables{.kernel = 4}), (std::vector<int>{4}));
  EXPECT_EQ(LayerVariableIndices(LayerVariables{.gamma = 7, .mean = 8, .variance = 9}),
            (std::vector<int>{7, 8, 9}));
  auto model = WindowedBatchNormModel();
  ASSERT_TRUE(model.ok());
  // conv/kernel; bn/gamma, beta, moving_mean, moving_variance; dense/kernel;
  // bn2/gamma, moving_mean, moving_variance; out/kernel, bias.
  const std::vector<std::vector<int>> expected = {{0}, {1, 2, 3, 4}, {}, {},     {},
                                                  {5}, {6, 7, 8},    {}, {9, 10}};
  ASSERT_EQ(model->layer_variables().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(LayerVariableIndices(model->layer_variables()[i]), expected[i]) << "layer " << i;
  }
}

// The hook is told of each layer with variables once, top down, and for a
// convolution or dense layer between its weight gradient and its data
// gradient (so that sending the weights' overlaps the rest of the pass).
TEST_F(ExecutorTest, GradientReadyHookRunsOncePerLayerWithVariablesTopDown) {
  for (HookCase& c : HookCases()) {
    ASSERT_TRUE(c.model.ok()) << c.model.status();
    const Model& model = *c.model;
    std::vector<std::string> log;
    BackwardOrderBackend backend(backend_.get(), &log);
    auto exec = Executor::Create(&model, &backend);
    ASSERT_TRUE(exec.ok());
    ASSERT_TRUE((*exec)->SetParameters(model.Initialize(1)).ok());
    std::vector<int> told;
    (*exec)->SetGradientReadyHook([&](int layer) {
      told.push_back(layer);
      log.push_back(absl::StrCat("H", layer));
      return absl::OkStatus();
    });
    std::vector<float> images;
    std::vector<int32_t> labels;
    RandomBatch(4, model.input_elements(), model.classes(), 3, &images, &labels);
    StepResult r;
    ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 4, &r).ok());
    EXPECT_EQ(told, c.layers_with_variables) << model.name();
    const std::string order = absl::StrJoin(log, " ");
    if (model.name() == "seed_cnn") {
      EXPECT_EQ(order, "W H10 D W H9 D W H7 D W H6 D W H4 D W H3 D W H1 D W H0");
    } else {
      EXPECT_EQ(order, "W H8 D B H6 W H5 D B H1 W H0");
    }
    // Neither evaluation nor prediction tells it.
    told.clear();
    ASSERT_TRUE((*exec)->Evaluate(images, labels, &r).ok());
    std::vector<float> outputs;
    ASSERT_TRUE((*exec)->Predict(images, &outputs).ok());
    EXPECT_TRUE(told.empty());
  }
}

// Fine-tuning: below the first trainable layer nothing needs a gradient,
// so no backward op runs there; the frozen layers' variable gradients are
// 0 and the hook is still told of every layer with variables.
TEST_F(ExecutorTest, NoBackwardOpRunsBelowTheFirstTrainableLayer) {
  auto model = WindowedBatchNormModel(/*frozen=*/2);  // conv and bn
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->frozen_variables(), (std::vector<bool>{true, true, true, true, true, false,
                                                          false, false, false, false, false}));
  std::vector<std::string> log;
  BackwardOrderBackend backend(backend_.get(), &log);
  auto exec = Executor::Create(&*model, &backend);
  ASSERT_TRUE(exec.ok());
  ASSERT_TRUE((*exec)->SetParameters(model->Initialize(1)).ok());
  (*exec)->SetGradientReadyHook([&](int layer) {
    log.push_back(absl::StrCat("H", layer));
    return absl::OkStatus();
  });
  std::vector<float> images;
  std::vector<int32_t> labels;
  RandomBatch(4, model->input_elements(), model->classes(), 3, &images, &labels);
  StepResult r;
  ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 4, &r).ok());
  // The dense layer's data gradient and everything below it are gone
  // (all trainable: "W H8 D B H6 W H5 D B H1 W H0").
  EXPECT_EQ(absl::StrJoin(log, " "), "W H8 D B H6 W H5 H1 H0");
  std::vector<std::vector<float>> grads;
  ASSERT_TRUE((*exec)->CopyGradients(&grads).ok());
  for (int v = 0; v < 5; ++v) {
    EXPECT_EQ(grads[v], std::vector<float>(grads[v].size(), 0.0f)) << "variable " << v;
  }
  float trained = 0;
  for (float g : grads[5]) trained = std::max(trained, std::abs(g));
  EXPECT_GT(trained, 0.0f) << "the dense layer above the base trains";
  // Their host copies are written without a device copy.
  auto cpu = CreateCpuBackend(1);
  ASSERT_TRUE(cpu.ok());
  RecordingBackend recording(*std::move(cpu));
  auto counted = Executor::Create(&*model, &recording);
  ASSERT_TRUE(counted.ok());
  ASSERT_TRUE((*counted)->SetParameters(model->Initialize(1)).ok());
  ASSERT_TRUE((*counted)->ComputeGradients(images, labels, 1.0f / 4, &r).ok());
  std::vector<std::vector<float>> again = {std::vector<float>(3, 7.0f)};  // stale, resized
  ASSERT_TRUE((*counted)->CopyGradients(&again).ok());
  EXPECT_EQ(recording.many_copies, (std::vector<size_t>{6})) << "the 6 variables not frozen";
  EXPECT_EQ(again, grads);
  const int copies_before = recording.single_copies;
  std::vector<float> one(grads[0].size(), 7.0f);
  ASSERT_TRUE((*counted)->CopyGradient(0, absl::MakeSpan(one)).ok());
  EXPECT_EQ(one, grads[0]);
  EXPECT_EQ(recording.single_copies, copies_before);
}

// What CopyGradient reads inside the hook, for the layer it is told of, is
// bit for bit what CopyGradients returns after the pass, even when the
// previous step (another batch) left other values in the buffers; every
// variable is covered by exactly one call.
TEST_F(ExecutorTest, GradientsCopiedInTheHookAreFinal) {
  for (HookCase& c : HookCases()) {
    ASSERT_TRUE(c.model.ok()) << c.model.status();
    const Model& model = *c.model;
    auto exec = Executor::Create(&model, backend_.get());
    ASSERT_TRUE(exec.ok());
    ASSERT_TRUE((*exec)->SetParameters(model.Initialize(2)).ok());
    std::vector<float> images, stale_images;
    std::vector<int32_t> labels, stale_labels;
    RandomBatch(4, model.input_elements(), model.classes(), 4, &images, &labels);
    RandomBatch(4, model.input_elements(), model.classes(), 5, &stale_images, &stale_labels);
    StepResult r;
    ASSERT_TRUE((*exec)->ComputeGradients(stale_images, stale_labels, 1.0f / 4, &r).ok());
    std::vector<std::vector<float>> stale;
    ASSERT_TRUE((*exec)->CopyGradients(&stale).ok());

    std::vector<std::vector<float>> in_hook(model.variables().size());
    std::vector<int> copies(model.variables().size(), 0);
    (*exec)->SetGradientReadyHook([&](int layer) -> absl::Status {
      for (int v : LayerVariableIndices(model.layer_variables()[layer])) {
        in_hook[v].resize(static_cast<size_t>(ShapeSize(model.variables()[v].shape)));
        ++copies[v];
        if (absl::Status s = (*exec)->CopyGradient(v, absl::MakeSpan(in_hook[v])); !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    });
    ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 4, &r).ok());
    std::vector<std::vector<float>> after;
    ASSERT_TRUE((*exec)->CopyGradients(&after).ok());
    ASSERT_EQ(after.size(), in_hook.size());
    for (size_t v = 0; v < after.size(); ++v) {
      const std::string& name = model.variables()[v].name;
      EXPECT_EQ(copies[v], 1) << name;
      EXPECT_EQ(Bits(in_hook[v]), Bits(after[v])) << name;
      EXPECT_NE(Bits(stale[v]), Bits(after[v])) << name << ": the batches should differ";
    }
  }
}

// A hook (one that copies gradients out) changes nothing the pass computes.
TEST_F(ExecutorTest, GradientsWithAHookAreThoseWithout) {
  for (HookCase& c : HookCases()) {
    ASSERT_TRUE(c.model.ok()) << c.model.status();
    const Model& model = *c.model;
    std::vector<float> images;
    std::vector<int32_t> labels;
    RandomBatch(6, model.input_elements(), model.classes(), 6, &images, &labels);
    std::vector<std::vector<float>> grads[2];
    StepResult results[2];
    for (int hooked = 0; hooked < 2; ++hooked) {
      auto exec = Executor::Create(&model, backend_.get());
      ASSERT_TRUE(exec.ok());
      ASSERT_TRUE((*exec)->SetParameters(model.Initialize(7)).ok());
      int calls = 0;
      std::vector<float> scratch;
      if (hooked) {
        (*exec)->SetGradientReadyHook([&](int layer) {
          ++calls;
          const int v = LayerVariableIndices(model.layer_variables()[layer]).front();
          scratch.resize(static_cast<size_t>(ShapeSize(model.variables()[v].shape)));
          return (*exec)->CopyGradient(v, absl::MakeSpan(scratch));
        });
      }
      ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 6, &results[hooked]).ok());
      ASSERT_TRUE((*exec)->CopyGradients(&grads[hooked]).ok());
      EXPECT_EQ(calls, hooked ? static_cast<int>(c.layers_with_variables.size()) : 0);
    }
    EXPECT_EQ(results[0].loss_sum, results[1].loss_sum) << model.name();
    EXPECT_EQ(results[0].correct, results[1].correct) << model.name();
    ASSERT_EQ(grads[0].size(), grads[1].size());
    for (size_t v = 0; v < grads[0].size(); ++v) {
      EXPECT_EQ(Bits(grads[0][v]), Bits(grads[1][v])) << model.variables()[v].name;
    }
  }
}

// A hook's error ends the pass with that status: no later call, no data
// gradient below; the executor trains normally afterwards.
TEST_F(ExecutorTest, AHookErrorEndsComputeGradients) {
  auto model = WindowedBatchNormModel();
  ASSERT_TRUE(model.ok());
  std::vector<std::string> log;
  BackwardOrderBackend backend(backend_.get(), &log);
  auto exec = Executor::Create(&*model, &backend);
  ASSERT_TRUE(exec.ok());
  ASSERT_TRUE((*exec)->SetParameters(model->Initialize(3)).ok());
  std::vector<int> told;
  (*exec)->SetGradientReadyHook([&](int layer) -> absl::Status {
    told.push_back(layer);
    if (layer == 5) return absl::UnavailableError("peer gone");
    return absl::OkStatus();
  });
  std::vector<float> images;
  std::vector<int32_t> labels;
  RandomBatch(4, model->input_elements(), model->classes(), 8, &images, &labels);
  StepResult r;
  const absl::Status s = (*exec)->ComputeGradients(images, labels, 1.0f / 4, &r);
  EXPECT_EQ(s, absl::UnavailableError("peer gone"));
  EXPECT_EQ(told, (std::vector<int>{8, 6, 5}));
  EXPECT_EQ(absl::StrJoin(log, " "), "W D B W") << "dense's data gradient is not computed";

  (*exec)->SetGradientReadyHook(nullptr);
  ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 4, &r).ok());
  std::vector<std::vector<float>> grads, fresh;
  ASSERT_TRUE((*exec)->CopyGradients(&grads).ok());
  auto other = Executor::Create(&*model, backend_.get());
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->SetParameters(model->Initialize(3)).ok());
  ASSERT_TRUE((*other)->ComputeGradients(images, labels, 1.0f / 4, &r).ok());
  ASSERT_TRUE((*other)->CopyGradients(&fresh).ok());
  ASSERT_EQ(grads.size(), fresh.size());
  for (size_t v = 0; v < grads.size(); ++v) {
    EXPECT_EQ(Bits(grads[v]), Bits(fresh[v])) << model->variables()[v].name;
  }
  EXPECT_EQ(told.size(), 3u) << "an empty hook is not called";
}

// The forward half: the hook is asked for each layer with variables once,
// bottom up, before the layer's op; what it sets is what the pass uses, so
// a pass whose parameters all arrive in the hook (over stale ones) computes
// bit for bit what a pass with them set beforehand does.
TEST_F(ExecutorTest, ParametersSetInTheNeededHookAreThoseThePassUses) {
  for (HookCase& c : HookCases()) {
    ASSERT_TRUE(c.model.ok()) << c.model.status();
    const Model& model = *c.model;
    std::vector<float> images;
    std::vector<int32_t> labels;
    RandomBatch(5, model.input_elements(), model.classes(), 9, &images, &labels);
    const std::vector<std::vector<float>> fresh = model.Initialize(11);
    std::vector<std::vector<float>> grads[2];
    StepResult results[2];
    for (int hooked = 0; hooked < 2; ++hooked) {
      auto exec = Executor::Create(&model, backend_.get());
      ASSERT_TRUE(exec.ok());
      ASSERT_TRUE((*exec)->SetParameters(hooked ? model.Initialize(12) : fresh).ok());
      std::vector<int> asked;
      std::vector<int> set(model.variables().size(), 0);
      if (hooked) {
        (*exec)->SetParametersNeededHook([&](int layer) -> absl::Status {
          asked.push_back(layer);
          for (int v : LayerVariableIndices(model.layer_variables()[layer])) {
            ++set[v];
            PSC_RETURN_IF_ERROR((*exec)->SetParameter(v, fresh[v]));
          }
          return absl::OkStatus();
        });
      }
      ASSERT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 5, &results[hooked]).ok());
      ASSERT_TRUE((*exec)->CopyGradients(&grads[hooked]).ok());
      if (!hooked) continue;
      std::vector<int> bottom_up(c.layers_with_variables.rbegin(), c.layers_with_variables.rend());
      EXPECT_EQ(asked, bottom_up) << model.name();
      EXPECT_EQ(set, std::vector<int>(model.variables().size(), 1)) << model.name();
      // Neither evaluation nor prediction asks.
      asked.clear();
      StepResult r;
      ASSERT_TRUE((*exec)->Evaluate(images, labels, &r).ok());
      std::vector<float> outputs;
      ASSERT_TRUE((*exec)->Predict(images, &outputs).ok());
      EXPECT_TRUE(asked.empty());
    }
    EXPECT_EQ(results[0].loss_sum, results[1].loss_sum) << model.name();
    ASSERT_EQ(grads[0].size(), grads[1].size());
    for (size_t v = 0; v < grads[0].size(); ++v) {
      EXPECT_EQ(Bits(grads[0][v]), Bits(grads[1][v])) << model.variables()[v].name;
    }
  }
}

// Counts the forward ops with weights.
class ForwardCountBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status Run(absl::string_view op, absl::Span<const DeviceTensor* const> in,
                   const OpAttrs& attrs, absl::Span<DeviceTensor* const> out) override {
    if (op == dense::kDense || op == conv::kConv2D) ++weighted_ops;
    return ForwardingBackend::Run(op, in, attrs, out);
  }
  int weighted_ops = 0;
};

// Its error ends the pass before the layer's op: nothing from it up runs.
TEST_F(ExecutorTest, ANeededHookErrorEndsComputeGradients) {
  auto model = keras::BuiltinModel("seed_cnn");
  ASSERT_TRUE(model.ok());
  ForwardCountBackend backend(backend_.get());
  auto exec = Executor::Create(&*model, &backend);
  ASSERT_TRUE(exec.ok());
  ASSERT_TRUE((*exec)->SetParameters(model->Initialize(3)).ok());
  std::vector<int> asked;
  (*exec)->SetParametersNeededHook([&](int layer) -> absl::Status {
    asked.push_back(layer);
    if (layer == 3) return absl::UnavailableError("ps:0 gone");
    return absl::OkStatus();
  });
  std::vector<float> images;
  std::vector<int32_t> labels;
  RandomBatch(2, model->input_elements(), model->classes(), 8, &images, &labels);
  StepResult r;
  EXPECT_EQ((*exec)->ComputeGradients(images, labels, 1.0f / 2, &r),
            absl::UnavailableError("ps:0 gone"));
  EXPECT_EQ(asked, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(backend.weighted_ops, 2) << "layers 0 and 1 only";
  (*exec)->SetParametersNeededHook(nullptr);
  EXPECT_TRUE((*exec)->ComputeGradients(images, labels, 1.0f / 2, &r).ok());
}

TEST(ModelTest, WindowedModelOpSpecsCarryTheirWindows) {
  auto model = WindowedBatchNormModel();
  ASSERT_TRUE(model.ok());
  const std::vector<OpSpec> specs = ModelOpSpecs(*model, 4);
  int windows = 0, batch_norms = 0;
  for (const OpSpec& s : specs) {
    if (s.op == conv::kConv2D) {
      EXPECT_EQ(s.window, (Window{3, 3, 2, 2, Padding::kSame}));
      EXPECT_EQ(s.kernel, (Shape{3, 3, 2, 6}));
      ++windows;
    }
    if (s.op == pooling::kMaxPool) {
      EXPECT_EQ(s.input, (Shape{4, 4, 4, 6}));
      EXPECT_EQ(s.window, (Window{3, 3, 2, 2, Padding::kSame}));
      ++windows;
    }
    if (s.op == batch_norm::kBatchNorm || s.op == batch_norm::kBatchNormBackward) ++batch_norms;
    EXPECT_NE(s.op, batch_norm::kBatchNormInference);
  }
  EXPECT_EQ(windows, 2);
  EXPECT_EQ(batch_norms, 4);
  for (const OpSpec& s : ModelOpSpecs(*model, 4, /*training=*/false)) {
    EXPECT_NE(s.op, batch_norm::kBatchNorm);
  }
}

TEST(ModelTest, BuildRejectsWindowsWithoutOutputAndBadBatchNormalization) {
  LayerSpec conv{LayerSpec::kConv, "conv", 1, 2};
  conv.window = Window{5, 5, 1, 1, Padding::kValid};
  LayerSpec out{LayerSpec::kDense, "out", 2, 3};
  auto m = Model::Build("m", {4, 4, 1}, {conv, out}, {}, false);
  EXPECT_THAT(m.status().message(), HasSubstr("leaves no output of its 4x4 input"));
  LayerSpec bn{LayerSpec::kBatchNorm, "bn", 2, 2};
  bn.momentum = 1.0f;
  m = Model::Build("m", {2}, {bn, out}, {}, false);
  EXPECT_THAT(m.status().message(), HasSubstr("momentum 1 in [0, 1)"));
  LayerSpec bn3{LayerSpec::kBatchNorm, "bn", 3, 3};
  m = Model::Build("m", {2}, {bn3, out}, {}, false);
  EXPECT_THAT(m.status().message(), HasSubstr("normalizes 3 channels; its input has 2"));
}

TEST_F(ExecutorTest, BadInputsAreRejected) {
  auto model = keras::BuiltinModel("mlp");
  auto exec = Executor::Create(&*model, backend_.get());
  ASSERT_TRUE(exec.ok());
  EXPECT_EQ((*exec)->SetParameters({}).code(), absl::StatusCode::kInvalidArgument);
  auto params = model->Initialize(0);
  params[1].pop_back();
  EXPECT_THAT((*exec)->SetParameters(params).message(), HasSubstr("dense/bias"));
  StepResult r;
  std::vector<float> images(2 * 784);
  EXPECT_EQ((*exec)->ComputeGradients(images, std::vector<int32_t>{1, 12}, 1, &r).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*exec)->ComputeGradients(images, std::vector<int32_t>{1, 2, 3}, 1, &r).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*exec)->Evaluate(images, {}, &r).code(), absl::StatusCode::kInvalidArgument);
}

// A backend whose copies to the device fail as a full GPU's do.
class FullDeviceBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status CopyBytesFromHost(const void* src, size_t bytes, DeviceTensor* dst) override {
    return absl::ResourceExhaustedError("GPU:0: out of memory (limit 1 MiB)");
  }
};

TEST_F(ExecutorTest, SetParametersKeepsTheDevicesCodeAndNamesTheVariable) {
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok());
  FullDeviceBackend full(backend_.get());
  auto exec = Executor::Create(&*model, &full);
  ASSERT_TRUE(exec.ok()) << exec.status();
  const absl::Status s = (*exec)->SetParameters(model->Initialize(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(s.message(),
            absl::StrCat(model->variables()[0].name, ": GPU:0: out of memory (limit 1 MiB)"));
}

}  // namespace
}  // namespace compute
}  // namespace psc
