// The binaries link no CUDA library: the CUDA backend is the GPU plugin,
// loaded with dlopen when a GPU is asked for (common/gpu_plugin). In a build
// with nvcc, the plugin was built, it loads here and, without a GPU, says so
// from its own initialization (not a dlopen error); and a worker that has it
// loaded (and so maps cuBLASLt, whose static TLS once broke the metrics
// server's threads) still serves /metrics.
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/gpu_plugin/plugin_loader.h"
#include "common/metrics/testing/http_get.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;

std::string Plugin() { return BinPath(gpu::kGpuPluginFile); }

TEST(WorkerLinksTest, NoBinaryNeedsACudaLibrary) {
  const std::regex cuda(R"(^lib(cuda|cudart|cublas[A-Za-z]*|cudnn[A-Za-z_]*|nccl)\.so)");
  for (const char* binary : {"worker", "ps_server", "chief", "evaluator", "pscluster"}) {
    auto r = RunProgram({"/usr/bin/readelf", "-dW", BinPath(binary)}, {}, absl::Seconds(60));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit.ToString(), "exit 0") << r->err;
    std::istringstream lines(r->out);
    std::string line;
    int needed = 0;
    for (int i = 0; i < 100000 && std::getline(lines, line); ++i) {
      const size_t open = line.find("Shared library: [");
      if (open == std::string::npos) continue;
      ++needed;
      const std::string lib = line.substr(open + 17, line.find(']', open) - open - 17);
      EXPECT_FALSE(std::regex_search(lib, cuda)) << binary << " needs " << lib;
    }
    EXPECT_GT(needed, 5) << binary << ": readelf listed no DT_NEEDED entries\n" << r->out;
  }
}

// --device=cpu, and auto where the CUDA driver sees no GPU: no CUDA library
// (nor the plugin) is mapped, in a build with the plugin or without.
class CpuWorkerTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CpuWorkerTest, MapsNoCudaLibrary) {
  std::string why;
  if (std::string(GetParam()) == "auto" && gpu::DriverGpuCount(&why) > 0) {
    GTEST_SKIP() << "auto takes the GPU here";
  }
  const std::string dir = MakeTempDir("worker_cpu");
  ClusterSpec spec(1, 1);
  const int port = PickFreePort();
  auto worker = Daemon::Start(
      "worker", spec.TfConfig(cluster::TaskType::kWorker, 0),
      {absl::StrCat("--device=", GetParam()), absl::StrCat("--metrics_port=", port)}, dir);
  ASSERT_TRUE(worker.ok()) << worker.status();
  std::string page;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (int i = 0; i < 600 && absl::Now() < deadline; ++i) {
    page = metrics::HttpGet(port, "/metrics");
    if (page.find(" 200 OK") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(100));  // polling, 60 s at most
  }
  ASSERT_THAT(page, HasSubstr(" 200 OK")) << (*worker)->Log();
  std::ifstream maps(absl::StrCat("/proc/", (*worker)->process().pid(), "/maps"));
  const std::string mapped((std::istreambuf_iterator<char>(maps)), {});
  for (const char* lib : {"libcuda", "libcublas", "libcudnn", "libnccl", gpu::kGpuPluginFile}) {
    EXPECT_THAT(mapped, ::testing::Not(HasSubstr(lib)));
  }
  (*worker)->process().Stop(absl::Seconds(10));
}
INSTANTIATE_TEST_SUITE_P(Devices, CpuWorkerTest, ::testing::Values("cpu", "auto"));

#if PSC_HAVE_GPU_PLUGIN
TEST(WorkerLinksTest, ThePluginIsBuiltAndWithoutAGpuItsInitSaysSo) {
  std::ifstream built(Plugin());
  ASSERT_TRUE(built.good()) << Plugin() << " was not built";
  auto plugin = gpu::GpuPlugin::Load(Plugin());
  std::string why;
  if (gpu::DriverGpuCount(&why) > 0) {
    ASSERT_TRUE(plugin.ok()) << plugin.status();
    std::printf("GPU plugin loaded: %s\n", (*plugin)->build().c_str());
    return;
  }
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kFailedPrecondition) << plugin.status();
  EXPECT_THAT(plugin.status().message(), HasSubstr(Plugin() + ": no usable GPU: "));
  EXPECT_THAT(plugin.status().message(), ::testing::Not(HasSubstr("cannot load")));
  std::printf("%s\n", std::string(plugin.status().message()).c_str());
}

TEST(WorkerLinksTest, AWorkerWithThePluginLoadedServesMetrics) {
  const std::string dir = MakeTempDir("worker_links");
  ClusterSpec spec(1, 1);
  const int port = PickFreePort();
  auto worker = Daemon::Start(
      "worker", spec.TfConfig(cluster::TaskType::kWorker, 0),
      {"--device=gpu", "--soft_device_placement", absl::StrCat("--metrics_port=", port)}, dir);
  ASSERT_TRUE(worker.ok()) << worker.status();
  std::string page;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (int i = 0; i < 600 && absl::Now() < deadline; ++i) {
    page = metrics::HttpGet(port, "/metrics");
    if (page.find(" 200 OK") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(100));  // polling, 60 s at most
  }
  EXPECT_THAT(page, HasSubstr("pscluster_build_info{")) << (*worker)->Log();
  // The plugin, and cuBLASLt with it, are mapped into the worker.
  std::ifstream maps(absl::StrCat("/proc/", (*worker)->process().pid(), "/maps"));
  const std::string mapped((std::istreambuf_iterator<char>(maps)), {});
  EXPECT_THAT(mapped, HasSubstr(gpu::kGpuPluginFile));
  EXPECT_THAT(mapped, HasSubstr("libcublasLt"));
  (*worker)->process().Stop(absl::Seconds(10));
}

#endif  // PSC_HAVE_GPU_PLUGIN

}  // namespace
}  // namespace testing
}  // namespace psc
