// The worker's device flags and device selection, on fake device lists: no
// GPU is needed for any of it.
#include "worker/device_options.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/device_plan.h"

namespace psc {
namespace worker {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

std::vector<gpu::GpuInfo> FakeGpus(int count, int64_t memory = 80 * kGiB) {
  std::vector<gpu::GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    gpu::GpuInfo g;
    g.ordinal = i;
    g.name = "Fake H200";
    g.cc_major = 9;
    g.total_memory = memory;
    g.free_memory = memory - kGiB;
    gpus.push_back(g);
  }
  return gpus;
}

constexpr char kNoDriver[] = "cudaGetDeviceCount: cudaErrorInsufficientDriver";

// ---- Parsing and validation ----

TEST(DeviceOptionsTest, ParsesTheDeviceKind) {
  EXPECT_EQ(*ParseDeviceKind("auto"), DeviceKind::kAuto);
  EXPECT_EQ(*ParseDeviceKind("GPU"), DeviceKind::kGpu);
  EXPECT_EQ(*ParseDeviceKind(" cpu "), DeviceKind::kCpu);
  auto bad = ParseDeviceKind("tpu");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("--device=tpu"));
  EXPECT_STREQ(DeviceKindName(DeviceKind::kGpu), "gpu");
}

TEST(DeviceOptionsTest, ParsesVisibleDevices) {
  EXPECT_EQ(*ParseVisibleDevices("0,2"), (std::vector<int>{0, 2}));
  EXPECT_EQ(*ParseVisibleDevices(" 3 , 1"), (std::vector<int>{3, 1}));
  EXPECT_TRUE(ParseVisibleDevices("")->empty());
  for (const char* bad : {"0,x", "-1", "0,,1", "1.5", "0,0"}) {
    auto r = ParseVisibleDevices(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--visible_devices=")) << bad;
  }
  EXPECT_THAT(ParseVisibleDevices("0,0").status().message(), HasSubstr("listed twice"));
}

TEST(DeviceOptionsTest, TheDefaultsAreValid) { EXPECT_TRUE(ValidateDeviceOptions({}).ok()); }

TEST(DeviceOptionsTest, MemoryGrowthConflictsWithVirtualDevices) {
  DeviceOptions o;
  o.memory_growth = true;
  o.virtual_devices = 2;
  o.memory_limit_mb = 2048;
  absl::Status s = ValidateDeviceOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--memory_growth conflicts with --virtual_devices=2"));
  o.virtual_devices = 1;  // growth with a cap on one device is fine
  EXPECT_TRUE(ValidateDeviceOptions(o).ok());
}

TEST(DeviceOptionsTest, VirtualGpusNeedAMemoryLimit) {
  DeviceOptions o;
  o.virtual_devices = 2;
  absl::Status s = ValidateDeviceOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("needs --memory_limit_mb"));
  o.device = DeviceKind::kCpu;  // virtual CPUs need none
  EXPECT_TRUE(ValidateDeviceOptions(o).ok());
  o.device = DeviceKind::kGpu;
  o.memory_limit_mb = 1024;
  EXPECT_TRUE(ValidateDeviceOptions(o).ok());
}

TEST(DeviceOptionsTest, BadNumbersAreInvalidArgument) {
  DeviceOptions o;
  o.virtual_devices = 0;
  EXPECT_THAT(ValidateDeviceOptions(o).message(), HasSubstr("--virtual_devices=0"));
  o.virtual_devices = 1;
  o.memory_limit_mb = -5;
  EXPECT_THAT(ValidateDeviceOptions(o).message(), HasSubstr("--memory_limit_mb=-5"));
}

// ---- Device selection ----

TEST(PlanDevicesTest, AutoOnACpuOnlyMachineIsTheCpuAsBefore) {
  auto plan = PlanDevices({}, {}, kNoDriver, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->devices.size(), 1u);
  EXPECT_EQ(plan->devices[0].kind, LogicalDevice::kCpu);
  EXPECT_EQ(plan->devices[0].name, "/job:worker/replica:0/task:1/device:CPU:0");
  EXPECT_FALSE(plan->on_gpu());
  EXPECT_TRUE(plan->warnings.empty());  // silently
  EXPECT_THAT(plan->cpu_reason, HasSubstr(kNoDriver));
}

TEST(PlanDevicesTest, AutoTakesEveryGpu) {
  auto plan = PlanDevices({}, FakeGpus(2), "", 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->devices.size(), 2u);
  EXPECT_TRUE(plan->on_gpu());
  EXPECT_EQ(plan->devices[1].gpu, 1);
  EXPECT_EQ(plan->devices[1].name, "/job:worker/replica:0/task:0/device:GPU:1");
  EXPECT_EQ(plan->devices[0].memory_limit_bytes, 0);
}

TEST(PlanDevicesTest, GpuWithoutAGpuIsAnErrorNamingTheReason) {
  DeviceOptions o;
  o.device = DeviceKind::kGpu;
  auto plan = PlanDevices(o, {}, kNoDriver, 0);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(), HasSubstr(kNoDriver));
  EXPECT_THAT(plan.status().message(), HasSubstr("--soft_device_placement"));
}

TEST(PlanDevicesTest, SoftPlacementFallsBackToTheCpuWithAWarning) {
  DeviceOptions o;
  o.device = DeviceKind::kGpu;
  o.soft_device_placement = true;
  auto plan = PlanDevices(o, {}, kNoDriver, 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->devices.size(), 1u);
  EXPECT_EQ(plan->devices[0].kind, LogicalDevice::kCpu);
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_THAT(plan->warnings[0], HasSubstr(kNoDriver));
}

TEST(PlanDevicesTest, CpuIgnoresTheGpus) {
  DeviceOptions o;
  o.device = DeviceKind::kCpu;
  auto plan = PlanDevices(o, FakeGpus(2), "", 0);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->devices.size(), 1u);
  EXPECT_EQ(plan->devices[0].kind, LogicalDevice::kCpu);
  EXPECT_EQ(plan->cpu_reason, "--device=cpu");
}

TEST(PlanDevicesTest, VisibleDevicesSelectAndOrderGpus) {
  DeviceOptions o;
  o.visible_devices = {2, 0};
  auto plan = PlanDevices(o, FakeGpus(3), "", 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->devices.size(), 2u);
  EXPECT_EQ(plan->devices[0].gpu, 2);
  EXPECT_EQ(plan->devices[0].name, "/job:worker/replica:0/task:0/device:GPU:0");
  EXPECT_EQ(plan->devices[1].gpu, 0);
}

TEST(PlanDevicesTest, AMissingVisibleGpuIsInvalidArgument) {
  DeviceOptions o;
  o.visible_devices = {0, 2};
  auto plan = PlanDevices(o, FakeGpus(2), "", 0);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("GPU 2 does not exist"));
  EXPECT_THAT(plan.status().message(), HasSubstr("GPUs: 0, 1"));
  // Without any GPU, auto still trains on the CPU.
  auto cpu = PlanDevices(o, {}, kNoDriver, 0);
  ASSERT_TRUE(cpu.ok());
  EXPECT_FALSE(cpu->on_gpu());
}

TEST(PlanDevicesTest, VirtualDevicesSplitEachGpu) {
  DeviceOptions o;
  o.virtual_devices = 2;
  o.memory_limit_mb = 2048;
  auto plan = PlanDevices(o, FakeGpus(2), "", 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->devices.size(), 4u);
  const int want_gpu[] = {0, 0, 1, 1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(plan->devices[i].gpu, want_gpu[i]);
    EXPECT_EQ(plan->devices[i].logical_index, i % 2);
    EXPECT_EQ(plan->devices[i].logical_count, 2);
    EXPECT_EQ(plan->devices[i].memory_limit_bytes, int64_t{2048} << 20);
    EXPECT_EQ(plan->devices[i].name,
              "/job:worker/replica:0/task:3/device:GPU:" + std::to_string(i));
  }
}

TEST(PlanDevicesTest, LimitsBeyondTheGpuAreInvalidArgument) {
  DeviceOptions o;
  o.virtual_devices = 3;
  o.memory_limit_mb = 2048;
  auto plan = PlanDevices(o, FakeGpus(1, 4 * kGiB), "", 0);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("need more than GPU 0's 4096 MiB"));
}

TEST(PlanDevicesTest, VirtualCpus) {
  DeviceOptions o;
  o.device = DeviceKind::kCpu;
  o.virtual_devices = 2;
  auto plan = PlanDevices(o, {}, kNoDriver, 0);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->devices.size(), 2u);
  EXPECT_EQ(plan->devices[1].name, "/job:worker/replica:0/task:0/device:CPU:1");
}

TEST(PlanDevicesTest, InvalidOptionsFailBeforeLookingAtDevices) {
  DeviceOptions o;
  o.memory_growth = true;
  o.virtual_devices = 2;
  o.memory_limit_mb = 100;
  EXPECT_EQ(PlanDevices(o, FakeGpus(1), "", 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FormatDevicePlanTest, ListsPhysicalThenLogicalDevices) {
  DeviceOptions o;
  o.virtual_devices = 2;
  o.memory_limit_mb = 2048;
  const std::vector<gpu::GpuInfo> gpus = FakeGpus(1);
  auto plan = PlanDevices(o, gpus, "", 0);
  ASSERT_TRUE(plan.ok());
  const std::string text = FormatDevicePlan(*plan, gpus, "");
  EXPECT_THAT(text, HasSubstr("/physical_device:GPU:0"));
  EXPECT_THAT(text, HasSubstr("/job:worker/replica:0/task:0/device:CPU:0"));
  EXPECT_THAT(text, HasSubstr("/job:worker/replica:0/task:0/device:GPU:1"));
  EXPECT_THAT(text, HasSubstr("logical device 1 of 2, memory limit 2048 MiB"));
  const std::string cpu = FormatDevicePlan(CpuOnlyPlan(0), {}, kNoDriver);
  EXPECT_THAT(cpu, HasSubstr("(no GPU: "));
  EXPECT_THAT(cpu, HasSubstr("/job:worker/replica:0/task:0/device:CPU:0"));
}

}  // namespace
}  // namespace worker
}  // namespace psc
