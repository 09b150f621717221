// Mirrored replicas on CPU "devices": the batch split over several replicas
// gives the gradient of the whole batch, CPU replicas reduce on the host, and
// soft device placement moves a GPU replica whose backend cannot be made to
// the CPU. No GPU is needed (mirrored_replicas_gpu_test.cc has the GPUs').
#include "worker/mirrored_replicas.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "common/compute/cpu_backend.h"
#include "common/gpu_plugin/testing/fake_gpu_api.h"
#include "common/keras/keras_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/nccl_replica_reducer.h"
#include "worker/replica_backends.h"

namespace psc {
namespace worker {
namespace {

using ::testing::HasSubstr;

struct Batch {
  std::vector<float> images;
  std::vector<int32_t> labels;
  std::vector<float> targets;  // a regression's, n x 10 (mlp's outputs)
};

Batch RandomBatch(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  Batch b;
  b.images.resize(static_cast<size_t>(n) * 28 * 28);
  for (float& p : b.images) p = pixel(rng);
  for (int i = 0; i < n; ++i) b.labels.push_back(static_cast<int32_t>(rng() % 10));
  return b;
}

DeviceSetup Cpus(int n) {
  DeviceSetup s;
  s.options.device = DeviceKind::kCpu;
  s.options.virtual_devices = n;
  s.plan = CpuOnlyPlan(0, n);
  return s;
}

struct Out {
  compute::StepResult result;
  std::vector<std::vector<float>> grads;
};

Out RunStep(const std::string& model_name, int replicas, const Batch& batch,
            compute::LossKind kind = compute::LossKind::kSoftmaxCrossEntropy) {
  auto model = keras::BuiltinModel(model_name);
  EXPECT_TRUE(model.ok());
  auto m = CreateReplicas(Cpus(replicas), &*model, /*intra_op_threads=*/2, batch.labels.size());
  EXPECT_TRUE(m.ok()) << m.status();
  Out out;
  if (!m.ok()) return out;
  EXPECT_EQ((*m)->size(), replicas);
  EXPECT_TRUE((*m)->SetParameters(model->Initialize(5)).ok());
  compute::LossOptions loss{1.0f / batch.labels.size()};
  loss.kind = kind;
  loss.targets = batch.targets;
  absl::Status s = (*m)->ComputeGradients(batch.images, batch.labels, loss, &out.result);
  EXPECT_TRUE(s.ok()) << s;
  s = (*m)->CopyGradients(&out.grads);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

void ExpectSameStep(const Out& got, const Out& want) {
  EXPECT_EQ(got.result.examples, want.result.examples);
  EXPECT_NEAR(got.result.loss_sum, want.result.loss_sum, 1e-4 * std::abs(want.result.loss_sum));
  EXPECT_NEAR(got.result.correct, want.result.correct, 1);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t v = 0; v < want.grads.size(); ++v) {
    double scale = 0, worst = 0;
    for (float g : want.grads[v]) scale = std::max(scale, std::abs(static_cast<double>(g)));
    ASSERT_EQ(got.grads[v].size(), want.grads[v].size());
    for (size_t i = 0; i < want.grads[v].size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(got.grads[v][i]) - want.grads[v][i]));
    }
    EXPECT_LE(worst, 1e-4 * scale + 1e-7) << "variable " << v;
  }
}

TEST(MirroredReplicasTest, TwoCpuReplicasGiveTheWholeBatchsGradient) {
  const Batch b = RandomBatch(16, 1);
  ExpectSameStep(RunStep("seed_cnn", 2, b), RunStep("seed_cnn", 1, b));
}

TEST(MirroredReplicasTest, AnUnevenSplitStillAddsUp) {
  const Batch b = RandomBatch(7, 2);
  ExpectSameStep(RunStep("mlp", 3, b), RunStep("mlp", 1, b));
}

TEST(MirroredReplicasTest, MoreReplicasThanExamples) {
  const Batch b = RandomBatch(2, 3);
  ExpectSameStep(RunStep("mlp", 4, b), RunStep("mlp", 1, b));
}

// A regression's targets split with their examples: each replica gets its
// examples' rows.
TEST(MirroredReplicasTest, ARegressionsTargetsSplitWithTheExamples) {
  Batch b = RandomBatch(7, 4);
  std::mt19937 rng(5);
  for (int i = 0; i < 7 * 10; ++i) b.targets.push_back(static_cast<float>(rng() % 100) / 50.0f);
  for (compute::LossKind kind :
       {compute::LossKind::kMeanSquaredError, compute::LossKind::kMeanAbsoluteError}) {
    const Out one = RunStep("mlp", 1, b, kind);
    EXPECT_GT(one.result.loss_sum, 0);
    ExpectSameStep(RunStep("mlp", 3, b, kind), one);
  }
}

// CPU replicas (here, or a CPU-only build) combine on the host; the
// reduction on the GPUs refuses them before any device work.
TEST(MirroredReplicasTest, CpuReplicasReduceOnTheHost) {
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok());
  auto two = CreateReplicas(Cpus(2), &*model, 2, 8);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ((*two)->DescribeReduction(), "on the host");
  auto one = CreateReplicas(Cpus(1), &*model, 2, 8);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)->DescribeReduction(), "none (one replica)");

  auto cpu = compute::CreateCpuBackend(1);
  ASSERT_TRUE(cpu.ok());
  auto e = compute::Executor::Create(&*model, cpu->get());
  ASSERT_TRUE(e.ok());
  gpu::testing::FakeGpuApi gpu;  // says the CPU backend is not a CUDA one, as the plugin does
  auto reducer = NcclReplicaReducer::Create(&gpu, &*model, {cpu->get()}, {e->get()});
  EXPECT_EQ(reducer.status().code(), absl::StatusCode::kFailedPrecondition) << reducer.status();
  EXPECT_THAT(reducer.status().message(), HasSubstr("replica 0 (cpu:onednn) is not on a GPU"));
  EXPECT_EQ(NcclReplicaReducer::Create(&gpu, &*model, {}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MirroredReplicasTest, CreateWithoutReplicasIsInvalidArgument) {
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(MirroredReplicas::Create(&*model, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- combination

using Grads = std::vector<std::vector<float>>;

std::vector<const Grads*> Pointers(const std::vector<Grads>& g) {
  std::vector<const Grads*> out;
  for (const Grads& x : g) out.push_back(&x);
  return out;
}

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Variable 0 trainable, variable 1 a moving average: the gradients add up,
// the statistics average by the replicas' shares of the batch; a replica
// that did not run counts for nothing.
TEST(CombineReplicaGradientsTest, AMovingAverageIsTheWeightedMeanOfTheStatistics) {
  const std::vector<std::optional<float>> moving = {std::nullopt, 0.99f};
  // Replica 0 ran 3 examples of mean 2 (and variance 0.5), replica 1 two of
  // mean 7 (variance 1.25), replica 2 none.
  const std::vector<Grads> per_replica = {
      {{0.25f, -1.0f}, {2.0f, 0.5f}}, {{0.5f, 3.0f}, {7.0f, 1.25f}}, {{99, 99}, {99, 99}}};
  const std::vector<int64_t> counts = {3, 2, 0};
  Grads out;
  ASSERT_TRUE(CombineReplicaGradients(Pointers(per_replica), counts, moving, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], (std::vector<float>{0.75f, 2.0f})) << "trainable: the sum";
  const float w0 = static_cast<float>(3.0 / 5.0), w1 = static_cast<float>(2.0 / 5.0);
  std::vector<float> want(2);
  for (int i = 0; i < 2; ++i) {
    const float first = w0 * per_replica[0][1][i];
    const float second = w1 * per_replica[1][1][i];
    want[i] = first + second;
  }
  EXPECT_EQ(Bytes(out[1]), Bytes(want)) << "replica order, in float32";
  EXPECT_NEAR(out[1][0], 4.0f, 1e-6f) << "(3 * 2 + 2 * 7) / 5: the whole batch's mean";
  EXPECT_NEAR(out[1][1], 0.8f, 1e-6f);
}

TEST(CombineReplicaGradientsTest, OneReplicaThatRanIsCopiedBitForBit) {
  const std::vector<std::optional<float>> moving = {0.9f, std::nullopt};
  const std::vector<Grads> per_replica = {{{1, 1}, {1}}, {{0.1f, 1e-30f}, {3.3f}}, {{5, 5}, {5}}};
  Grads out;
  ASSERT_TRUE(CombineReplicaGradients(Pointers(per_replica), {0, 1, 0}, moving, &out).ok());
  EXPECT_EQ(Bytes(out[0]), Bytes(per_replica[1][0]));
  EXPECT_EQ(Bytes(out[1]), Bytes(per_replica[1][1]));
}

TEST(CombineReplicaGradientsTest, MissingRulesAreTrainableAndNoReplicaIsAnError) {
  const std::vector<Grads> per_replica = {{{1, 2}, {3}}, {{10, 20}, {30}}};
  Grads out;
  ASSERT_TRUE(CombineReplicaGradients(Pointers(per_replica), {1, 1}, {}, &out).ok());
  EXPECT_EQ(out, (Grads{{11, 22}, {33}}));
  EXPECT_EQ(CombineReplicaGradients(Pointers(per_replica), {0, 0}, {}, &out).code(),
            absl::StatusCode::kFailedPrecondition);
}

// A plan with a GPU that cannot be used (no such ordinal, or no GPU at all
// here): an error naming the device, or the CPU under soft placement.
DeviceSetup UnusableGpu(bool soft) {
  DeviceSetup s;
  s.options.device = DeviceKind::kGpu;
  s.options.soft_device_placement = soft;
  LogicalDevice d;
  d.kind = LogicalDevice::kGpu;
  d.gpu = 99;
  d.name = "/job:worker/replica:0/task:0/device:GPU:0";
  s.plan.devices.push_back(d);
  return s;
}

TEST(ReplicaBackendsTest, AnUnusableGpuIsAnErrorNamingTheDevice) {
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok());
  auto m = CreateReplicas(UnusableGpu(false), &*model, 1, 8);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("/job:worker/replica:0/task:0/device:GPU:0: "));
  // No GPU plugin in the setup: the GPU is unusable, as a missing one is.
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition) << m.status();
  EXPECT_THAT(m.status().message(), HasSubstr("the GPU plugin is not loaded"));
  EXPECT_THAT(m.status().message(), HasSubstr("--soft_device_placement"));
}

TEST(ReplicaBackendsTest, SoftPlacementTrainsOnTheCpuInstead) {
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok());
  auto m = CreateReplicas(UnusableGpu(true), &*model, 1, 8);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)->size(), 1);
  EXPECT_EQ((*m)->device(0).kind, LogicalDevice::kCpu);
  EXPECT_EQ((*m)->device(0).name, "/job:worker/replica:0/task:0/device:CPU:0");
  EXPECT_EQ((*m)->backend(0).name(), "cpu:onednn");
  ASSERT_TRUE((*m)->SetParameters(model->Initialize(1)).ok());
  const Batch b = RandomBatch(8, 4);
  compute::StepResult r;
  EXPECT_TRUE((*m)->ComputeGradients(b.images, b.labels, 0.125f, &r).ok());
  EXPECT_EQ(r.examples, 8);
}

TEST(ReplicaBackendsTest, TheDefaultSetupIsOneCpuReplica) {
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok());
  auto m = CreateReplicas(DeviceSetup(), &*model, 2, 8);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)->size(), 1);
  EXPECT_EQ((*m)->backend(0).name(), "cpu:onednn");
}

}  // namespace
}  // namespace worker
}  // namespace psc
