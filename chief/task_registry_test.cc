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
  // A worker beyond the TF_CONFIG's joins instead (OUT_OF_RANGE tells it).
  EXPECT_EQ(registry_->Register("worker", 2, 1).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(registry_->Register("worker", 2, 1).status().message(),
              HasSubstr("worker:2 is beyond the chief's TF_CONFIG (2 worker(s)): it joins"));
  EXPECT_EQ(registry_->Register("ps", 1, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(registry_->Register("ps", 1, 1).status().message(),
              HasSubstr("task ps:1 is not in the cluster (which has 1 \"ps\" task)"));
  // TF's one evaluator task may announce itself (evaluator:0), no other.
  EXPECT_EQ(registry_->Register("evaluator", 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->RecordEvaluation("evaluator", 1, 5).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(registry_->has_evaluator());
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

TEST_F(TaskRegistryTest, AnEvaluatorOutsideTheTfConfigAnnouncesItself) {
  EXPECT_FALSE(registry_->has_evaluator()) << "the TF_CONFIG lists none";
  auto n = registry_->Register("evaluator", 0, 7);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  EXPECT_TRUE(registry_->has_evaluator());
  EXPECT_EQ(registry_->evaluated_step(), -1);
  EXPECT_TRUE(registry_->RecordEvaluation("evaluator", 0, 30).ok());
  EXPECT_EQ(registry_->evaluated_step(), 30);
  auto r = registry_->Get(cluster::TaskType::kEvaluator, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->task.address.host.empty()) << "the chief never calls it";
  EXPECT_TRUE(registry_->JoinedWorkers().empty());
}

TEST_F(TaskRegistryTest, AnEvaluationReportAloneAnnouncesTheEvaluator) {
  EXPECT_TRUE(registry_->RecordEvaluation("evaluator", 0, 10).ok());
  EXPECT_TRUE(registry_->has_evaluator());
  EXPECT_EQ(registry_->size(), 0) << "a report registers nothing";
}

TEST(TaskRegistryEvaluationTest, ATfConfigWithAnEvaluatorHasOneBeforeItSpeaks) {
  auto c = cluster::ClusterConfig::Parse(
      R"({"cluster": {"chief": ["c:1"], "worker": ["w0:1"], "evaluator": ["e:1"]},
          "task": {"type": "chief"}})");
  ASSERT_TRUE(c.ok()) << c.status();
  base::FakeClock clock;
  TaskRegistry registry(&*c, &clock);
  EXPECT_TRUE(registry.has_evaluator());
}

// Seats beyond the TF_CONFIG's workers (--max_workers), joined by address.
class TaskRegistryJoinTest : public TaskRegistryTest {
 protected:
  void SetUp() override {
    TaskRegistryTest::SetUp();
    TaskRegistryOptions options;
    options.max_workers = 4;
    options.heartbeat_timeout = absl::Seconds(10);
    registry_.emplace(&*cluster_, &clock_, options);
  }
};

TEST_F(TaskRegistryJoinTest, NewAddressesTakeTheLowestFreeSeatAndKeepIt) {
  EXPECT_EQ(registry_->max_workers(), 4);
  auto a = registry_->Join("new-a:5", -1, 11);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, 2);
  // A TF_CONFIG-listed worker beyond the chief's asks for its own index.
  auto b = registry_->Join("new-b:5", 3, 12);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, 3);
  // Joined seats beat like any worker; the same process joining again is
  // the same seat.
  EXPECT_TRUE(registry_->Heartbeat("worker", 2, 11).ok());
  EXPECT_EQ(*registry_->Join("new-a:5", 2, 11), 2);
  auto r = registry_->Get(cluster::TaskType::kWorker, 2);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->joined);
  EXPECT_EQ(r->task.address.ToString(), "new-a:5");
  EXPECT_EQ(registry_->JoinedWorkers(),
            (std::map<int, std::string>{{2, "new-a:5"}, {3, "new-b:5"}}));
  // Every seat taken.
  auto c = registry_->Join("new-c:5", -1, 13);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("4 worker seat(s)"));
  EXPECT_THAT(c.status().message(), HasSubstr("--max_workers"));
  // A TF_CONFIG worker joining at its own address is that worker.
  auto w1 = registry_->Join("w1:1", -1, 14);
  ASSERT_TRUE(w1.ok()) << w1.status();
  EXPECT_EQ(*w1, 1);
  EXPECT_FALSE(registry_->Get(cluster::TaskType::kWorker, 1)->joined);
}

TEST_F(TaskRegistryJoinTest, ADuplicateAddressOfALiveWorkerIsRefusedUntilItIsSilent) {
  ASSERT_TRUE(registry_->Register("worker", 0, 7).ok());
  auto dup = registry_->Join("w0:1", -1, 8);
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(dup.status().message(), HasSubstr("w0:1 is worker:0's, which is in the job"));
  ASSERT_TRUE(registry_->Join("new-a:5", -1, 11).ok());
  EXPECT_EQ(registry_->Join("new-a:5", -1, 12).status().code(), absl::StatusCode::kAlreadyExists);
  // Silent for the heartbeat timeout: a restart at the address takes it.
  clock_.Advance(absl::Seconds(10));
  auto again = registry_->Join("new-a:5", -1, 12);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 2);
  EXPECT_EQ(registry_->Get(cluster::TaskType::kWorker, 2)->registrations, 2);
  EXPECT_EQ(registry_->Heartbeat("worker", 2, 11).code(), absl::StatusCode::kNotFound);
}

TEST_F(TaskRegistryJoinTest, BadJoinsAreRefusedAndChangeNothing) {
  EXPECT_EQ(registry_->Join("0.0.0.0:5", -1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Join("h:0", -1, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Join("no-port", -1, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Join("h:5", -1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Join("h:5", -7, 1).status().code(), absl::StatusCode::kInvalidArgument);
  // worker:1 is another address in TF_CONFIG; worker:9 is beyond the seats.
  auto other = registry_->Join("h:5", 1, 1);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr("worker:1 is w1:1 in the chief's TF_CONFIG"));
  EXPECT_EQ(registry_->Join("h:5", 9, 1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(registry_->size(), 0);
  // A seat is its address's.
  ASSERT_TRUE(registry_->Join("a:5", 2, 1).ok());
  EXPECT_EQ(registry_->Join("b:5", 2, 2).status().code(), absl::StatusCode::kFailedPrecondition);
  // While the chief stops, and after the job: nothing to join.
  registry_->CloseJoins("the chief is stopping (SIGTERM)");
  EXPECT_THAT(registry_->Join("c:5", -1, 3).status().message(), HasSubstr("the chief is stopping"));
  registry_->Close("the job has ended");
  auto late = registry_->Join("c:5", -1, 3);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(late.status().message(), HasSubstr("the job has ended"));
  EXPECT_EQ(registry_->size(), 1);
}

TEST_F(TaskRegistryJoinTest, ALeaveIsPendingUntilTheChiefAnswersIt) {
  ASSERT_TRUE(registry_->Register("worker", 1, 7).ok());
  EXPECT_FALSE(registry_->Leaving(1));
  EXPECT_EQ(registry_->Leave("worker", 1, 8).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*registry_->Leave("worker", 1, 7), false);
  EXPECT_TRUE(registry_->Leaving(1));
  registry_->AnswerLeave(1, absl::OkStatus());
  EXPECT_FALSE(registry_->Leaving(1));
  EXPECT_EQ(*registry_->Leave("worker", 1, 7), true);
  // A refusal is the answer.
  ASSERT_TRUE(registry_->Register("worker", 0, 3).ok());
  EXPECT_EQ(*registry_->Leave("worker", 0, 3), false);
  registry_->AnswerLeave(0, absl::FailedPreconditionError("the job's last worker"));
  EXPECT_EQ(registry_->Leave("worker", 0, 3).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A restart is a new worker: no leave of it.
  ASSERT_TRUE(registry_->Register("worker", 1, 9).ok());
  EXPECT_FALSE(registry_->Get(cluster::TaskType::kWorker, 1)->left.has_value());
  // A stopping chief still answers leaves as units end; once the job
  // ended every leave is done.
  registry_->CloseJoins("the chief is stopping (SIGTERM)");
  EXPECT_EQ(*registry_->Leave("worker", 1, 9), false);
  registry_->Close("the job has ended");
  EXPECT_EQ(*registry_->Leave("worker", 1, 9), true);
}

// A seat whose worker left drained is free for another address; a seat of
// a worker that did not leave stays its address's.
TEST_F(TaskRegistryJoinTest, ASeatLeftDrainedIsFreeAgain) {
  ASSERT_EQ(*registry_->Join("a:5", -1, 1), 2);
  ASSERT_EQ(*registry_->Join("b:5", -1, 2), 3);
  EXPECT_EQ(registry_->Join("c:5", -1, 3).status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_EQ(*registry_->Leave("worker", 2, 1), false);
  EXPECT_EQ(registry_->Join("c:5", -1, 3).status().code(), absl::StatusCode::kResourceExhausted);
  registry_->AnswerLeave(2, absl::OkStatus());
  auto c = registry_->Join("c:5", -1, 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, 2);
  auto r = registry_->Get(cluster::TaskType::kWorker, 2);
  EXPECT_EQ(r->task.address.ToString(), "c:5");
  EXPECT_FALSE(r->left.has_value());
  EXPECT_EQ(registry_->JoinedWorkers(), (std::map<int, std::string>{{2, "c:5"}, {3, "b:5"}}));
}

}  // namespace
}  // namespace chief
}  // namespace psc
