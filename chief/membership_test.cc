#include "chief/membership.h"

#include "chief/testing/fakes.h"
#include "common/cluster/cluster_config.h"
#include "common/job/record_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

using ::testing::ElementsAre;
using testing::FakeWorkerClient;
using ::testing::HasSubstr;
using testing::RecordingParameterClient;

cluster::ClusterConfig ThreeWorkers() {
  auto c = cluster::ClusterConfig::Parse(
      R"({"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
          "worker": ["127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"]},
          "task": {"type": "chief", "index": 0}})");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

class MembershipTest : public ::testing::Test {
 protected:
  MembershipTest() : cluster_(ThreeWorkers()), registry_(&cluster_, &clock_) {}

  std::unique_ptr<Membership> Make(proto::TrainingMode mode, absl::Duration timeout) {
    MembershipOptions o;
    o.mode = mode;
    o.num_workers = 3;
    o.heartbeat_timeout = timeout;
    return std::make_unique<Membership>(o, &servers_, &workers_, &registry_, &clock_);
  }

  base::FakeClock clock_;
  cluster::ClusterConfig cluster_;
  TaskRegistry registry_;
  RecordingParameterClient servers_{2};
  FakeWorkerClient workers_{3};
};

TEST_F(MembershipTest, AFailedUnitOfAWorkerThatAnswersIsTheServersFailure) {
  auto m = Make(proto::MODE_SYNC, absl::ZeroDuration());
  EXPECT_TRUE(m->JudgeFailedUnit(1, absl::UnavailableError("ps:0 went away")).ok());
  EXPECT_THAT(m->live(), ElementsAre(0, 1, 2));
  EXPECT_EQ(m->workers_lost(), 0);
  EXPECT_TRUE(servers_.updates().empty());
}

TEST_F(MembershipTest, AFailedUnitOfAWorkerThatDoesNotAnswerIsALossToldToEveryShard) {
  auto m = Make(proto::MODE_SYNC, absl::ZeroDuration());
  workers_.Kill(1);
  absl::Status verdict = m->JudgeFailedUnit(1, absl::UnavailableError("connection reset"));
  EXPECT_EQ(verdict.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(verdict.message(), HasSubstr("worker:1 is lost: its unit failed"));
  EXPECT_TRUE(m->lost(1));
  EXPECT_THAT(m->live(), ElementsAre(0, 2));
  EXPECT_EQ(m->workers_lost(), 1);
  const auto updates = servers_.updates();
  ASSERT_EQ(updates.size(), 2u) << "both shards, at once";
  for (const auto& [shard, u] : updates) {
    EXPECT_EQ(u.replicas_to_aggregate(), 2);
    EXPECT_THAT(u.live_workers(), ElementsAre(0, 2));
    EXPECT_EQ(u.partial(), proto::UpdateMembershipRequest::COMPLETE);
  }
  // Judged again (its redo failed too, say): still one loss.
  EXPECT_FALSE(m->JudgeFailedUnit(1, absl::UnavailableError("again")).ok());
  EXPECT_EQ(m->workers_lost(), 1);
}

// Backup workers (R = 2 of 3): a loss uses up the backup first; only a
// second one lowers R.
TEST_F(MembershipTest, WithBackupWorkersALossKeepsRWhileEnoughAreLive) {
  MembershipOptions o;
  o.mode = proto::MODE_SYNC;
  o.num_workers = 3;
  o.replicas_to_aggregate = 2;
  Membership m(o, &servers_, &workers_, &registry_, &clock_);
  workers_.Kill(2);
  EXPECT_FALSE(m.JudgeFailedUnit(2, absl::UnavailableError("gone")).ok());
  workers_.Kill(0);
  EXPECT_FALSE(m.JudgeFailedUnit(0, absl::UnavailableError("gone")).ok());
  const auto updates = servers_.updates();
  ASSERT_EQ(updates.size(), 4u);  // two shards, two losses
  EXPECT_EQ(updates[0].second.replicas_to_aggregate(), 2);
  EXPECT_EQ(updates[1].second.replicas_to_aggregate(), 2);
  EXPECT_EQ(updates[2].second.replicas_to_aggregate(), 1);
  EXPECT_EQ(updates[3].second.replicas_to_aggregate(), 1);
}

TEST_F(MembershipTest, AsyncTellsTheLiveSetButNotAReplicaCount) {
  auto m = Make(proto::MODE_ASYNC, absl::ZeroDuration());
  workers_.Kill(0);
  EXPECT_FALSE(m->JudgeFailedUnit(0, absl::UnavailableError("gone")).ok());
  const auto updates = servers_.updates();
  ASSERT_FALSE(updates.empty());
  EXPECT_EQ(updates[0].second.replicas_to_aggregate(), 0);
  EXPECT_THAT(updates[0].second.live_workers(), ElementsAre(1, 2));
}

TEST_F(MembershipTest, AWorkerWhoseHeartbeatsStopIsLost) {
  auto m = Make(proto::MODE_SYNC, absl::Seconds(10));
  ASSERT_TRUE(registry_.Register("worker", 0, 11).ok());
  ASSERT_TRUE(registry_.Register("worker", 1, 12).ok());
  // worker:2 never registered: only its units can tell.
  clock_.Advance(absl::Seconds(6));
  ASSERT_TRUE(registry_.Heartbeat("worker", 0, 11).ok());
  ASSERT_TRUE(registry_.Report("worker", 1, 12, 40, 7, "").ok());
  clock_.Advance(absl::Seconds(6));
  EXPECT_TRUE(m->CheckHeartbeats().empty()) << "both were heard from 6 s ago";
  ASSERT_TRUE(registry_.Heartbeat("worker", 0, 11).ok());
  clock_.Advance(absl::Seconds(5));
  EXPECT_THAT(m->CheckHeartbeats(), ElementsAre(1));
  EXPECT_THAT(m->live(), ElementsAre(0, 2));
  EXPECT_EQ(m->workers_lost(), 1);
  EXPECT_EQ(servers_.updates().size(), 2u);
  EXPECT_TRUE(m->CheckHeartbeats().empty()) << "declared once";
}

TEST_F(MembershipTest, WithoutATimeoutHeartbeatsAreNotWatched) {
  auto m = Make(proto::MODE_SYNC, absl::ZeroDuration());
  ASSERT_TRUE(registry_.Register("worker", 0, 11).ok());
  clock_.Advance(absl::Hours(1));
  EXPECT_TRUE(m->CheckHeartbeats().empty());
}

TEST_F(MembershipTest, TheLastWorkerLostIsNotToldToTheShards) {
  auto m = Make(proto::MODE_SYNC, absl::ZeroDuration());
  for (int w : {0, 1, 2}) {
    workers_.Kill(w);
    EXPECT_FALSE(m->JudgeFailedUnit(w, absl::UnavailableError("gone")).ok());
  }
  EXPECT_TRUE(m->live().empty());
  EXPECT_EQ(m->workers_lost(), 3);
  EXPECT_EQ(servers_.updates().size(), 4u) << "two losses told to two shards; not the third";
}

// Every change is recorded with the step the job was at; a rejoin tells
// the shards the live workers again, and sync's replicas_to_aggregate grows
// back.
TEST_F(MembershipTest, ChangesAreRecordedWithTheirStepAndARejoinGrowsReplicasBack) {
  auto m = Make(proto::MODE_SYNC, absl::ZeroDuration());
  m->set_step(20);
  workers_.Kill(2);
  EXPECT_FALSE(m->JudgeFailedUnit(2, absl::UnavailableError("connection reset")).ok());
  EXPECT_EQ(servers_.updates().back().second.replicas_to_aggregate(), 2);
  EXPECT_EQ(m->Rejoin(0).code(), absl::StatusCode::kFailedPrecondition) << "not lost";
  m->set_step(25);
  ASSERT_TRUE(m->Rejoin(2).ok());
  EXPECT_THAT(m->live(), ElementsAre(0, 1, 2));
  EXPECT_EQ(servers_.updates().back().second.replicas_to_aggregate(), 3);
  EXPECT_THAT(servers_.updates().back().second.live_workers(), ElementsAre(0, 1, 2));
  EXPECT_EQ(m->workers_rejoined(), 1);
  EXPECT_EQ(m->workers_joined(), 1);
  const std::vector<Membership::Change> c = m->changes();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].step, 20);
  EXPECT_EQ(c[0].worker, 2);
  EXPECT_EQ(c[0].change, "lost");
  EXPECT_THAT(c[0].why, HasSubstr("connection reset"));
  EXPECT_EQ(c[1].step, 25);
  EXPECT_EQ(c[1].change, "rejoined");
}

// A lost worker is worth a probe only once it registered or sent a
// heartbeat after its loss; one that never registered always is.
TEST_F(MembershipTest, ALostWorkerMayBeBackOnceHeardFromAfterItsLoss) {
  auto m = Make(proto::MODE_ASYNC, absl::Seconds(10));
  ASSERT_TRUE(registry_.Register("worker", 1, 7).ok());
  clock_.Advance(absl::Seconds(11));
  EXPECT_THAT(m->CheckHeartbeats(), ElementsAre(1));
  EXPECT_FALSE(m->MayBeBack(1)) << "silent since before its loss";
  EXPECT_TRUE(m->MayBeBack(2)) << "never registered: only a probe tells";
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(registry_.Register("worker", 1, 8).ok());  // restarted
  EXPECT_TRUE(m->MayBeBack(1));
  EXPECT_FALSE(m->MayBeBack(5)) << "not a worker of the job";
}

// A worker that answers but cannot open a training file is lost, once per
// file: its units go to the others, and only its restart (a new
// incarnation) may bring it back. The same file missing again, or missing
// for the last live worker, is the job's error (the verdict is OK).
TEST_F(MembershipTest, AWorkerThatCannotOpenATrainingFileIsLostOncePerFile) {
  auto m = Make(proto::MODE_ASYNC, absl::Seconds(10));
  ASSERT_TRUE(registry_.Register("worker", 1, 7).ok());
  const absl::Status missing = absl::NotFoundError(
      absl::StrCat("step 4: ", job::kStreamError, "/data/train-3: no such file"));
  const absl::Status verdict = m->JudgeFailedUnit(1, missing);
  EXPECT_TRUE(absl::IsUnavailable(verdict)) << verdict;
  EXPECT_THAT(verdict.message(), HasSubstr("cannot open a training file (/data/train-3"));
  EXPECT_THAT(m->live(), ElementsAre(0, 2));
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(registry_.Heartbeat("worker", 1, 7).ok());
  EXPECT_FALSE(m->MayBeBack(1)) << "the same incarnation stays out";
  ASSERT_TRUE(registry_.Register("worker", 1, 8).ok());
  EXPECT_TRUE(m->MayBeBack(1)) << "restarted";
  // The same file again: the job's own error.
  EXPECT_TRUE(m->JudgeFailedUnit(2, missing).ok());
  EXPECT_THAT(m->live(), ElementsAre(0, 2));
  // Not a stream error, or not NOT_FOUND: as any failure of a worker that
  // answers.
  EXPECT_TRUE(m->JudgeFailedUnit(2, absl::NotFoundError("ps:0: no such variable")).ok());
  EXPECT_TRUE(
      m->JudgeFailedUnit(2, absl::DataLossError(absl::StrCat(job::kStreamError, "x: bad crc")))
          .ok());
  // Another file, but for the last live worker: the job's error.
  ASSERT_TRUE(
      m->JudgeFailedUnit(0, absl::NotFoundError(absl::StrCat(job::kStreamError, "/data/train-5")))
          .code() == absl::StatusCode::kUnavailable);
  EXPECT_THAT(m->live(), ElementsAre(2));
  EXPECT_TRUE(
      m->JudgeFailedUnit(2, absl::NotFoundError(absl::StrCat(job::kStreamError, "/data/train-6")))
          .ok());
  EXPECT_THAT(m->live(), ElementsAre(2));
  // In sync the job ends naming the file: a lost slot is re-dealt by a new
  // R, or with backups left unread.
  auto sync = Make(proto::MODE_SYNC, absl::Seconds(10));
  EXPECT_TRUE(sync->JudgeFailedUnit(1, missing).ok());
  EXPECT_THAT(sync->live(), ElementsAre(0, 1, 2));
}

}  // namespace
}  // namespace chief
}  // namespace psc
