// Labelled `gpu`: skips cleanly where no GPU is usable.
#include "common/gpu/gpu_info.h"

#include "gtest/gtest.h"

namespace psc {
namespace gpu {
namespace {

// The list and its reason agree on any machine: no GPU, a reason and a
// failing self-test; GPUs, no reason and ordinals 0..n-1. (Never skips, so a
// GPU machine cannot pass it by skipping.)
TEST(GpuInfoTest, TheListAndItsReasonAgree) {
  std::string why;
  std::vector<GpuInfo> gpus = ListGpus(&why);
  if (gpus.empty()) {
    EXPECT_FALSE(why.empty());
    if (!BuiltWithCuda()) {
      EXPECT_EQ(GpuSelfTest(0).code(), absl::StatusCode::kFailedPrecondition);
    } else {
      EXPECT_FALSE(GpuSelfTest(0).ok());
    }
    return;
  }
  EXPECT_TRUE(why.empty()) << why;
  for (size_t i = 0; i < gpus.size(); ++i) EXPECT_EQ(gpus[i].ordinal, static_cast<int>(i));
  EXPECT_FALSE(GpuSelfTest(static_cast<int>(gpus.size())).ok());  // past the last
}

TEST(GpuInfoTest, SelfTestMatchesTheHostOnEveryGpu) {
  std::string why;
  std::vector<GpuInfo> gpus = ListGpus(&why);
  if (gpus.empty()) GTEST_SKIP() << "no GPU: " << why;
  for (const GpuInfo& gpu : gpus) {
    EXPECT_GT(gpu.total_memory, 0);
    EXPECT_FALSE(gpu.name.empty());
    absl::Status s = GpuSelfTest(gpu.ordinal);
    EXPECT_TRUE(s.ok()) << gpu.Description() << ": " << s;
  }
  std::printf("%s\n", GpuLibraryVersions().c_str());
}

}  // namespace
}  // namespace gpu
}  // namespace psc
