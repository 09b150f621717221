// Labelled `gpu`. The CUDA backend against the plain double-precision
// reference (every op of the conformance suite, in growth and in reserve
// mode; and here the CUDA-specific paths: convolutions whose asymmetric
// "same" padding is made explicit, the custom pooling and batch-norm
// kernels, their shape errors), a full seed_cnn / mlp training step against
// the CPU backend, the memory cap and modes, and the device-side reduction
// of replicas (and the raw handles and scaling that the NCCL one uses).
// All of it through the GPU plugin (gpu_plugin/gpu_api.h), as the worker
// runs it. Every test that needs a GPU skips, naming the reason, where
// none is usable (or the plugin is not built); the no-GPU error contract is
// checked there instead.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/compute/backend_conformance.h"
#include "common/compute/batch_norm_ops.h"
#include "common/compute/conv_ops.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/cuda/cuda_types.h"
#include "common/compute/model.h"
#include "common/compute/pooling_ops.h"
#include "common/compute/reference/reference_ops.h"
#include "common/gpu_plugin/testing/test_plugin.h"
#include "common/keras/keras_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#ifdef PSC_TEST_CUDART
#include <cuda_runtime_api.h>
#endif

namespace psc {
namespace compute {
namespace {

using ::testing::HasSubstr;

// The plugin's API, or null where no GPU is usable.
gpu::GpuApi* Gpu() { return gpu::testing::TestGpu(); }

// Why no GPU is usable here, or "" when one is.
std::string WhyNoGpu() {
  std::string why;
  if (gpu::testing::TestGpu(&why) == nullptr) return why;
  if (Gpu()->ListGpus(&why).empty()) return why.empty() ? "no GPU" : why;
  return "";
}

// cuda_backend.h's functions, through the plugin.
absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCudaBackend(const CudaBackendOptions& o) {
  std::string why;
  if (gpu::testing::TestGpu(&why) == nullptr) return absl::FailedPreconditionError(why);
  return Gpu()->CreateBackend(o);
}
absl::StatusOr<CudaMemoryStats> GetCudaMemoryStats(const ComputeBackend& b) {
  return Gpu()->MemoryStats(b);
}
absl::StatusOr<std::vector<std::string>> DescribeCudaConvAlgorithms(const ComputeBackend& b) {
  return Gpu()->DescribeConvAlgorithms(b);
}
absl::Status ReduceIntoOnDevice(ComputeBackend* sum_backend, const std::vector<DeviceTensor*>& sums,
                                const std::vector<ComputeBackend*>& parts_backends,
                                const std::vector<std::vector<const DeviceTensor*>>& parts) {
  return Gpu()->ReduceIntoOnDevice(sum_backend, sums, parts_backends, parts);
}
absl::StatusOr<CudaQueue> GetCudaQueue(ComputeBackend* b) { return Gpu()->Queue(b); }
absl::StatusOr<float*> CudaTensorData(DeviceTensor* t) { return Gpu()->TensorData(t); }
absl::Status ScaleOnDevice(ComputeBackend* b, const std::vector<DeviceTensor*>& tensors,
                           float factor) {
  return Gpu()->ScaleOnDevice(b, tensors, factor);
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

// Without a GPU the plugin itself refuses to load ("no usable GPU"); with
// one, the ordinal past the last is a clear FAILED_PRECONDITION. This test
// runs, and can fail, on both kinds of machine (where the plugin is built).
TEST(CudaBackendTest, AnUnusableGpuIsAClearError) {
  if (!gpu::testing::PluginBuilt()) GTEST_SKIP() << "the GPU plugin is not built (no nvcc)";
  CudaBackendOptions o = Growth();
  const std::string why = WhyNoGpu();
  std::string none;
  if (why.empty()) o.device = static_cast<int>(Gpu()->ListGpus(&none).size());
  auto b = CreateCudaBackend(o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition) << b.status();
  EXPECT_THAT(b.status().message(),
              HasSubstr(why.empty() ? absl::StrCat("no GPU ", o.device) : "no usable GPU"));
}

TEST(CudaBackendTest, BadOptionsAreInvalidArgument) {
  SKIP_WITHOUT_GPU();
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
  auto model = keras::BuiltinModel("seed_cnn");
  ASSERT_TRUE(model.ok());
  for (int64_t n : {1, 128, 1024}) {
    const std::vector<OpSpec> specs = ModelOpSpecs(*model, n);
    ASSERT_FALSE(specs.empty());
    for (const OpSpec& s : specs) {
      EXPECT_TRUE((*b)->Supports(s))
          << s.op << " " << ShapeText(s.input) << " " << s.window.Text() << " n=" << n;
    }
  }
}

// ---- Windows and batch normalization against the reference ----

namespace ref = ::psc::compute::reference;

ref::Window2D Win(const Window& w) {
  return {static_cast<int>(w.height), static_cast<int>(w.width), static_cast<int>(w.stride_h),
          static_cast<int>(w.stride_w), w.padding == Padding::kSame};
}

absl::StatusOr<std::unique_ptr<DeviceTensor>> Upload(ComputeBackend* b, const Shape& shape,
                                                     const std::vector<double>& values) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTensor> t, b->Allocate(shape));
  const std::vector<float> f(values.begin(), values.end());
  PSC_RETURN_IF_ERROR(b->CopyFromHost(f, t.get()));
  return t;
}

std::vector<double> Download(ComputeBackend* b, const DeviceTensor& t) {
  std::vector<float> f(t.size());
  EXPECT_TRUE(b->CopyToHost(t, absl::MakeSpan(f)).ok());
  return std::vector<double>(f.begin(), f.end());
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " [" << i << "]";
  }
}

// `auto lhs` = the value of the StatusOr `expr`, or a fatal failure.
#define ASSERT_OK_AND_ASSIGN(lhs, expr)            \
  auto lhs##_or = (expr);                          \
  ASSERT_TRUE(lhs##_or.ok()) << lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

// Convolutions over kernels, strides and paddings, forward (with and
// without bias) and both gradients (with and without the bias gradient):
// the asymmetric "same" cases run cuDNN on an explicitly padded input.
TEST(CudaBackendTest, ConvolutionsOverWindowsMatchTheReference) {
  SKIP_WITHOUT_GPU();
  auto backend = CreateCudaBackend(Growth());
  ASSERT_TRUE(backend.ok()) << backend.status();
  ComputeBackend* b = backend->get();
  std::mt19937 rng(21);
  struct Case {
    int n, h, w, c, k;
    Window window;
  };
  const Case cases[] = {
      {2, 8, 7, 3, 4, {3, 3, 2, 2, Padding::kSame}},   // rows 0/1, columns 1/1: explicit
      {2, 7, 7, 3, 4, {3, 3, 2, 2, Padding::kSame}},   // 1/1: cuDNN pads
      {2, 6, 5, 2, 3, {3, 3, 1, 1, Padding::kSame}},   // Keras's default
      {1, 5, 6, 2, 3, {2, 2, 1, 1, Padding::kSame}},   // 0/1 at stride 1
      {2, 9, 8, 3, 2, {5, 3, 2, 1, Padding::kSame}},   // non-square
      {2, 9, 8, 3, 5, {3, 3, 2, 2, Padding::kValid}},  // the last row unread
      {3, 4, 4, 5, 6, {1, 1, 1, 1, Padding::kValid}},
  };
  bool with_bias = true;
  for (const Case& t : cases) {
    SCOPED_TRACE(absl::StrCat(t.h, "x", t.w, " ", t.window.Text()));
    with_bias = !with_bias;
    const Shape xs = {t.n, t.h, t.w, t.c};
    const Shape ws = {t.window.height, t.window.width, t.c, t.k};
    const Shape ys = t.window.Output(xs, t.k);
    const std::vector<double> x = ref::RandomUniform(&rng, ShapeSize(xs), -1, 1);
    const std::vector<double> w = ref::RandomUniform(&rng, ShapeSize(ws), -1, 1);
    const std::vector<double> bias = ref::RandomUniform(&rng, t.k, -1, 1);
    const std::vector<double> dy = ref::RandomUniform(&rng, ShapeSize(ys), -1, 1);
    ASSERT_OK_AND_ASSIGN(xt, Upload(b, xs, x));
    ASSERT_OK_AND_ASSIGN(wt, Upload(b, ws, w));
    ASSERT_OK_AND_ASSIGN(bt, Upload(b, {t.k}, bias));
    ASSERT_OK_AND_ASSIGN(dyt, Upload(b, ys, dy));
    ASSERT_OK_AND_ASSIGN(yt, b->Allocate(ys));
    ASSERT_OK_AND_ASSIGN(dxt, b->Allocate(xs));
    ASSERT_OK_AND_ASSIGN(dwt, b->Allocate(ws));
    ASSERT_OK_AND_ASSIGN(dbt, b->Allocate({t.k}));
    for (const char* op :
         {conv::kConv2D, conv::kConv2DBackwardData, conv::kConv2DBackwardWeights}) {
      EXPECT_TRUE(b->Supports({op, xs, ws, t.window})) << op;
    }
    const bool relu = with_bias;
    ASSERT_TRUE(
        conv::Conv2D(b, *xt, *wt, with_bias ? bt.get() : nullptr, t.window, relu, yt.get()).ok());
    ExpectNear(Download(b, *yt),
               ref::Conv2D(x, t.n, t.h, t.w, t.c, w, with_bias ? bias : std::vector<double>{}, t.k,
                           Win(t.window), relu),
               1e-4, "y");
    ASSERT_TRUE(conv::Conv2DBackwardData(b, *dyt, *wt, t.window, dxt.get()).ok());
    ExpectNear(Download(b, *dxt),
               ref::Conv2DBackwardData(dy, t.n, t.h, t.w, t.k, w, t.c, Win(t.window)), 1e-4, "dx");
    ASSERT_TRUE(conv::Conv2DBackwardWeights(b, *xt, *dyt, t.window, dwt.get(),
                                            with_bias ? dbt.get() : nullptr)
                    .ok());
    const ref::WeightGrads want =
        ref::Conv2DBackwardWeights(x, t.n, t.h, t.w, t.c, dy, t.k, Win(t.window));
    ExpectNear(Download(b, *dwt), want.dw, 1e-4, "dw");
    if (with_bias) ExpectNear(Download(b, *dbt), want.db, 1e-4, "db");
  }
  auto described = DescribeCudaConvAlgorithms(*b);
  ASSERT_TRUE(described.ok());
  EXPECT_THAT(absl::StrJoin(*described, "\n"), HasSubstr("3x3/2 same: explicit padding"));
}

// Max and average pooling over windows; max on inputs with ties and
// integer gradients, so that every sum is exact and the routing must match.
TEST(CudaBackendTest, PoolingOverWindowsMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  auto backend = CreateCudaBackend(Growth());
  ASSERT_TRUE(backend.ok()) << backend.status();
  ComputeBackend* b = backend->get();
  std::mt19937 rng(22);
  const Shape xs = {2, 8, 7, 3};
  for (const Window& win :
       {kPool2x2, Window{3, 3, 2, 2, Padding::kSame}, Window{3, 3, 1, 1, Padding::kSame},
        Window{1, 3, 2, 1, Padding::kValid}, Window{2, 2, 3, 3, Padding::kValid}}) {
    SCOPED_TRACE(win.Text());
    const Shape ys = win.Output(xs, xs[3]);
    std::vector<double> x = ref::RandomUniform(&rng, ShapeSize(xs), 0, 3);
    for (double& v : x) v = std::floor(v);
    std::vector<double> dy = ref::RandomUniform(&rng, ShapeSize(ys), -8, 8);
    for (double& v : dy) v = std::floor(v);
    ASSERT_OK_AND_ASSIGN(xt, Upload(b, xs, x));
    ASSERT_OK_AND_ASSIGN(dyt, Upload(b, ys, dy));
    ASSERT_OK_AND_ASSIGN(yt, b->Allocate(ys));
    ASSERT_OK_AND_ASSIGN(dxt, b->Allocate(xs));
    const ref::Window2D w2 = Win(win);
    EXPECT_TRUE(b->Supports({pooling::kMaxPool, xs, {}, win}));
    ASSERT_TRUE(pooling::MaxPool(b, *xt, win, yt.get()).ok());
    EXPECT_EQ(Download(b, *yt), ref::MaxPool(x, 2, 8, 7, 3, w2));
    ASSERT_TRUE(pooling::MaxPoolBackward(b, *xt, *dyt, win, dxt.get()).ok());
    EXPECT_EQ(Download(b, *dxt), ref::MaxPoolBackward(x, 2, 8, 7, 3, dy, w2));
    ASSERT_TRUE(pooling::AvgPool(b, *xt, win, yt.get()).ok());
    ExpectNear(Download(b, *yt), ref::AvgPool(x, 2, 8, 7, 3, w2), 1e-6, "avg y");
    ASSERT_TRUE(pooling::AvgPoolBackward(b, *xt, *dyt, win, dxt.get()).ok());
    ExpectNear(Download(b, *dxt), ref::AvgPoolBackward(2, 8, 7, 3, dy, w2), 1e-6, "avg dx");
  }
}

// Training statistics, normalization (inference in place), and the
// backward pass in place (dx = dy), for [N,H,W,C] and [N,C]; twice, bit for
// bit the same.
TEST(CudaBackendTest, BatchNormMatchesTheReferenceAndRepeatsBitForBit) {
  SKIP_WITHOUT_GPU();
  auto backend = CreateCudaBackend(Growth());
  ASSERT_TRUE(backend.ok()) << backend.status();
  ComputeBackend* b = backend->get();
  std::mt19937 rng(23);
  const float eps = 1e-3f;
  for (const Shape& xs : {Shape{4, 9, 7, 5}, Shape{33, 6}}) {
    SCOPED_TRACE(ShapeText(xs));
    const int c = static_cast<int>(xs.back());
    const int64_t rows = ShapeSize(xs) / c;
    const std::vector<double> x = ref::RandomUniform(&rng, ShapeSize(xs), -1, 1);
    const std::vector<double> dy = ref::RandomUniform(&rng, ShapeSize(xs), -1, 1);
    const std::vector<double> gamma = ref::RandomUniform(&rng, c, 0.5, 1.5);
    const std::vector<double> beta = ref::RandomUniform(&rng, c, -1, 1);
    ASSERT_OK_AND_ASSIGN(xt, Upload(b, xs, x));
    ASSERT_OK_AND_ASSIGN(gt, Upload(b, {c}, gamma));
    ASSERT_OK_AND_ASSIGN(bt, Upload(b, {c}, beta));
    ASSERT_OK_AND_ASSIGN(yt, b->Allocate(xs));
    ASSERT_OK_AND_ASSIGN(mt, b->Allocate({c}));
    ASSERT_OK_AND_ASSIGN(vt, b->Allocate({c}));
    ASSERT_OK_AND_ASSIGN(dgt, b->Allocate({c}));
    ASSERT_OK_AND_ASSIGN(dbt, b->Allocate({c}));
    const ref::BatchNormResult want = ref::BatchNorm(x, rows, c, gamma, beta, eps);
    const ref::BatchNormGrads grads = ref::BatchNormBackward(x, rows, c, dy, gamma, eps);
    std::vector<double> first[4];
    for (int run = 0; run < 2; ++run) {
      ASSERT_TRUE(batch_norm::BatchNorm(b, *xt, *gt, *bt, eps, yt.get(), mt.get(), vt.get()).ok());
      const std::vector<double> y = Download(b, *yt), mean = Download(b, *mt),
                                variance = Download(b, *vt);
      ExpectNear(y, want.y, 1e-5, "y");
      ExpectNear(mean, want.mean, 1e-6, "mean");
      ExpectNear(variance, want.variance, 1e-6, "variance");
      ASSERT_OK_AND_ASSIGN(dxt, Upload(b, xs, dy));  // dx = dy, in place
      ASSERT_TRUE(batch_norm::BatchNormBackward(b, *xt, *dxt, *gt, *mt, *vt, eps, dxt.get(),
                                                dgt.get(), dbt.get())
                      .ok());
      const std::vector<double> dx = Download(b, *dxt);
      ExpectNear(dx, grads.dx, 1e-5, "dx");
      ExpectNear(Download(b, *dgt), grads.dgamma, 1e-5, "dgamma");
      ExpectNear(Download(b, *dbt), grads.dbeta, 1e-5, "dbeta");
      if (run == 0) {
        first[0] = y;
        first[1] = mean;
        first[2] = variance;
        first[3] = dx;
      } else {
        EXPECT_EQ(y, first[0]);
        EXPECT_EQ(mean, first[1]);
        EXPECT_EQ(variance, first[2]);
        EXPECT_EQ(dx, first[3]);
      }
    }
    // Inference with the batch's own statistics, in place: the same y.
    ASSERT_TRUE(batch_norm::BatchNormInference(b, *xt, *gt, *bt, *mt, *vt, eps, xt.get()).ok());
    EXPECT_EQ(Download(b, *xt), first[0]);
  }
}

TEST(CudaBackendTest, WindowAndBatchNormShapeErrorsAreInvalidArgument) {
  SKIP_WITHOUT_GPU();
  auto backend = CreateCudaBackend(Growth());
  ASSERT_TRUE(backend.ok()) << backend.status();
  ComputeBackend* b = backend->get();
  ASSERT_OK_AND_ASSIGN(x, b->Allocate({1, 4, 4, 2}));
  ASSERT_OK_AND_ASSIGN(w3, b->Allocate({3, 3, 2, 3}));
  ASSERT_OK_AND_ASSIGN(y, b->Allocate({1, 4, 4, 3}));
  const Window five{5, 5, 1, 1, Padding::kSame};
  absl::Status s = conv::Conv2D(b, *x, *w3, nullptr, five, false, y.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("Conv2D"));
  EXPECT_FALSE(b->Supports({conv::kConv2D, {1, 4, 4, 2}, {3, 3, 2, 3}, five}));
  EXPECT_TRUE(b->Supports({conv::kConv2D, {1, 4, 4, 2}, {3, 3, 2, 3}, kConv3x3Same}));
  ASSERT_OK_AND_ASSIGN(p, b->Allocate({1, 1, 1, 2}));
  s = pooling::MaxPool(b, *x, Window{5, 5, 1, 1, Padding::kValid}, p.get());  // no output
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("MaxPool"));
  s = pooling::AvgPool(b, *x, kPool2x2, p.get());  // y should be [1,2,2,2]
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("AvgPool"));
  ASSERT_OK_AND_ASSIGN(c2, b->Allocate({2}));
  ASSERT_OK_AND_ASSIGN(c3, b->Allocate({3}));
  ASSERT_OK_AND_ASSIGN(x3, b->Allocate({2, 3, 2}));
  ASSERT_OK_AND_ASSIGN(y3, b->Allocate({2, 3, 2}));
  s = batch_norm::BatchNorm(b, *x3, *c2, *c2, 1e-3f, y3.get(), c2.get(), c3.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("BatchNorm"));
  s = batch_norm::BatchNorm(b, *x, *c2, *c2, 1e-3f, x.get(), c2.get(), c2.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("y may not be x"));
  ASSERT_OK_AND_ASSIGN(dy, b->Allocate({1, 4, 4, 2}));
  s = batch_norm::BatchNormBackward(b, *x, *dy, *c3, *c2, *c2, 1e-3f, dy.get(), c2.get(), c2.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("BatchNormBackward"));
  // Prepare names a shape it cannot plan.
  const OpSpec bad = {conv::kConv2D, {1, 4, 4, 2}, {3, 3, 2, 3}, five};
  EXPECT_EQ(b->Prepare({&bad, 1}).code(), absl::StatusCode::kInvalidArgument);
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
  auto model = keras::BuiltinModel(model_name);
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
  auto model = keras::BuiltinModel("seed_cnn");
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
    if (k == 1) {
      ASSERT_TRUE((*b)->Prepare(ModelOpSpecs(*model, n)).ok());
    }
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
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok());
  std::vector<float> images(8 * 28 * 28, 0.5f);
  std::vector<int32_t> labels = {0, 1, 2, 3, 4, 5, 6, 7};
  auto step = Step(b->get(), *model, model->Initialize(1), images, labels);
  EXPECT_TRUE(step.ok()) << step.status();
}
#endif

TEST(CudaBackendTest, GradientsAreBitReproducible) {
  SKIP_WITHOUT_GPU();
  auto model = keras::BuiltinModel("seed_cnn");
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

// Another backend's tensors and stream are not a CUDA backend's.
TEST(CudaBackendTest, RawHandlesOfAnotherBackendAreRefused) {
  SKIP_WITHOUT_GPU();
  auto cpu = CreateCpuBackend(1);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto t = (*cpu)->Allocate({4});
  ASSERT_TRUE(t.ok()) << t.status();
  const absl::StatusCode want = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(GetCudaQueue(cpu->get()).status().code(), want);
  EXPECT_EQ(CudaTensorData(t->get()).status().code(), want);
  EXPECT_EQ(ScaleOnDevice(cpu->get(), {t->get()}, 2.0f).code(), want);
}

TEST(CudaBackendTest, RawHandlesAndScaleOnDevice) {
  SKIP_WITHOUT_GPU();
  auto b = CreateCudaBackend(Growth());
  ASSERT_TRUE(b.ok()) << b.status();
  auto queue = GetCudaQueue(b->get());
  ASSERT_TRUE(queue.ok()) << queue.status();
  EXPECT_EQ(queue->device, 0);
  EXPECT_NE(queue->stream, nullptr) << "the backend's own stream, not the default one";
  std::vector<float> a(1000), c(3);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  for (float& x : a) x = dist(rng);
  a[0] = std::nanf("");
  a[1] = -INFINITY;
  std::vector<std::unique_ptr<DeviceTensor>> t;
  for (const std::vector<float>* v : {&a, &c}) {
    auto x = (*b)->Allocate({static_cast<int64_t>(v->size())});
    ASSERT_TRUE(x.ok());
    ASSERT_TRUE((*b)->CopyFromHost(*v, x->get()).ok());
    t.push_back(*std::move(x));
  }
  auto data = CudaTensorData(t[0].get());
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_NE(*data, nullptr);

  // One float32 multiply per element: what the host computes.
  const float factor = static_cast<float>(3.0 / 7.0);
  ASSERT_TRUE(ScaleOnDevice(b->get(), {t[0].get()}, factor).ok());
  std::vector<float> got(a.size());
  ASSERT_TRUE((*b)->CopyToHost(*t[0], absl::MakeSpan(got)).ok());
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(got[1], -INFINITY);
  for (size_t i = 2; i < a.size(); ++i) EXPECT_EQ(got[i], a[i] * factor) << i;
  // Zero clears everything, NaN and infinity included; one changes nothing.
  ASSERT_TRUE(ScaleOnDevice(b->get(), {t[1].get(), t[0].get()}, 0.0f).ok());
  ASSERT_TRUE((*b)->CopyToHost(*t[0], absl::MakeSpan(got)).ok());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], 0.0f) << i;
  ASSERT_TRUE((*b)->CopyFromHost(a, t[0].get()).ok());
  ASSERT_TRUE(ScaleOnDevice(b->get(), {t[0].get()}, 1.0f).ok());
  ASSERT_TRUE((*b)->CopyToHost(*t[0], absl::MakeSpan(got)).ok());
  for (size_t i = 2; i < a.size(); ++i) EXPECT_EQ(got[i], a[i]) << i;

  // A tensor of another backend is refused.
  auto cpu = CreateCpuBackend(1);
  ASSERT_TRUE(cpu.ok());
  auto foreign = (*cpu)->Allocate({3});
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(ScaleOnDevice(b->get(), {foreign->get()}, 2.0f).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace compute
}  // namespace psc
