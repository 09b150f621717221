// The GPU plugin through its boundary, and its loader. Labelled `gpu`, but
// most of it runs and asserts without a GPU: the loader's refusals on fake
// plugins in every build, and, where the plugin is built, that it loads and
// either lists the GPUs or says, as the driver does, that there is none.
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "common/gpu_plugin/plugin_loader.h"
#include "common/gpu_plugin/testing/test_plugin.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace gpu {
namespace {

using ::testing::HasSubstr;

// This test binary's directory (<build>/bin, or the GPU bundle's bin/).
std::string BinDir() {
  const std::string plugin = DefaultGpuPluginPath();
  return plugin.substr(0, plugin.rfind('/'));
}

std::string Fake(const std::string& variant) {
  return BinDir() + "/fake_gpu_plugins/" + variant + ".so";
}

TEST(GpuPluginLoaderTest, RefusesWhatIsNotThisBuildsPlugin) {
  auto missing = GpuPlugin::Load("/nonexistent/libpsc_cuda_plugin.so");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/libpsc_cuda_plugin.so"));

  const std::string junk = ::testing::TempDir() + "/junk_plugin.so";
  std::ofstream(junk) << "not an ELF file";
  auto not_elf = GpuPlugin::Load(junk);
  EXPECT_EQ(not_elf.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(not_elf.status().message(), HasSubstr(junk + ": cannot load: "));

  Dl_info libc{};  // a real shared object without the entry point
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&dlopen), &libc), 0);
  auto no_entry = GpuPlugin::Load(libc.dli_fname);
  EXPECT_EQ(no_entry.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_entry.status().message(), HasSubstr("not a pscluster GPU plugin"));

  auto abi = GpuPlugin::Load(Fake("abi"));
  EXPECT_EQ(abi.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(abi.status().message(), HasSubstr("ABI version 999, this binary needs 1"));

  auto hash = GpuPlugin::Load(Fake("hash"));
  EXPECT_EQ(hash.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(hash.status().message(), HasSubstr("built from other interface headers"));

  auto none = GpuPlugin::Load(Fake("nogpu"));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(),
              HasSubstr(Fake("nogpu") + ": no usable GPU: the fake plugin has none"));
}

TEST(GpuPluginLoaderTest, TheDefaultPathIsBesideTheBinary) {
  const std::string path = DefaultGpuPluginPath();
  EXPECT_THAT(path, ::testing::EndsWith(std::string("/") + kGpuPluginFile));
  struct stat st;
  EXPECT_EQ(stat((BinDir() + "/gpu_plugin_test").c_str(), &st), 0) << path;
}

// The plugin and the driver agree on any machine: no GPU, the plugin's
// "no usable GPU" and a driver that sees none (or is missing); GPUs, a
// list of them with ordinals 0..n-1 and no reason.
TEST(GpuPluginTest, ThePluginAndTheDriverAgree) {
  if (!testing::PluginBuilt()) GTEST_SKIP() << "the GPU plugin is not built (no nvcc)";
  std::string why;
  GpuApi* gpu = testing::TestGpu(&why);
  std::string driver_why;
  const int driver = DriverGpuCount(&driver_why);
  if (gpu == nullptr) {
    EXPECT_THAT(why, HasSubstr("no usable GPU: "));
    EXPECT_LE(driver, 0) << driver_why;
    EXPECT_FALSE(driver_why.empty());
    return;
  }
  std::vector<GpuInfo> gpus = gpu->ListGpus(&why);
  ASSERT_FALSE(gpus.empty()) << why;
  EXPECT_TRUE(why.empty()) << why;
  EXPECT_EQ(driver, static_cast<int>(gpus.size()));
  for (size_t i = 0; i < gpus.size(); ++i) EXPECT_EQ(gpus[i].ordinal, static_cast<int>(i));
  EXPECT_FALSE(gpu->SelfTest(static_cast<int>(gpus.size())).ok());  // past the last
}

TEST(GpuPluginTest, SelfTestMatchesTheHostOnEveryGpu) {
  std::string why;
  GpuApi* gpu = testing::TestGpu(&why);
  if (gpu == nullptr) GTEST_SKIP() << why;
  for (const GpuInfo& info : gpu->ListGpus(&why)) {
    EXPECT_GT(info.total_memory, 0);
    EXPECT_FALSE(info.name.empty());
    absl::Status s = gpu->SelfTest(info.ordinal);
    EXPECT_TRUE(s.ok()) << info.Description() << ": " << s;
  }
  std::printf("%s\n", gpu->LibraryVersions().c_str());
}

}  // namespace
}  // namespace gpu
}  // namespace psc
