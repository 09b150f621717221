// Labelled `gpu`: skips cleanly where no GPU is usable.
#include "common/gpu/gpu_info.h"

#include "gtest/gtest.h"

namespace psc {
namespace gpu {
namespace {

TEST(GpuInfoTest, NoGpuIsAnEmptyListWithAReason) {
  std::string why;
  std::vector<GpuInfo> gpus = ListGpus(&why);
  if (!gpus.empty()) GTEST_SKIP() << "a GPU is present: " << gpus[0].Description();
  EXPECT_FALSE(why.empty());
  if (!BuiltWithCuda()) {
    EXPECT_EQ(GpuSelfTest(0).code(), absl::StatusCode::kFailedPrecondition);
  } else {
    EXPECT_FALSE(GpuSelfTest(0).ok());
  }
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
