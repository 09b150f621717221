// The CPU backend against the plain double-precision reference: every op,
// random and seed_cnn shapes, finite differences (backend_conformance.cc).
#include "common/compute/cpu_backend.h"

#include <string>
#include <utility>
#include <vector>

#include "common/compute/backend_conformance.h"
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
  const bool avx512 = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
  for (ConvAlgorithm algorithm : {ConvAlgorithm::kAuto, ConvAlgorithm::kDirect}) {
    auto backend = CreateCpuBackend({.threads = 1, .conv = algorithm});
    ASSERT_TRUE(backend.ok());
    for (const auto& [c, k] : {std::pair{1, 32}, std::pair{32, 64}, std::pair{24, 32}}) {
      auto x = (*backend)->Allocate({2, 8, 8, c});
      auto w = (*backend)->Allocate({3, 3, c, k});
      auto b = (*backend)->Allocate({k});
      auto y = (*backend)->Allocate({2, 8, 8, k});
      ASSERT_TRUE(x.ok() && w.ok() && b.ok() && y.ok());
      ASSERT_TRUE((*backend)->Conv2D(**x, **w, **b, false, y->get()).ok());
    }
    const std::vector<std::string> chosen = CpuConvolutionsChosen(**backend);
    ASSERT_EQ(chosen.size(), 3u);  // ordered by shape: c = 1, 24, 32
    const bool wino = algorithm == ConvAlgorithm::kAuto && avx512;
    EXPECT_THAT(chosen[0], HasSubstr(": direct")) << chosen[0];
    EXPECT_THAT(chosen[1], HasSubstr(": direct")) << chosen[1];
    EXPECT_THAT(chosen[2], HasSubstr(wino ? ": winograd" : ": direct")) << chosen[2];
  }
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
