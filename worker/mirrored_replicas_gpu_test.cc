// Labelled `gpu`. Mirrored replicas on CUDA backends: GPU replicas that share
// a GPU (virtual devices) reduce on the host; replicas on GPUs of their own
// reduce on the devices with NCCL (NcclReplicaReducer), which must match the
// host's combination (CombineReplicaGradients) within float32 rounding. With
// one GPU the NCCL path runs as a single rank; the sums over several GPUs
// run where the machine has them (with one, those tests pass having checked
// nothing, and say so). Every test skips where no GPU is usable.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/compute/cuda/cuda_types.h"
#include "common/compute/model.h"
#include "common/gpu_plugin/testing/test_plugin.h"
#include "common/keras/keras_config.h"
#include "gtest/gtest.h"
#include "worker/mirrored_replicas.h"
#include "worker/nccl_replica_reducer.h"

namespace psc {
namespace worker {
namespace {

using Grads = std::vector<std::vector<float>>;

// The GPU plugin, as the worker loads it; null where no GPU is usable.
gpu::GpuApi* Gpu() { return gpu::testing::TestGpu(); }

// The usable GPUs (0 where there are none; `why` says why).
size_t Gpus(std::string* why) {
  if (gpu::testing::TestGpu(why) == nullptr) return 0;
  return Gpu()->ListGpus(why).size();
}

#define SKIP_WITHOUT_GPU()                                           \
  do {                                                               \
    std::string why_;                                                \
    if (Gpus(&why_) == 0) GTEST_SKIP() << "no usable GPU: " << why_; \
  } while (0)

// A convolution, BatchNormalization (its moving statistics are the
// "gradients" the reduction weighs by the replicas' shares), ReLU, a max
// pool and a Dense.
compute::Model BatchNormModel() {
  using compute::LayerSpec;
  std::vector<LayerSpec> layers;
  LayerSpec conv{LayerSpec::kConv, "conv", 2, 4};
  conv.bias = false;
  layers.push_back(conv);
  layers.push_back(LayerSpec{LayerSpec::kBatchNorm, "bn", 4, 4});
  LayerSpec relu{LayerSpec::kActivation, "relu"};
  relu.activation = compute::Activation::kRelu;
  layers.push_back(relu);
  LayerSpec pool{LayerSpec::kPool, "pool", 4, 4};
  pool.window = compute::Window{2, 2, 2, 2, compute::Padding::kValid};  // 8 -> 4
  layers.push_back(pool);
  layers.push_back(LayerSpec{LayerSpec::kDense, "out", 4 * 4 * 4, 5});
  auto m = compute::Model::Build("bn_test", {8, 8, 2}, std::move(layers), {}, false);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

struct Batch {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

Batch RandomBatch(const compute::Model& model, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  Batch b;
  b.images.resize(static_cast<size_t>(n) * model.input_elements());
  for (float& p : b.images) p = pixel(rng);
  for (int i = 0; i < n; ++i) b.labels.push_back(static_cast<int32_t>(rng() % model.classes()));
  return b;
}

std::unique_ptr<compute::ComputeBackend> GpuBackend(int device, int index = 0, int count = 1) {
  compute::CudaBackendOptions o;
  o.device = device;
  o.logical_index = index;
  o.logical_count = count;
  o.memory_growth = true;
  auto b = Gpu()->CreateBackend(o);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

ReplicaBackend GpuReplica(int device, int index = 0, int count = 1) {
  ReplicaBackend r;
  r.device.kind = LogicalDevice::kGpu;
  r.device.gpu = device;
  r.device.logical_index = index;
  r.device.logical_count = count;
  r.device.name = absl::StrCat("/job:worker/replica:0/task:0/device:GPU:", device, ".", index);
  r.backend = GpuBackend(device, index, count);
  return r;
}

// Within 1e-5 of each variable's largest magnitude (float32 sums in
// another order).
void ExpectClose(const Grads& got, const Grads& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t v = 0; v < want.size(); ++v) {
    ASSERT_EQ(got[v].size(), want[v].size()) << what << " variable " << v;
    double scale = 0, worst = 0;
    for (float g : want[v]) scale = std::max(scale, std::abs(static_cast<double>(g)));
    for (size_t i = 0; i < want[v].size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(got[v][i]) - want[v][i]));
    }
    EXPECT_LE(worst, 1e-5 * scale + 1e-9) << what << " variable " << v;
  }
}

// Sets parameters, runs a step of `batch` and returns the combined gradients.
Grads Step(MirroredReplicas& m, const compute::Model& model, const Batch& batch) {
  Grads out;
  EXPECT_TRUE(m.SetParameters(model.Initialize(3)).ok());
  compute::StepResult r;
  absl::Status s = m.ComputeGradients(batch.images, batch.labels,
                                      1.0f / static_cast<float>(batch.labels.size()), &r);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(r.examples, static_cast<int64_t>(batch.labels.size()));
  s = m.CopyGradients(&out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// One GPU: the NCCL reduction as a single rank runs the whole device path
// (scaling, the in-place all-reduce, the one copy) and gives the replica's
// own gradients back bit for bit.
TEST(NcclReplicaReducerTest, OneGpuGivesTheReplicasGradientsBack) {
  SKIP_WITHOUT_GPU();
  const compute::Model model = BatchNormModel();
  std::unique_ptr<compute::ComputeBackend> backend = GpuBackend(0);
  ASSERT_NE(backend, nullptr);
  auto e = compute::Executor::Create(&model, backend.get());
  ASSERT_TRUE(e.ok()) << e.status();
  auto reducer = NcclReplicaReducer::Create(Gpu(), &model, {backend.get()}, {e->get()});
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  EXPECT_TRUE(absl::EndsWith((*reducer)->Describe(), " on GPUs 0")) << (*reducer)->Describe();

  ASSERT_TRUE((*e)->SetParameters(model.Initialize(7)).ok());
  const Batch b = RandomBatch(model, 6, 1);
  compute::StepResult r;
  ASSERT_TRUE((*e)->ComputeGradients(b.images, b.labels, 1.0f / 6, &r).ok());
  Grads want, got;
  ASSERT_TRUE((*e)->CopyGradients(&want).ok());
  ASSERT_TRUE((*reducer)->Reduce({6}, &got).ok());
  ASSERT_EQ(got.size(), want.size());
  for (size_t v = 0; v < want.size(); ++v) EXPECT_EQ(got[v], want[v]) << "variable " << v;

  EXPECT_EQ((*reducer)->Reduce({6, 1}, &got).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*reducer)->Reduce({0}, &got).code(), absl::StatusCode::kFailedPrecondition);
}

// Replicas that share a GPU (virtual devices) reduce on the host: the
// reduction on the GPUs needs one GPU per replica.
TEST(MirroredReplicasGpuTest, VirtualDevicesOfOneGpuReduceOnTheHost) {
  SKIP_WITHOUT_GPU();
  const compute::Model model = BatchNormModel();
  std::vector<ReplicaBackend> replicas;
  replicas.push_back(GpuReplica(0, 0, 2));
  replicas.push_back(GpuReplica(0, 1, 2));
  auto m = MirroredReplicas::Create(&model, std::move(replicas), Gpu());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->DescribeReduction(), "on the host");
  // Without BatchNormalization the split does not change the gradient: the
  // host's sum over the two matches one replica on the whole batch.
  auto mlp = keras::BuiltinModel("mlp");
  ASSERT_TRUE(mlp.ok());
  std::vector<ReplicaBackend> two, one;
  two.push_back(GpuReplica(0, 0, 2));
  two.push_back(GpuReplica(0, 1, 2));
  one.push_back(GpuReplica(0));
  auto split = MirroredReplicas::Create(&*mlp, std::move(two), Gpu());
  auto whole = MirroredReplicas::Create(&*mlp, std::move(one), Gpu());
  ASSERT_TRUE(split.ok() && whole.ok());
  const Batch b = RandomBatch(*mlp, 9, 2);
  ExpectClose(Step(**split, *mlp, b), Step(**whole, *mlp, b), "mlp, 2 virtual devices");
}

// Several GPUs: each replica on its own reduces on the devices, equal to
// the host's reduction of the same split (the same replicas as virtual
// devices of GPU 0: CombineReplicaGradients) within float32 rounding,
// including a step where a replica gets no example and must add nothing.
TEST(MirroredReplicasGpuTest, ReplicasOnSeveralGpusMatchTheHostReduction) {
  SKIP_WITHOUT_GPU();
  std::string why;
  const int gpus = static_cast<int>(Gpus(&why));
  // run_on_device.sh fails any other skip; this one it counts apart (the
  // one-GPU tests above cover the path on a machine with one).
  if (gpus < 2)
    GTEST_SKIP() << "needs 2 GPUs: the sum over several GPUs; this machine has " << gpus;
  const compute::Model model = BatchNormModel();
  std::vector<ReplicaBackend> own, shared;
  for (int g = 0; g < gpus; ++g) {
    own.push_back(GpuReplica(g));
    shared.push_back(GpuReplica(0, g, gpus));
  }
  auto device = MirroredReplicas::Create(&model, std::move(own), Gpu());
  auto host = MirroredReplicas::Create(&model, std::move(shared), Gpu());
  ASSERT_TRUE(device.ok()) << device.status();
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_TRUE(absl::StartsWith((*device)->DescribeReduction(), "on the GPUs (nccl "))
      << (*device)->DescribeReduction();
  EXPECT_EQ((*host)->DescribeReduction(), "on the host");

  // An uneven split (the moving averages' weights differ), then a batch
  // smaller than the replicas: the last replica's tensors still hold the
  // step before's sums and must count for nothing.
  for (int n : {2 * gpus + 1, gpus - 1}) {
    const Batch b = RandomBatch(model, n, static_cast<uint32_t>(n));
    const Grads want = Step(**host, model, b);
    const Grads got = Step(**device, model, b);
    ExpectClose(got, want, absl::StrCat("batch ", n));
    Grads again;
    ASSERT_TRUE((*device)->CopyGradients(&again).ok());
    EXPECT_EQ(again, got) << "a second CopyGradients reduces nothing twice";
  }
}

// The reducer itself against CombineReplicaGradients on the replicas' own
// host copies, replica 1 having run on no example.
TEST(NcclReplicaReducerTest, SeveralGpusMatchCombineReplicaGradients) {
  SKIP_WITHOUT_GPU();
  std::string why;
  const int gpus = static_cast<int>(Gpus(&why));
  // run_on_device.sh fails any other skip; this one it counts apart (the
  // one-GPU tests above cover the path on a machine with one).
  if (gpus < 2)
    GTEST_SKIP() << "needs 2 GPUs: the sum over several GPUs; this machine has " << gpus;
  const compute::Model model = BatchNormModel();
  std::vector<std::unique_ptr<compute::ComputeBackend>> backends;
  std::vector<std::unique_ptr<compute::Executor>> owned;
  std::vector<compute::ComputeBackend*> b;
  std::vector<compute::Executor*> e;
  for (int g = 0; g < gpus; ++g) {
    backends.push_back(GpuBackend(g));
    ASSERT_NE(backends.back(), nullptr);
    auto x = compute::Executor::Create(&model, backends.back().get());
    ASSERT_TRUE(x.ok()) << x.status();
    ASSERT_TRUE((*x)->SetParameters(model.Initialize(5)).ok());
    owned.push_back(*std::move(x));
    b.push_back(backends.back().get());
    e.push_back(owned.back().get());
  }
  auto reducer = NcclReplicaReducer::Create(Gpu(), &model, b, e);
  ASSERT_TRUE(reducer.ok()) << reducer.status();

  std::vector<int64_t> counts;
  std::vector<Grads> host(gpus);
  int64_t n = 0;
  for (int g = 0; g < gpus; ++g) counts.push_back(g == 1 ? 0 : 3 + g);
  for (int64_t c : counts) n += c;
  for (int g = 0; g < gpus; ++g) {
    // Every replica runs once, so that replica 1's tensors are not zero.
    const int64_t c = counts[g] > 0 ? counts[g] : 4;
    const Batch batch = RandomBatch(model, static_cast<int>(c), 10 + g);
    compute::StepResult r;
    ASSERT_TRUE(e[g]->ComputeGradients(batch.images, batch.labels, 1.0f / n, &r).ok());
    ASSERT_TRUE(e[g]->CopyGradients(&host[g]).ok());
  }
  std::vector<const Grads*> per_replica;
  for (const Grads& g : host) per_replica.push_back(&g);
  Grads want, got;
  ASSERT_TRUE(CombineReplicaGradients(per_replica, counts, model.moving_averages(), &want).ok());
  ASSERT_TRUE((*reducer)->Reduce(counts, &got).ok());
  ExpectClose(got, want, "reducer");
}

}  // namespace
}  // namespace worker
}  // namespace psc
