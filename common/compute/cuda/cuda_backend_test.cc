// Labelled `gpu`. The CUDA backend against the plain double-precision
// reference (every op of the conformance suite, in growth and in reserve
// mode), a full seed_cnn / mlp training step against the CPU backend, the
// memory cap and modes, and the device-side reduction of replicas. Every
// test that needs a GPU skips, naming the reason, where none is usable; the
// no-GPU error contract is checked there instead.
#include "common/compute/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/backend_conformance.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/model.h"
#include "common/gpu/gpu_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#ifdef PSC_TEST_CUDART
#include <cuda_runtime_api.h>
#endif

namespace psc {
namespace compute {
namespace {

using ::testing::HasSubstr;

// Why no GPU is usable here, or "" when one is.
std::string WhyNoGpu() {
  std::string why;
  if (gpu::ListGpus(&why).empty()) return why.empty() ? "no GPU" : why;
  return "";
}

#define SKIP_WITHOUT_GPU()                                        \
  do {                                                            \
    const std::string why_ = WhyNoGpu();                          \
    if (!why_.empty()) GTEST_SKIP() << "no usable GPU: " << why_; \
  } while (0)

// UNAVAILABLE without a GPU, so the conformance suite skips; any other
// failure fails it.
std::function<absl::StatusOr<std::unique_ptr<ComputeBackend>>()> Factory(
    CudaBackendOptions options) {
  return [options]() -> absl::StatusOr<std::unique_ptr<ComputeBackend>> {
    const std::string why = WhyNoGpu();
    if (!why.empty()) return absl::UnavailableError(absl::StrCat("no usable GPU: ", why));
    return CreateCudaBackend(options);
  };
}

CudaBackendOptions Growth() {
  CudaBackendOptions o;
  o.memory_growth = true;
  return o;
}

CudaBackendOptions Reserve(int64_t limit) {
  CudaBackendOptions o;
  o.memory_growth = false;
  o.memory_limit_bytes = limit;
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    Cuda, BackendConformanceTest,
    ::testing::Values(BackendFactory{"cuda_growth", Factory(Growth()), /*must_support_all=*/false},
                      BackendFactory{"cuda_reserve_1g", Factory(Reserve(int64_t{1} << 30)),
                                     /*must_support_all=*/false}),
    BackendFactoryName);

// Without a GPU, GPU 0 is unusable; with one, the ordinal past the last is.
// Either way a clear FAILED_PRECONDITION (UNIMPLEMENTED without CUDA): this
// test runs, and can fail, on both kinds of machine.
TEST(CudaBackendTest, AnUnusableGpuIsAClearError) {
  CudaBackendOptions o = Growth();
  const std::string why = WhyNoGpu();
  std::string none;
  if (why.empty()) o.device = static_cast<int>(gpu::ListGpus(&none).size());
  auto b = CreateCudaBackend(o);
  ASSERT_FALSE(b.ok());
  if (!CudaBackendBuilt()) {
    EXPECT_EQ(b.status().code(), absl::StatusCode::kUnimplemented) << b.status();
    EXPECT_THAT(b.status().message(), HasSubstr("without CUDA"));
    return;
  }
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition) << b.status();
  EXPECT_THAT(b.status().message(),
              HasSubstr(why.empty() ? absl::StrCat("no GPU ", o.device) : "no usable GPU"));
}

TEST(CudaBackendTest, BadOptionsAreInvalidArgument) {
  if (!CudaBackendBuilt()) GTEST_SKIP() << "built without CUDA";
  CudaBackendOptions o = Growth();
  o.logical_index = 2;
  o.logical_count = 2;
  EXPECT_EQ(CreateCudaBackend(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Growth();
  o.memory_limit_bytes = -1;
  EXPECT_EQ(CreateCudaBackend(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaBackendTest, SupportsEverySeedCnnOp) {
  SKIP_WITHOUT_GPU();
  auto b = CreateCudaBackend(Growth());
  ASSERT_TRUE(b.ok()) << b.status();
  auto model = Model::Create("seed_cnn");
  ASSERT_TRUE(model.ok());
  for (int64_t n : {1, 128, 1024}) {
    int64_t h = 28, w = 28, c = 1;
    for (const LayerSpec& l : model->layers()) {
      std::vector<OpSpec> specs;
      if (l.kind == LayerSpec::kConv) {
        for (Op op : {Op::kConv2D, Op::kConv2DBackwardData, Op::kConv2DBackwardWeights}) {
          specs.push_back({op, {n, h, w, c}, {3, 3, c, l.outputs}});
        }
        c = l.outputs;
      } else if (l.kind == LayerSpec::kPool) {
        specs.push_back({Op::kMaxPool2x2, {n, h, w, c}, {}});
        specs.push_back({Op::kMaxPool2x2Backward, {n, h, w, c}, {}});
        h /= 2;
        w /= 2;
      } else {
        specs.push_back({Op::kDense, {n, l.inputs}, {l.inputs, l.outputs}});
      }
      for (const OpSpec& s : specs) EXPECT_TRUE((*b)->Supports(s)) << OpName(s.op) << " n=" << n;
    }
  }
}

// ---- A training step: GPU against CPU ----

struct StepOut {
  double loss = 0;
  int64_t correct = 0;
  std::vector<std::vector<float>> grads;
};

absl::StatusOr<StepOut> Step(ComputeBackend* backend, const Model& model,
                             const std::vector<std::vector<float>>& params,
                             const std::vector<float>& images, const std::vector<int32_t>& labels) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(&model, backend));
  PSC_RETURN_IF_ERROR(e->SetParameters(params));
  StepResult r;
  PSC_RETURN_IF_ERROR(e->ComputeGradients(images, labels, 1.0f / labels.size(), &r));
  StepOut out;
  out.loss = r.loss_sum;
  out.correct = r.correct;
  PSC_RETURN_IF_ERROR(e->CopyGradients(&out.grads));
  return out;
}

// Every gradient within `rtol` of the largest magnitude of the CPU's.
void ExpectGradientsClose(const Model& model, const StepOut& gpu, const StepOut& cpu, double rtol) {
  ASSERT_EQ(gpu.grads.size(), cpu.grads.size());
  for (size_t v = 0; v < cpu.grads.size(); ++v) {
    ASSERT_EQ(gpu.grads[v].size(), cpu.grads[v].size());
    double scale = 0, worst = 0;
    for (float g : cpu.grads[v]) scale = std::max(scale, std::abs(static_cast<double>(g)));
    for (size_t i = 0; i < cpu.grads[v].size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(gpu.grads[v][i]) - cpu.grads[v][i]));
    }
    EXPECT_LE(worst, rtol * scale + 1e-7) << model.variables()[v].name << ": scale " << scale;
  }
}

void CompareTrainingStep(const std::string& model_name, int batch, const CudaBackendOptions& o,
                         double rtol) {
  auto model = Model::Create(model_name);
  ASSERT_TRUE(model.ok());
  std::mt19937 rng(42);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  std::vector<float> images(static_cast<size_t>(batch) * 28 * 28);
  for (float& p : images) p = pixel(rng);
  std::vector<int32_t> labels(batch);
  for (int32_t& l : labels) l = static_cast<int32_t>(rng() % 10);
  std::vector<std::vector<float>> params = model->Initialize(7);

  auto cpu = CreateCpuBackend(2);
  ASSERT_TRUE(cpu.ok());
  auto gpu = CreateCudaBackend(o);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  // Two steps, the second after an SGD update with the CPU's gradients.
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(absl::StrCat(model_name, " batch ", batch, " step ", step));
    auto want = Step(cpu->get(), *model, params, images, labels);
    ASSERT_TRUE(want.ok()) << want.status();
    auto got = Step(gpu->get(), *model, params, images, labels);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NEAR(got->loss, want->loss, rtol * std::abs(want->loss) + 1e-6);
    EXPECT_NEAR(got->correct, want->correct, 1);  // a near-tie may flip one
    ExpectGradientsClose(*model, *got, *want, rtol);
    for (size_t v = 0; v < params.size(); ++v) {
      for (size_t i = 0; i < params[v].size(); ++i) params[v][i] -= 0.1f * want->grads[v][i];
    }
  }
}

TEST(CudaBackendTest, SeedCnnTrainingStepMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  CompareTrainingStep("seed_cnn", 64, Growth(), 1e-3);
}

TEST(CudaBackendTest, MlpTrainingStepMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  CompareTrainingStep("mlp", 128, Reserve(int64_t{512} << 20), 1e-4);
}

TEST(CudaBackendTest, Tf32StepStaysClose) {
  SKIP_WITHOUT_GPU();
  CudaBackendOptions o = Growth();
  o.allow_tf32 = true;
  CompareTrainingStep("seed_cnn", 32, o, 2e-2);
}

// Two backends made separately (as two workers, two runs or two virtual
// devices are), one planned up front and one on first use, one in growth and
// one in reserve mode: the same algorithms, bit-identical gradients. (Each
// picking the fastest of its own timings would not promise that.)
TEST(CudaBackendTest, TwoSeparateBackendsComputeBitIdenticalGradients) {
  SKIP_WITHOUT_GPU();
  auto model = Model::Create("seed_cnn");
  ASSERT_TRUE(model.ok());
  const int n = 48;
  std::vector<float> images(n * 28 * 28);
  for (size_t i = 0; i < images.size(); ++i) images[i] = std::cos(0.11f * i);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = (3 * i) % 10;
  const auto params = model->Initialize(5);
  StepOut out[2];
  std::vector<std::string> algorithms[2];
  for (int k = 0; k < 2; ++k) {
    CudaBackendOptions o = k == 0 ? Growth() : Reserve(int64_t{1} << 30);
    o.logical_index = k;
    o.logical_count = 2;
    auto b = CreateCudaBackend(o);
    ASSERT_TRUE(b.ok()) << b.status();
    if (k == 1) ASSERT_TRUE((*b)->Prepare(ModelOpSpecs(*model, n)).ok());
    auto got = Step(b->get(), *model, params, images, labels);
    ASSERT_TRUE(got.ok()) << got.status();
    out[k] = *std::move(got);
    auto described = DescribeCudaConvAlgorithms(**b);
    ASSERT_TRUE(described.ok());
    algorithms[k] = *described;
  }
  EXPECT_EQ(algorithms[0], algorithms[1]);
  EXPECT_FALSE(algorithms[0].empty());
  EXPECT_EQ(out[0].loss, out[1].loss);
  EXPECT_EQ(out[0].correct, out[1].correct);
  ASSERT_EQ(out[0].grads.size(), out[1].grads.size());
  for (size_t v = 0; v < out[0].grads.size(); ++v) {
    EXPECT_EQ(out[0].grads[v], out[1].grads[v]) << model->variables()[v].name;
  }
}

// Under a tight cap the algorithms whose workspace does not fit give way to
// ones that do (or take none): the step still runs and matches the CPU.
TEST(CudaBackendTest, ATightMemoryCapStillTrains) {
  SKIP_WITHOUT_GPU();
  CudaBackendOptions o = Growth();
  // Activations and gradients of batch 64 take about 70 MiB in growth mode's
  // size classes, cuBLAS 32 on Hopper: the 256 MiB workspace limit cannot be
  // met, so candidates whose workspace is refused give way.
  o.memory_limit_bytes = int64_t{160} << 20;
  CompareTrainingStep("seed_cnn", 64, o, 1e-3);
}

// Autotune (cudnnFind) is the opt-in: it still picks deterministic FMA
// algorithms, so it matches the CPU like the default.
TEST(CudaBackendTest, AutotuneStepMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  CudaBackendOptions o = Growth();
  o.cudnn_autotune = true;
  CompareTrainingStep("seed_cnn", 32, o, 1e-3);
}

#ifdef PSC_TEST_CUDART
// An error an earlier runtime call left unconsumed (here a refused
// cudaMalloc) must not be taken for a later launch's.
TEST(CudaBackendTest, AStaleRuntimeErrorDoesNotFailTheNextOp) {
  SKIP_WITHOUT_GPU();
  auto b = CreateCudaBackend(Growth());
  ASSERT_TRUE(b.ok()) << b.status();
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, size_t{1} << 50), cudaErrorMemoryAllocation);  // 1 PiB: refused
  auto model = Model::Create("mlp");
  ASSERT_TRUE(model.ok());
  std::vector<float> images(8 * 28 * 28, 0.5f);
  std::vector<int32_t> labels = {0, 1, 2, 3, 4, 5, 6, 7};
  auto step = Step(b->get(), *model, model->Initialize(1), images, labels);
  EXPECT_TRUE(step.ok()) << step.status();
}
#endif

TEST(CudaBackendTest, GradientsAreBitReproducible) {
  SKIP_WITHOUT_GPU();
  auto model = Model::Create("seed_cnn");
  ASSERT_TRUE(model.ok());
  std::vector<float> images(16 * 28 * 28);
  for (size_t i = 0; i < images.size(); ++i) images[i] = std::sin(0.37f * i);
  std::vector<int32_t> labels(16);
  for (int i = 0; i < 16; ++i) labels[i] = i % 10;
  auto gpu = CreateCudaBackend(Growth());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto a = Step(gpu->get(), *model, model->Initialize(3), images, labels);
  auto b = Step(gpu->get(), *model, model->Initialize(3), images, labels);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->loss, b->loss);
  EXPECT_EQ(a->grads, b->grads);
}

// ---- Memory ----

TEST(CudaBackendTest, TheMemoryLimitIsResourceExhaustedNotACrash) {
  SKIP_WITHOUT_GPU();
  CudaBackendOptions o = Growth();
  o.memory_limit_bytes = int64_t{64} << 20;
  auto b = CreateCudaBackend(o);
  ASSERT_TRUE(b.ok()) << b.status();
  auto big = (*b)->Allocate({32, 1024, 1024});  // 128 MiB
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("memory limit of 64.0 MiB"));
  auto small = (*b)->Allocate({1024, 1024});  // 4 MiB still fits
  EXPECT_TRUE(small.ok()) << small.status();
}

TEST(CudaBackendTest, ReserveHoldsItsLimitAndGrowthOnlyWhatItUses) {
  SKIP_WITHOUT_GPU();
  auto reserve = CreateCudaBackend(Reserve(int64_t{256} << 20));
  ASSERT_TRUE(reserve.ok()) << reserve.status();
  auto rs = GetCudaMemoryStats(**reserve);
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->held_bytes, int64_t{256} << 20);
  auto growth = CreateCudaBackend(Growth());
  ASSERT_TRUE(growth.ok()) << growth.status();
  auto gs = GetCudaMemoryStats(**growth);
  ASSERT_TRUE(gs.ok());
  EXPECT_LE(gs->held_bytes, int64_t{32} << 20);  // cuBLAS's workspace, little else
  auto cpu = CreateCpuBackend(1);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(GetCudaMemoryStats(**cpu).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaBackendTest, VirtualDevicesHaveTheirOwnCaps) {
  SKIP_WITHOUT_GPU();
  std::vector<std::unique_ptr<ComputeBackend>> logical;
  for (int i = 0; i < 2; ++i) {
    CudaBackendOptions o = Reserve(int64_t{128} << 20);
    o.logical_index = i;
    o.logical_count = 2;
    auto b = CreateCudaBackend(o);
    ASSERT_TRUE(b.ok()) << b.status();
    logical.push_back(*std::move(b));
  }
  EXPECT_EQ(logical[1]->name(), "gpu:0.1:cudnn");
  // 80 MiB of 128, less cuBLAS's workspace (4 MiB, or 32 on Hopper).
  auto a = logical[0]->Allocate({20, 1024, 1024});
  ASSERT_TRUE(a.ok()) << a.status();
  auto more = logical[0]->Allocate({16, 1024, 1024});
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted);
  auto other = logical[1]->Allocate({20, 1024, 1024});  // the other device's cap is its own
  EXPECT_TRUE(other.ok()) << other.status();
}

TEST(CudaBackendTest, ReduceIntoOnDeviceSumsReplicasInOrder) {
  SKIP_WITHOUT_GPU();
  std::vector<std::unique_ptr<ComputeBackend>> replicas;
  for (int i = 0; i < 3; ++i) {
    CudaBackendOptions o = Growth();
    o.logical_index = i;
    o.logical_count = 3;
    auto b = CreateCudaBackend(o);
    ASSERT_TRUE(b.ok()) << b.status();
    replicas.push_back(*std::move(b));
  }
  const Shape shape = {5, 7};
  std::vector<std::unique_ptr<DeviceTensor>> t;
  std::vector<std::vector<float>> host(3, std::vector<float>(35));
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 35; ++i) host[r][i] = 0.5f * r + 0.25f * i;
    auto x = replicas[r]->Allocate(shape);
    ASSERT_TRUE(x.ok());
    ASSERT_TRUE(replicas[r]->CopyFromHost(host[r], x->get()).ok());
    t.push_back(*std::move(x));
  }
  ASSERT_TRUE(ReduceIntoOnDevice(replicas[0].get(), {t[0].get()},
                                 {replicas[1].get(), replicas[2].get()},
                                 {{t[1].get()}, {t[2].get()}})
                  .ok());
  std::vector<float> sum(35);
  ASSERT_TRUE(replicas[0]->CopyToHost(*t[0], absl::MakeSpan(sum)).ok());
  for (int i = 0; i < 35; ++i) EXPECT_EQ(sum[i], (host[0][i] + host[1][i]) + host[2][i]) << i;
  auto wrong = replicas[1]->Allocate({5, 6});
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(
      ReduceIntoOnDevice(replicas[0].get(), {t[0].get()}, {replicas[1].get()}, {{wrong->get()}})
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace compute
}  // namespace psc
