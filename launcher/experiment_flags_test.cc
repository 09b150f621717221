#include "launcher/experiment_flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace launcher {
namespace {

using ::testing::HasSubstr;

TEST(ExperimentFlagsTest, ParseStragglerReadsIndexAndFactor) {
  absl::StatusOr<Straggler> s = ParseStraggler("2:3", 3);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->worker, 2);
  EXPECT_DOUBLE_EQ(s->factor, 3.0);
  s = ParseStraggler("0:1.5", 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ(s->factor, 1.5);
}

TEST(ExperimentFlagsTest, ParseStragglerRefusesBadValuesNamingTheFlag) {
  struct Case {
    const char* spec;
    const char* why;
  } cases[] = {{"3:2", "there is no worker 3"},   {"-1:2", "there is no worker -1"},
               {"1:0.5", "must be in [1, 1000]"}, {"1:nan", "expected INDEX:FACTOR"},
               {"1", "expected INDEX:FACTOR"},    {"x:2", "expected INDEX:FACTOR"},
               {"1:2000", "must be in [1, 1000]"}};
  for (const Case& c : cases) {
    absl::StatusOr<Straggler> s = ParseStraggler(c.spec, 3);
    ASSERT_FALSE(s.ok()) << c.spec;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr("--straggler="));
    EXPECT_THAT(s.status().message(), HasSubstr(c.why)) << c.spec;
  }
}

TEST(ExperimentFlagsTest, ReplicasToAggregateAboveTheWorkersIsRefused) {
  EXPECT_TRUE(CheckReplicasToAggregate({"--epochs=1"}, 3).ok());
  EXPECT_TRUE(CheckReplicasToAggregate({"--replicas_to_aggregate=2"}, 3).ok());
  EXPECT_TRUE(CheckReplicasToAggregate({"--replicas_to_aggregate=0"}, 3).ok());
  absl::Status s = CheckReplicasToAggregate({"--replicas_to_aggregate", "4"}, 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--replicas_to_aggregate=4 is more than the 3 workers"));
  s = CheckReplicasToAggregate({"--replicas_to_aggregate=two"}, 3);
  EXPECT_THAT(s.message(), HasSubstr("not an integer"));
}

}  // namespace
}  // namespace launcher
}  // namespace psc
