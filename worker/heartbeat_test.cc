#include "worker/heartbeat.h"

#include <deque>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace worker {
namespace {

using ::testing::ElementsAre;

// Records the calls; answers from a script (then OK).
class FakeCoordinator : public CoordinatorClient {
 public:
  std::deque<absl::Status> answers;
  std::vector<std::string> calls;
  std::vector<proto::ReportRequest> reports;
  uint64_t incarnation = 0;

  absl::Status Register(const proto::RegisterRequest& r) override {
    calls.push_back("register");
    incarnation = r.incarnation();
    EXPECT_EQ(r.task().type(), "worker");
    EXPECT_EQ(r.task().index(), 2);
    return Next();
  }
  absl::Status Heartbeat(const proto::HeartbeatRequest& r) override {
    calls.push_back("heartbeat");
    EXPECT_EQ(r.incarnation(), incarnation);
    return Next();
  }
  absl::Status Report(const proto::ReportRequest& r) override {
    calls.push_back("report");
    reports.push_back(r);
    return Next();
  }
  absl::StatusOr<proto::JoinResponse> Join(const proto::JoinRequest& r) override {
    calls.push_back("join");
    joins.push_back(r);
    incarnation = r.incarnation();
    absl::Status s = Next();
    if (!s.ok()) return s;
    proto::JoinResponse out;
    out.set_index(join_index >= 0 ? join_index : r.preferred_index());
    return out;
  }
  absl::StatusOr<proto::LeaveResponse> Leave(const proto::LeaveRequest& r) override {
    calls.push_back("leave");
    EXPECT_EQ(r.task().index(), 2);
    EXPECT_EQ(r.incarnation(), 5u);
    absl::Status s = Next();
    if (!s.ok()) return s;
    proto::LeaveResponse out;
    out.set_drained(leaves_until_drained-- <= 1);
    return out;
  }
  std::vector<proto::JoinRequest> joins;
  int join_index = -1;           // the seat Join gives; -1: the preferred one
  int leaves_until_drained = 1;  // Leave answers drained on this call

 private:
  absl::Status Next() {
    if (answers.empty()) return absl::OkStatus();
    absl::Status s = answers.front();
    answers.pop_front();
    return s;
  }
};

TEST(HeartbeatTest, RegistersThenReportsUnitsAndBeatsWhenIdle) {
  FakeCoordinator chief;
  chief.answers = {absl::UnavailableError("the chief is not up yet")};
  WorkerCore::Progress now;
  Heartbeat h(&chief, 2, 77, absl::Seconds(1), [&] { return now; });
  EXPECT_FALSE(h.Beat().ok());
  EXPECT_TRUE(h.Beat().ok());  // registered
  EXPECT_EQ(chief.incarnation, 77u);
  now = {true, 40, 3, ""};
  EXPECT_TRUE(h.Beat().ok());
  now = {false, 40, 7, "ps:0 Push: gone"};
  EXPECT_TRUE(h.Beat().ok());  // the unit's end, with its error
  EXPECT_TRUE(h.Beat().ok());  // idle
  EXPECT_TRUE(h.Beat().ok());
  EXPECT_THAT(chief.calls,
              ElementsAre("register", "register", "report", "report", "heartbeat", "heartbeat"));
  ASSERT_EQ(chief.reports.size(), 2u);
  EXPECT_EQ(chief.reports[0].unit(), 40);
  EXPECT_EQ(chief.reports[0].steps_done(), 3);
  EXPECT_EQ(chief.reports[1].error(), "ps:0 Push: gone");
}

TEST(HeartbeatTest, AChiefThatForgotTheWorkerGetsANewRegistration) {
  FakeCoordinator chief;
  Heartbeat h(&chief, 2, 5, absl::Seconds(1), [] { return WorkerCore::Progress(); });
  EXPECT_TRUE(h.Beat().ok());  // register
  EXPECT_TRUE(h.Beat().ok());  // report (first idle round)
  chief.answers = {absl::NotFoundError("worker:2 is not registered")};
  EXPECT_FALSE(h.Beat().ok());
  EXPECT_TRUE(h.Beat().ok());
  EXPECT_THAT(chief.calls, ElementsAre("register", "report", "heartbeat", "register"));
}

// A worker that TF_CONFIG lists beyond the chief's workers (a scaled TFJob)
// joins at its own address, asking for its own index, and joins again when
// the chief forgets it.
TEST(HeartbeatTest, AWorkerBeyondTheChiefsTfConfigJoinsAtItsAddress) {
  FakeCoordinator chief;
  absl::Status refusal;
  int forgotten = 0;
  chief.answers = {absl::OutOfRangeError("worker:2 is beyond the chief's TF_CONFIG")};
  Heartbeat h(
      &chief, 2, 5, absl::Seconds(1), [] { return WorkerCore::Progress(); }, "w2:7",
      /*joined=*/false, [&](const absl::Status& s) { refusal = s; }, [&] { ++forgotten; });
  EXPECT_TRUE(h.Beat().ok());  // register: out of range, then join
  EXPECT_TRUE(h.Beat().ok());  // report (first idle round)
  chief.answers = {absl::NotFoundError("worker:2 is not registered")};
  EXPECT_EQ(forgotten, 0);
  EXPECT_FALSE(h.Beat().ok());
  EXPECT_EQ(forgotten, 1);     // the unit it may run is a gone chief's
  EXPECT_TRUE(h.Beat().ok());  // joins again, never registers again
  EXPECT_THAT(chief.calls, ElementsAre("register", "join", "report", "heartbeat", "join"));
  ASSERT_EQ(chief.joins.size(), 2u);
  EXPECT_EQ(chief.joins[0].address(), "w2:7");
  EXPECT_EQ(chief.joins[0].preferred_index(), 2);
  EXPECT_EQ(chief.joins[0].incarnation(), 5u);
  EXPECT_TRUE(refusal.ok());
}

TEST(HeartbeatTest, AFinalRefusalOfAJoinIsHandedOnAndAnUnansweredOneIsTriedAgain) {
  FakeCoordinator chief;
  std::vector<absl::Status> refusals;
  Heartbeat h(
      &chief, 2, 5, absl::Seconds(1), [] { return WorkerCore::Progress(); }, "w2:7",
      /*joined=*/true, [&](const absl::Status& s) { refusals.push_back(s); });
  chief.answers = {absl::UnavailableError("chief down"),
                   absl::AlreadyExistsError("w2:7 is worker:2's, which is in the job"),
                   absl::ResourceExhaustedError("the job's 2 worker seat(s) are taken")};
  EXPECT_FALSE(h.Beat().ok());
  // Its address in use: itself before a restart, tried again.
  EXPECT_EQ(h.Beat().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(refusals.empty());
  EXPECT_EQ(h.Beat().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_EQ(refusals.size(), 1u);
  // A seat other than its own is refused too: its index is fixed.
  chief.join_index = 3;
  EXPECT_EQ(h.Beat().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refusals.size(), 2u);
  EXPECT_THAT(chief.calls, ElementsAre("join", "join", "join", "join"));
}

TEST(HeartbeatTest, TheThreadBeatsUntilStopped) {
  FakeCoordinator chief;  // touched by the thread only until Stop returns
  {
    Heartbeat h(&chief, 2, 5, absl::Milliseconds(1), [] { return WorkerCore::Progress(); });
    h.Start();
    absl::SleepFor(absl::Milliseconds(50));  // not a wait for an event: lets it beat a few times
    h.Stop();
  }
  EXPECT_GE(chief.calls.size(), 3u);
  EXPECT_EQ(chief.calls[0], "register");
}

}  // namespace
}  // namespace worker
}  // namespace psc
