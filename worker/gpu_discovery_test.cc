#include "worker/gpu_discovery.h"

#include "common/gpu_plugin/testing/fake_gpu_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace worker {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<gpu::GpuApi> TwoGpus() {
  return std::make_unique<gpu::testing::FakeGpuApi>(std::vector<gpu::GpuInfo>{
      {0, "fake", 9, 0, 1 << 30, 1 << 30}, {1, "fake", 9, 0, 1 << 30, 1 << 30}});
}

// Seams that record what was asked of them.
struct Machine {
  bool file = true;
  int driver_gpus = 2;
  absl::Status load_error;  // OK: the load gives TwoGpus
  int loads = 0, driver_asked = 0;
  std::string loaded_path;

  GpuDiscoverySeams Seams() {
    return GpuDiscoverySeams{
        [this](const std::string&) { return file; },
        [this](std::string* why) {
          ++driver_asked;
          if (driver_gpus <= 0) *why = "the CUDA driver sees no device";
          return driver_gpus;
        },
        [this](const std::string& path) -> absl::StatusOr<std::unique_ptr<gpu::GpuPlugin>> {
          ++loads;
          loaded_path = path;
          if (!load_error.ok()) return load_error;
          return gpu::GpuPlugin::FromApi(TwoGpus(), path);
        }};
  }
};

TEST(GpuDiscoveryTest, CpuNeverLoadsThePlugin) {
  Machine m;
  WorkerGpus g = DiscoverGpus(DeviceKind::kCpu, "/p.so", m.Seams());
  EXPECT_EQ(g.plugin, nullptr);
  EXPECT_EQ(m.loads, 0);
  EXPECT_EQ(m.driver_asked, 0);
  EXPECT_EQ(g.why_none, "--device=cpu");
}

TEST(GpuDiscoveryTest, AutoLoadsOnlyWithAFileAndAGpuTheDriverSees) {
  Machine no_file;
  no_file.file = false;
  WorkerGpus g = DiscoverGpus(DeviceKind::kAuto, "/p.so", no_file.Seams());
  EXPECT_EQ(no_file.loads + no_file.driver_asked, 0);
  EXPECT_EQ(g.why_none, "no GPU plugin at /p.so");

  Machine no_gpu;
  no_gpu.driver_gpus = 0;
  g = DiscoverGpus(DeviceKind::kAuto, "/p.so", no_gpu.Seams());
  EXPECT_EQ(no_gpu.loads, 0);
  EXPECT_EQ(g.why_none, "the CUDA driver sees no device");
  EXPECT_TRUE(g.gpus.empty());

  Machine gpus;
  g = DiscoverGpus(DeviceKind::kAuto, "/p.so", gpus.Seams());
  EXPECT_EQ(gpus.loads, 1);
  ASSERT_NE(g.api(), nullptr);
  EXPECT_EQ(g.gpus.size(), 2u);

  // A plugin that fails to load leaves auto on the CPU, the reason kept.
  Machine broken;
  broken.load_error = absl::FailedPreconditionError("GPU plugin /p.so: cannot load: libcudnn.so.9");
  g = DiscoverGpus(DeviceKind::kAuto, "/p.so", broken.Seams());
  EXPECT_EQ(g.plugin, nullptr);
  EXPECT_THAT(g.why_none, HasSubstr("cannot load: libcudnn.so.9"));
}

TEST(GpuDiscoveryTest, GpuAlwaysTriesAndKeepsTheLoadersError) {
  Machine m;
  m.file = false;
  m.load_error = absl::NotFoundError("GPU plugin /p.so: no such file");
  WorkerGpus g = DiscoverGpus(DeviceKind::kGpu, "/p.so", m.Seams());
  EXPECT_EQ(m.loads, 1);
  EXPECT_EQ(m.driver_asked, 0);  // the plugin's own check says why
  EXPECT_EQ(g.why_none, "GPU plugin /p.so: no such file");
  // Which PlanDevices turns into exit 1 naming it, or the CPU when soft.
  DeviceOptions o;
  o.device = DeviceKind::kGpu;
  auto plan = PlanDevices(o, g.gpus, g.why_none, 0);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(), HasSubstr("GPU plugin /p.so: no such file"));
  o.soft_device_placement = true;
  plan = PlanDevices(o, g.gpus, g.why_none, 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->on_gpu());
}

TEST(GpuDiscoveryTest, WithoutAPathThePluginBesideTheBinaryIsUsed) {
  Machine m;
  DiscoverGpus(DeviceKind::kGpu, "", m.Seams());
  EXPECT_EQ(m.loaded_path, gpu::DefaultGpuPluginPath());
}

}  // namespace
}  // namespace worker
}  // namespace psc
