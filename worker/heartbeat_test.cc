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
  EXPECT_NE(NewIncarnation(), 0u);
}

}  // namespace
}  // namespace worker
}  // namespace psc
