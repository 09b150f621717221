#include "chief/unit_failure.h"

#include "absl/strings/str_cat.h"
#include "common/job/record_stream.h"
#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

TEST(UnitFailureTest, ARefusedPushIsTheJobsOwnARestartedServerIsNot) {
  const absl::Status refused = absl::InvalidArgumentError("non-finite value");
  const absl::Status doomed = absl::FailedPreconditionError("sync step 3 cannot complete");
  const absl::Status restarted = absl::FailedPreconditionError("the shard is not configured yet");
  const absl::Status busy = absl::FailedPreconditionError("a unit is already running");
  const absl::Status lost = absl::UnavailableError("ps:0 is down");
  // The step a refusal doomed comes with the refusal itself: the job's
  // error is the INVALID_ARGUMENT, whichever arrived first.
  EXPECT_EQ(JobErrorOf({doomed, refused, lost}), refused);
  EXPECT_EQ(JobErrorOf({refused}), refused);
  // FAILED_PRECONDITION and the rest are recovered from.
  for (const absl::Status& s : {doomed, restarted, busy, lost}) {
    EXPECT_TRUE(JobErrorOf({s}).ok()) << s;
  }
  EXPECT_TRUE(JobErrorOf({}).ok());
}

// A worker that cannot read its streamed files ends the job: a redo from a
// checkpoint would meet the same missing or changed file.
TEST(UnitFailureTest, AStreamedFileAWorkerCannotReadIsTheJobsOwn) {
  const absl::Status missing =
      absl::NotFoundError(absl::StrCat("worker:1 (127.0.0.1:5) RunUnit: ", job::kStreamError,
                                       "/data/part-3.tfrecord: no such file"));
  const absl::Status lost = absl::UnavailableError("ps:0 is down");
  EXPECT_EQ(JobErrorOf({lost, missing}), missing);
  EXPECT_TRUE(JobErrorOf({absl::NotFoundError("/data/part-3.tfrecord")}).ok());
}

TEST(UnitFailureTest, TheFirstStatusThatIsNotACancellationIsKept) {
  const absl::Status cancelled = absl::CancelledError("unit cancelled");
  const absl::Status refused = absl::InvalidArgumentError("refused");
  const absl::Status timeout = absl::DeadlineExceededError("timeout");
  EXPECT_EQ(MoreInformative(refused, timeout), refused);
  EXPECT_EQ(MoreInformative(cancelled, refused), refused);
  EXPECT_EQ(MoreInformative(absl::OkStatus(), refused), refused);
  EXPECT_EQ(MoreInformative(cancelled, absl::OkStatus()), cancelled);
}

}  // namespace
}  // namespace chief
}  // namespace psc
