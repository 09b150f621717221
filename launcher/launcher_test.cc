#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/launch_plan.h"
#include "launcher/line_prefixer.h"

namespace psc {
namespace launcher {
namespace {

TEST(LaunchPlanTest, EveryTaskGetsAValidTfConfigAndItsOwnPort) {
  auto plan = PlanLocalCluster({2, 3}, [](int n) -> absl::StatusOr<std::vector<int>> {
    std::vector<int> ports;
    for (int i = 0; i < n; ++i) ports.push_back(20000 + i);
    return ports;
  });
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 6u);
  std::vector<std::string> names;
  for (const PlannedTask& t : *plan) {
    names.push_back(t.Name());
    auto c = ClusterConfig::Parse(t.tf_config);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->task_type(), t.type);
    EXPECT_EQ(c->task_index(), t.index);
    EXPECT_EQ(c->self().address.ToString(), t.address);
    EXPECT_EQ(c->num_tasks(TaskType::kPs), 2);
    EXPECT_EQ(c->num_tasks(TaskType::kWorker), 3);
    EXPECT_TRUE(c->ValidateForTraining().ok());
  }
  EXPECT_THAT(
      names, ::testing::ElementsAre("ps:0", "ps:1", "worker:0", "worker:1", "worker:2", "chief:0"));
  EXPECT_EQ((*plan)[0].binary, "ps_server");
  EXPECT_EQ((*plan)[5].binary, "chief");
}

TEST(LaunchPlanTest, RejectsBadCountsAndRepeatedPorts) {
  auto port = [](int n) -> absl::StatusOr<std::vector<int>> { return std::vector<int>(n, 20000); };
  EXPECT_EQ(PlanLocalCluster({0, 2}, port).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanLocalCluster({1, 0}, port).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanLocalCluster({1, 65}, port).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanLocalCluster({1, 1}, port).status().code(), absl::StatusCode::kInternal);
  auto failing = [](int) -> absl::StatusOr<std::vector<int>> {
    return absl::InternalError("no ports");
  };
  EXPECT_EQ(PlanLocalCluster({1, 1}, failing).status().message(), "no ports");
}

TEST(LinePrefixerTest, EmitsWholeLinesOnly) {
  std::vector<std::string> out;
  LinePrefixer p("[worker:0] ", [&](const std::string& s) { out.push_back(s); });
  p.Feed("hel");
  EXPECT_TRUE(out.empty());
  p.Feed("lo\nwor");
  p.Feed("ld\n\nlast");
  p.Flush();
  p.Flush();
  EXPECT_THAT(out, ::testing::ElementsAre("[worker:0] hello\n", "[worker:0] world\n",
                                          "[worker:0] \n", "[worker:0] last\n"));
}

}  // namespace
}  // namespace launcher
}  // namespace psc
