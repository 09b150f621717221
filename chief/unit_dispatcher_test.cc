#include "chief/unit_dispatcher.h"

#include "chief/testing/fakes.h"
#include "common/cluster/cluster_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

using ::testing::ElementsAre;
using testing::FakeWorkerClient;
using testing::RecordingParameterClient;

TEST(MakeUnitTest, EveryLiveWorkerFillsASlotOfTheUnitNamedByItsFirstStep) {
  const Unit unit = MakeUnit("job", 40, 47, {0, 2});
  ASSERT_EQ(unit.num_slots(), 2);
  EXPECT_EQ(unit.num_steps(), 7);
  for (int i = 0; i < 2; ++i) {
    const proto::RunUnitRequest& r = unit.requests[i];
    EXPECT_EQ(r.job_id(), "job");
    EXPECT_EQ(r.unit(), 40);
    EXPECT_EQ(r.first_step(), 40);
    EXPECT_EQ(r.num_steps(), 7);
    EXPECT_EQ(r.replica_slot(), i);
    EXPECT_EQ(r.num_slots(), 2);
    EXPECT_FALSE(r.has_push_as_worker());
  }
  EXPECT_THAT(unit.workers, ElementsAre(0, 2));
}

class UnitDispatcherTest : public ::testing::Test {
 protected:
  UnitDispatcherTest()
      : cluster_(*cluster::ClusterConfig::Parse(
            R"({"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
                "worker": ["127.0.0.1:3", "127.0.0.1:4"]},
                "task": {"type": "chief", "index": 0}})")),
        registry_(&cluster_, &clock_),
        membership_(MembershipOptions{proto::MODE_SYNC, 2, absl::Seconds(10)}, &servers_, &workers_,
                    &registry_, &clock_),
        dispatcher_(&workers_, &membership_, absl::Milliseconds(5)) {}

  base::FakeClock clock_;
  cluster::ClusterConfig cluster_;
  TaskRegistry registry_;
  RecordingParameterClient servers_{1};
  FakeWorkerClient workers_{2};
  Membership membership_;
  UnitDispatcher dispatcher_;
};

TEST_F(UnitDispatcherTest, RunsEverySlotOnItsWorker) {
  const auto results = dispatcher_.Run(MakeUnit("job", 0, 5, {0, 1}));
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->examples(), 5);
  }
  EXPECT_EQ(workers_.calls(1)[0].replica_slot(), 1);
}

TEST_F(UnitDispatcherTest, AFailedSlotOfALiveWorkerCarriesTheServersFailure) {
  workers_.Fail(1, absl::FailedPreconditionError("ps:0 Push: pull again"));
  const auto results = dispatcher_.Run(MakeUnit("job", 0, 5, {0, 1}));
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(membership_.lost(1));
}

TEST_F(UnitDispatcherTest, AHungWorkerIsLostByItsHeartbeatsAndItsCallCancelled) {
  ASSERT_TRUE(registry_.Register("worker", 1, 7).ok());
  workers_.Hang(1);
  clock_.Advance(absl::Seconds(11));  // worker:1 has been silent since it registered
  const auto results = dispatcher_.Run(MakeUnit("job", 0, 5, {0, 1}));
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kUnavailable) << results[1].status();
  EXPECT_TRUE(membership_.lost(1));
  EXPECT_THAT(membership_.live(), ElementsAre(0));
}

// --topk_ratio: residuals go out only where a worker lacks them, an heir
// (a unit given back) gets the lost worker's, and a worker that restarted (holding none) is
// sent them on a second try instead of failing the unit.
TEST_F(UnitDispatcherTest, UnitsBringTheResidualsTheirWorkersLack) {
  workers_.EmulateErrorFeedback();
  ErrorFeedbackBook book;
  ASSERT_TRUE(book.Reset(0, {}).ok());
  dispatcher_.set_error_feedback(&book);
  for (int64_t first : {0, 5}) {
    for (const auto& r : dispatcher_.Run(MakeUnit("job", first, first + 5, {0, 1}))) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_FALSE(r->has_error_feedback()) << "kept in the book";
    }
  }
  EXPECT_TRUE(workers_.calls(1)[0].has_error_feedback()) << "the first unit";
  EXPECT_FALSE(workers_.calls(1)[1].has_error_feedback()) << "it holds them";
  workers_.Restart(1);
  const auto results = dispatcher_.Run(MakeUnit("job", 10, 15, {0, 1}));
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  const auto calls = workers_.calls(1);
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_FALSE(calls[2].has_error_feedback());
  ASSERT_TRUE(calls[3].has_error_feedback());
  EXPECT_EQ(calls[3].error_feedback().step(), 10);
  // Worker 1 lost: worker 0 runs its unit at 15 (given back by the work
  // queue) from worker 1's residuals.
  WorkQueue queue(15, 20, 5, 1);
  Piece piece = *queue.Take(1, [](int) { return false; });
  queue.GiveBack(piece, 1);
  workers_.Kill(1);
  ASSERT_EQ(membership_.JudgeFailedUnit(1, absl::UnavailableError("gone")).code(),
            absl::StatusCode::kUnavailable);
  std::vector<absl::Status> failures;
  ASSERT_TRUE(dispatcher_.RunQueue("job", &queue, {}, &failures).ok());
  const proto::RunUnitRequest redo = workers_.calls(0).back();
  EXPECT_EQ(redo.push_as_worker(), 1);
  ASSERT_TRUE(redo.has_error_feedback());
  EXPECT_EQ(redo.error_feedback().worker(), 1);
  EXPECT_EQ(redo.error_feedback().step(), 15);
}

}  // namespace
}  // namespace chief
}  // namespace psc
