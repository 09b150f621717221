// The CPU backend against the plain double-precision reference: every op,
// random and seed_cnn shapes, finite differences (backend_conformance.cc).
#include "common/compute/cpu_backend.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/compute/backend_conformance.h"
#include "common/compute/batch_norm_ops.h"
#include "common/compute/conv_ops.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/elementwise_ops.h"
#include "common/compute/loss_ops.h"
#include "common/compute/pooling_ops.h"
#include "dnnl.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {
namespace {

using ::testing::HasSubstr;

// Every convolution path that can be selected: the default (Winograd where
// the rule picks it, channel-blocked activations) and direct on NHWC.
INSTANTIATE_TEST_SUITE_P(
    Cpu, BackendConformanceTest,
    ::testing::Values(
        BackendFactory{
            "cpu_auto",
            [] { return CreateCpuBackend({.threads = 2, .conv = ConvAlgorithm::kAuto}); },
            /*must_support_all=*/true},
        BackendFactory{
            "cpu_direct",
            [] { return CreateCpuBackend({.threads = 2, .conv = ConvAlgorithm::kDirect}); },
            /*must_support_all=*/true}),
    BackendFactoryName);

// The fixed rule of cpu_conv.h: Winograd when both channel counts are
// multiples of 16 and the CPU has AVX-512, direct otherwise; kDirect always.
TEST(CpuBackendTest, ConvolutionAlgorithmFollowsTheRule) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  const bool avx512 = (isa & core) == core;  // cpu_isa values are sets of bits
  for (ConvAlgorithm algorithm : {ConvAlgorithm::kAuto, ConvAlgorithm::kDirect}) {
    auto backend = CreateCpuBackend({.threads = 1, .conv = algorithm});
    ASSERT_TRUE(backend.ok());
    for (const auto& [c, k] : {std::pair{1, 32}, std::pair{32, 64}, std::pair{24, 32}}) {
      auto x = (*backend)->Allocate({2, 8, 8, c});
      auto w = (*backend)->Allocate({3, 3, c, k});
      auto b = (*backend)->Allocate({k});
      auto y = (*backend)->Allocate({2, 8, 8, k});
      ASSERT_TRUE(x.ok() && w.ok() && b.ok() && y.ok());
      ASSERT_TRUE(
          conv::Conv2D(backend->get(), **x, **w, b->get(), kConv3x3Same, false, y->get()).ok());
    }
    // Winograd is for 3x3 "same" with stride 1 only: not with strides 2.
    auto x = (*backend)->Allocate({2, 8, 8, 32});
    auto w = (*backend)->Allocate({3, 3, 32, 64});
    auto y = (*backend)->Allocate({2, 4, 4, 64});
    ASSERT_TRUE(x.ok() && w.ok() && y.ok());
    ASSERT_TRUE(conv::Conv2D(backend->get(), **x, **w, nullptr, Window{3, 3, 2, 2, Padding::kSame},
                             false, y->get())
                    .ok());
    const std::vector<std::string> chosen = CpuConvolutionsChosen(**backend);
    ASSERT_EQ(chosen.size(), 4u);  // ordered by shape: c = 1, 24, 32, then 32 with strides
    const bool wino = algorithm == ConvAlgorithm::kAuto && avx512;
    EXPECT_THAT(chosen[0], HasSubstr(": direct")) << chosen[0];
    EXPECT_THAT(chosen[1], HasSubstr(": direct")) << chosen[1];
    EXPECT_THAT(chosen[2], HasSubstr(wino ? ": winograd" : ": direct")) << chosen[2];
    EXPECT_THAT(chosen[3], HasSubstr("3x3/2 same no bias: direct")) << chosen[3];
  }
}

// Pooling and batch normalization read a convolution's output in the
// channel-blocked layout it leaves (cpu_tensor.h) as they read a plain one:
// the same results from the same values.
TEST(CpuBackendTest, NewOpsAgreeOnBlockedAndPlainLayouts) {
  auto backend = CreateCpuBackend({.threads = 2, .conv = ConvAlgorithm::kAuto});
  ASSERT_TRUE(backend.ok());
  ComputeBackend* be = backend->get();
  const Shape x_shape = {2, 6, 6, 16}, c = {16};
  std::vector<float> xv(ShapeSize(x_shape)), wv(3 * 3 * 16 * 16), gv(16), bv(16), dyv;
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 37) % 101) / 50 - 1;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>((i * 13) % 29) / 29 - 0.5f;
  for (size_t i = 0; i < 16; ++i) {
    gv[i] = 0.5f + i / 16.0f;
    bv[i] = i / 32.0f - 0.25f;
  }
  auto upload = [&](const Shape& s, const std::vector<float>& v) {
    auto t = be->Allocate(s);
    EXPECT_TRUE(t.ok() && be->CopyFromHost(v, t->get()).ok());
    return *std::move(t);
  };
  auto download = [&](const DeviceTensor& t) {
    std::vector<float> v(t.size());
    EXPECT_TRUE(be->CopyToHost(t, absl::MakeSpan(v)).ok());
    return v;
  };
  auto x = upload(x_shape, xv), w = upload({3, 3, 16, 16}, wv), gamma = upload(c, gv),
       beta = upload(c, bv);
  auto conv_out = *be->Allocate(x_shape);
  ASSERT_TRUE(conv::Conv2D(be, *x, *w, nullptr, kConv3x3Same, false, conv_out.get()).ok());
  const std::vector<float> conv_values = download(*conv_out);
  auto plain = upload(x_shape, conv_values);  // the same values, plain
  dyv.resize(conv_values.size());
  for (size_t i = 0; i < dyv.size(); ++i) dyv[i] = static_cast<float>((i * 7) % 23) / 23 - 0.5f;
  auto run = [&](const DeviceTensor& in) {
    std::vector<std::vector<float>> out;
    for (const Window& win :
         {Window{3, 3, 2, 2, Padding::kSame}, Window{2, 2, 1, 1, Padding::kValid}, kPool2x2}) {
      auto y = *be->Allocate(win.Output(x_shape, 16));
      EXPECT_TRUE(pooling::MaxPool(be, in, win, y.get()).ok());
      out.push_back(download(*y));
      EXPECT_TRUE(pooling::AvgPool(be, in, win, y.get()).ok());
      out.push_back(download(*y));
      auto dy = upload(y->shape(), std::vector<float>(y->size(), 0.25f));
      auto dx = *be->Allocate(x_shape);
      EXPECT_TRUE(pooling::MaxPoolBackward(be, in, *dy, win, dx.get()).ok());
      out.push_back(download(*dx));
    }
    auto y = *be->Allocate(x_shape);
    auto mean = *be->Allocate(c);
    auto var = *be->Allocate(c);
    EXPECT_TRUE(
        batch_norm::BatchNorm(be, in, *gamma, *beta, 1e-3f, y.get(), mean.get(), var.get()).ok());
    out.push_back(download(*y));
    out.push_back(download(*mean));
    out.push_back(download(*var));
    EXPECT_TRUE(
        batch_norm::BatchNormInference(be, in, *gamma, *beta, *mean, *var, 1e-3f, y.get()).ok());
    out.push_back(download(*y));
    auto dy = upload(x_shape, dyv);
    auto dg = *be->Allocate(c);
    auto db = *be->Allocate(c);
    EXPECT_TRUE(batch_norm::BatchNormBackward(be, in, *dy, *gamma, *mean, *var, 1e-3f, y.get(),
                                              dg.get(), db.get())
                    .ok());
    out.push_back(download(*y));
    out.push_back(download(*dg));
    out.push_back(download(*db));
    return out;
  };
  const auto blocked = run(*conv_out), flat = run(*plain);
  ASSERT_EQ(blocked.size(), flat.size());
  for (size_t i = 0; i < blocked.size(); ++i) {
    ASSERT_EQ(blocked[i].size(), flat[i].size()) << "output " << i;
    for (size_t j = 0; j < blocked[i].size(); ++j) {
      EXPECT_NEAR(blocked[i][j], flat[i][j], 1e-6 * (1 + std::abs(flat[i][j])))
          << "output " << i << " element " << j;
    }
  }
}

// Sizes are checked before any arithmetic can wrap: a channel count near
// 2^63 (rounded up to the block of 16 for the blocked layouts) and element
// counts whose product overflows are INVALID_ARGUMENT; ids need no room for a
// blocked layout.
// Supports asks the registry: an op without a kernel is not supported, a
// registered one where its Accepts takes the shapes (a convolution's window
// and kernel, a pooling window without dilation, batch normalization's
// rank), SoftmaxCrossEntropy of [N,M] logits, and no dimension below 1.
TEST(CpuBackendTest, SupportsAsksTheRegistry) {
  auto backend = CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  const ComputeBackend& be = **backend;
  const Shape x = {2, 6, 6, 4};
  EXPECT_FALSE(be.Supports({"NoSuchOp", x, {}}));
  EXPECT_TRUE(be.Supports({conv::kConv2D, x, {3, 3, 4, 8}, kConv3x3Same}));
  EXPECT_TRUE(be.Supports({conv::kConv2DBackwardData, x, {3, 3, 4, 8}, kConv3x3Same}));
  EXPECT_FALSE(be.Supports({conv::kConv2D, x, {3, 3, 4, 8}, Window{5, 5, 1, 1, Padding::kSame}}))
      << "a 5x5 window with a 3x3 kernel";
  EXPECT_FALSE(be.Supports({conv::kConv2D, x, {3, 3, 4, 8}, Window{7, 7, 1, 1, Padding::kValid}}))
      << "no output";
  EXPECT_FALSE(be.Supports({conv::kConv2D, {2, 36}, {3, 3, 4, 8}, kConv3x3Same})) << "rank 2";
  EXPECT_TRUE(be.Supports({pooling::kMaxPool, x, {}, kPool2x2}));
  EXPECT_FALSE(be.Supports({pooling::kAvgPool, x, {}, Window{2, 2, 2, 2, Padding::kValid, 2, 2}}))
      << "a dilated pooling window";
  EXPECT_FALSE(be.Supports({pooling::kGlobalPool, {2, 36}, {}}));
  EXPECT_TRUE(be.Supports({batch_norm::kBatchNorm, {2, 36}, {}}));
  EXPECT_FALSE(be.Supports({batch_norm::kBatchNorm, {2, 6, 6}, {}}));
  EXPECT_TRUE(be.Supports({elementwise::kAdd, {2, 6, 6}, {}}));
  EXPECT_FALSE(be.Supports({elementwise::kAdd, {2, 0, 6}, {}})) << "a dimension of 0";
  EXPECT_FALSE(be.Supports({elementwise::kAdd, {}, {}})) << "no input shape";
  EXPECT_TRUE(be.Supports({loss::kSoftmaxCrossEntropy, {4, 10}, {}}));
  EXPECT_FALSE(be.Supports({loss::kSoftmaxCrossEntropy, {4, 10, 1}, {}}));
}

TEST(CpuBackendTest, TensorSizesThatOverflowAreRefused) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(cpu::CpuTensor::Create({1, 1, 1, kMax}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu::CpuTensor::Create({int64_t{1} << 40, int64_t{1} << 40}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(cpu::CpuTensor::Create({2, 2}, DType::kInt64).ok());
  auto ids = cpu::CpuTensor::Create({2, 3, 3, 1}, DType::kInt32);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)->bytes(), 18 * sizeof(int32_t));
}

TEST(CpuBackendTest, ConvolutionAlgorithmNames) {
  EXPECT_EQ(*ParseConvAlgorithm("auto"), ConvAlgorithm::kAuto);
  EXPECT_EQ(*ParseConvAlgorithm("direct"), ConvAlgorithm::kDirect);
  EXPECT_STREQ(ConvAlgorithmName(ConvAlgorithm::kDirect), "direct");
  EXPECT_THAT(ParseConvAlgorithm("winograd").status().message(),
              HasSubstr("unknown convolution algorithm \"winograd\"; expected auto or direct"));
}

TEST(CpuBackendTest, ThreadsAreSetAndValidated) {
  ASSERT_TRUE(CreateCpuBackend(1).ok());
  EXPECT_EQ(CpuBackendThreads(), 1);
  ASSERT_TRUE(CreateCpuBackend(2).ok());
  EXPECT_EQ(CpuBackendThreads(), 2);
  EXPECT_EQ(CreateCpuBackend(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace compute
}  // namespace psc
