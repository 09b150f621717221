#include "worker/drain.h"

#include <deque>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace worker {
namespace {

using ::testing::HasSubstr;

// Leave answers from a script: a status, or pending / drained.
class LeaveScript : public CoordinatorClient {
 public:
  std::deque<absl::StatusOr<bool>> answers;  // drained?
  int calls = 0;

  absl::Status Register(const proto::RegisterRequest&) override { return absl::OkStatus(); }
  absl::Status Heartbeat(const proto::HeartbeatRequest&) override { return absl::OkStatus(); }
  absl::Status Report(const proto::ReportRequest&) override { return absl::OkStatus(); }
  absl::StatusOr<proto::JoinResponse> Join(const proto::JoinRequest&) override {
    return absl::UnimplementedError("no join here");
  }
  absl::StatusOr<proto::LeaveResponse> Leave(const proto::LeaveRequest& r) override {
    ++calls;
    EXPECT_EQ(r.task().type(), "worker");
    EXPECT_EQ(r.task().index(), 3);
    EXPECT_EQ(r.incarnation(), 9u);
    absl::StatusOr<bool> a = answers.empty() ? absl::StatusOr<bool>(false) : answers.front();
    if (!answers.empty()) answers.pop_front();
    if (!a.ok()) return a.status();
    proto::LeaveResponse out;
    out.set_drained(*a);
    return out;
  }
};

TEST(DrainTest, PollsUntilTheChiefTookTheWorkerOut) {
  LeaveScript chief;
  chief.answers = {false, absl::UnavailableError("a blip"), false, true};
  base::FakeClock clock;
  EXPECT_TRUE(Drain(&chief, 3, 9, DrainOptions(), &clock).ok());
  EXPECT_EQ(chief.calls, 4);
  EXPECT_EQ(clock.Now(), absl::UnixEpoch() + absl::Milliseconds(600));  // 3 polls of 200 ms
}

TEST(DrainTest, TheChiefsRefusalEndsItAtOnce) {
  LeaveScript chief;
  chief.answers = {false, absl::FailedPreconditionError("worker:3 is the job's last worker")};
  base::FakeClock clock;
  absl::Status s = Drain(&chief, 3, 9, DrainOptions(), &clock);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("last worker"));
  EXPECT_EQ(chief.calls, 2);
}

TEST(DrainTest, AGoneChiefOrAnUnknownWorkerEndsItAtOnce) {
  LeaveScript chief;
  base::FakeClock clock;
  chief.answers = {absl::NotFoundError("worker:3 incarnation 9 is not registered")};
  EXPECT_EQ(Drain(&chief, 3, 9, DrainOptions(), &clock).code(), absl::StatusCode::kNotFound);
  chief.calls = 0;
  for (int i = 0; i < 10; ++i) chief.answers.push_back(absl::UnavailableError("refused"));
  EXPECT_EQ(Drain(&chief, 3, 9, DrainOptions(), &clock).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(chief.calls, DrainOptions().max_unanswered);
}

TEST(DrainTest, AUnitThatDoesNotEndInTimeIsADeadline) {
  LeaveScript chief;  // pending forever
  base::FakeClock clock;
  DrainOptions options;
  options.timeout = absl::Seconds(2);
  absl::Status s = Drain(&chief, 3, 9, options, &clock);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("--drain_timeout=2s"));
  EXPECT_EQ(chief.calls, 11);  // at 0, 0.2, ..., 2.0 s
}

}  // namespace
}  // namespace worker
}  // namespace psc
