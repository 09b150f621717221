#include "chief/task_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

using ::testing::HasSubstr;

class TaskRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c =
        cluster::ClusterConfig::Parse(R"({"cluster": {"chief": ["c:1"], "worker": ["w0:1", "w1:1"],
                                     "ps": ["p:1"]}, "task": {"type": "chief"}})");
    ASSERT_TRUE(c.ok());
    cluster_.emplace(*std::move(c));
    registry_.emplace(&*cluster_, &clock_);
  }
  base::FakeClock clock_;
  std::optional<cluster::ClusterConfig> cluster_;
  std::optional<TaskRegistry> registry_;
};

TEST_F(TaskRegistryTest, RegisterHeartbeatReport) {
  auto n = registry_->Register("worker", 1, 42);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  clock_.Advance(absl::Seconds(3));
  EXPECT_TRUE(registry_->Heartbeat("worker", 1, 42).ok());
  EXPECT_TRUE(registry_->Report("worker", 1, 42, 7, 20, "").ok());
  auto r = registry_->Get(cluster::TaskType::kWorker, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->last_seen, absl::UnixEpoch() + absl::Seconds(3));
  EXPECT_EQ(r->last_unit, 7);
  EXPECT_EQ(r->steps_done, 20);
  EXPECT_EQ(r->task.address.ToString(), "w1:1");
}

TEST_F(TaskRegistryTest, ABadReportIsRefusedAndChangesNothing) {
  ASSERT_TRUE(registry_->Register("worker", 0, 9).ok());
  ASSERT_TRUE(registry_->Report("worker", 0, 9, 40, 3, "").ok());
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(registry_->Report("worker", 0, 9, 40, -1, "").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Report("worker", 0, 9, -2, 4, "").code(),
            absl::StatusCode::kInvalidArgument);
  auto r = registry_->Get(cluster::TaskType::kWorker, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->steps_done, 3);
  EXPECT_EQ(r->last_unit, 40);
  EXPECT_EQ(r->last_seen, absl::UnixEpoch()) << "a refused report is no heartbeat";
  EXPECT_TRUE(registry_->Report("worker", 0, 9, -1, 0, "").ok()) << "no unit yet";
}

TEST_F(TaskRegistryTest, ARestartReplacesTheIncarnation) {
  ASSERT_TRUE(registry_->Register("ps", 0, 1).ok());
  ASSERT_TRUE(registry_->Register("ps", 0, 1).ok());  // a retried Register is idempotent
  EXPECT_EQ(registry_->Get(cluster::TaskType::kPs, 0)->registrations, 1);
  ASSERT_TRUE(registry_->Register("ps", 0, 2).ok());
  EXPECT_EQ(registry_->Get(cluster::TaskType::kPs, 0)->registrations, 2);
  absl::Status stale = registry_->Heartbeat("ps", 0, 1);
  EXPECT_EQ(stale.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(stale.message(), HasSubstr("register again"));
  EXPECT_TRUE(registry_->Heartbeat("ps", 0, 2).ok());
  EXPECT_EQ(registry_->size(), 1);
}

TEST_F(TaskRegistryTest, RejectsWhatIsNotInTheCluster) {
  EXPECT_EQ(registry_->Register("worker", 2, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(registry_->Register("worker", 2, 1).status().message(),
              HasSubstr("task worker:2 is not in the cluster (which has 2 \"worker\" tasks)"));
  EXPECT_EQ(registry_->Register("evaluator", 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Register("trainer", 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Register("worker", 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Heartbeat("worker", 0, 5).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->size(), 0);
}

TEST(TaskRegistryEvaluationTest, OnlyTheEvaluatorReportsEvaluationsAndTheHighestStepStays) {
  auto c = cluster::ClusterConfig::Parse(
      R"({"cluster": {"chief": ["c:1"], "worker": ["w0:1"], "ps": ["p:1"],
          "evaluator": ["e:1"]}, "task": {"type": "chief"}})");
  ASSERT_TRUE(c.ok()) << c.status();
  base::FakeClock clock;
  TaskRegistry registry(&*c, &clock);
  EXPECT_EQ(registry.evaluated_step(), -1);
  EXPECT_TRUE(registry.RecordEvaluation("evaluator", 0, 100).ok());
  EXPECT_TRUE(registry.RecordEvaluation("evaluator", 0, 50).ok()) << "an older one, late";
  EXPECT_EQ(registry.evaluated_step(), 100);
  absl::Status s = registry.RecordEvaluation("worker", 0, 200);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("only an evaluator"));
  EXPECT_EQ(registry.RecordEvaluation("evaluator", 1, 200).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RecordEvaluation("evaluator", 0, -1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.evaluated_step(), 100) << "the refused reports changed nothing";
}

}  // namespace
}  // namespace chief
}  // namespace psc
