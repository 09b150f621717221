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

// A worker of a one-worker cluster with `flags` and a metrics port: its
// first /metrics page (waiting up to 60 s for it) and its mapped files
// (/proc/<pid>/maps) once it serves; the worker is stopped.
struct ServedWorker {
  std::string page;
  std::string mapped;
  std::string log;
};
ServedWorker StartWorkerAndScrape(std::vector<std::string> flags) {
  ServedWorker out;
  const int port = PickFreePort();
  flags.push_back(absl::StrCat("--metrics_port=", port));
  auto worker = Daemon::Start("worker", ClusterSpec(1, 1).TfConfig(cluster::TaskType::kWorker, 0),
                              flags, MakeTempDir("worker_links"));
  EXPECT_TRUE(worker.ok()) << worker.status();
  if (!worker.ok()) return out;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (int i = 0; i < 600 && absl::Now() < deadline; ++i) {
    out.page = metrics::HttpGet(port, "/metrics");
    if (out.page.find(" 200 OK") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(100));  // polling, 60 s at most
  }
  std::ifstream maps(absl::StrCat("/proc/", (*worker)->process().pid(), "/maps"));
  out.mapped.assign(std::istreambuf_iterator<char>(maps), {});
  out.log = (*worker)->Log();
  (*worker)->process().Stop(absl::Seconds(10));
  return out;
}

// --device=cpu, and auto where the CUDA driver sees no GPU: no CUDA library
// (nor the plugin) is mapped, in a build with the plugin or without.
class CpuWorkerTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CpuWorkerTest, MapsNoCudaLibrary) {
  std::string why;
  if (std::string(GetParam()) == "auto" && gpu::DriverGpuCount(&why) > 0) {
    GTEST_SKIP() << "auto takes the GPU here";
  }
  const ServedWorker w = StartWorkerAndScrape({absl::StrCat("--device=", GetParam())});
  ASSERT_THAT(w.page, HasSubstr(" 200 OK")) << w.log;
  for (const char* lib : {"libcuda", "libcublas", "libcudnn", "libnccl", gpu::kGpuPluginFile}) {
    EXPECT_THAT(w.mapped, ::testing::Not(HasSubstr(lib)));
  }
}
INSTANTIATE_TEST_SUITE_P(Devices, CpuWorkerTest, ::testing::Values("cpu", "auto"));

// --device=gpu with a plugin that is missing or will not load is exit 1
// naming its path and dlerror() (in every build); --soft_device_placement
// trains on the CPU instead.
TEST(WorkerLinksTest, AGpuAskedForWithoutItsPluginIsExitOneNamingIt) {
  const std::string junk = MakeTempDir("junk_plugin") + "/libpsc_cuda_plugin.so";
  std::ofstream(junk) << "not a shared object";
  for (const std::string& path : {std::string("/nonexistent/libpsc_cuda_plugin.so"), junk}) {
    auto r =
        RunProgram({BinPath("worker"), "--list_devices", "--device=gpu", "--gpu_plugin=" + path},
                   {}, absl::Seconds(60));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit.ToString(), "exit 1") << r->out << r->err;
    EXPECT_THAT(r->err, HasSubstr("GPU plugin " + path + ": "));
    if (path == junk) {
      EXPECT_THAT(r->err, HasSubstr("cannot load: " + junk));
    }
    auto soft = RunProgram({BinPath("worker"), "--list_devices", "--device=gpu",
                            "--soft_device_placement", "--gpu_plugin=" + path},
                           {}, absl::Seconds(60));
    ASSERT_TRUE(soft.ok()) << soft.status();
    EXPECT_EQ(soft->exit.ToString(), "exit 0") << soft->err;
    EXPECT_THAT(soft->out, HasSubstr("device:CPU:0"));
  }
}

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
  const ServedWorker w = StartWorkerAndScrape({"--device=gpu", "--soft_device_placement"});
  EXPECT_THAT(w.page, HasSubstr("pscluster_build_info{")) << w.log;
  // The plugin, and cuBLASLt with it, are mapped into the worker.
  EXPECT_THAT(w.mapped, HasSubstr(gpu::kGpuPluginFile));
  EXPECT_THAT(w.mapped, HasSubstr("libcublasLt"));
}
#endif  // PSC_HAVE_GPU_PLUGIN

}  // namespace
}  // namespace testing
}  // namespace psc
