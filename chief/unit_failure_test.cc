#include "chief/unit_failure.h"

#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

TEST(UnitFailureTest, ARefusedPushIsTheJobsOwnAServerThatRestartedIsNot) {
  const absl::Status refused = absl::InvalidArgumentError("non-finite value");
  const absl::Status doomed = absl::FailedPreconditionError("sync step 3 cannot complete");
  const absl::Status lost = absl::UnavailableError("ps:0 is down");
  EXPECT_EQ(ClassifyUnitFailure(refused, true, false), UnitFailure::kJob);
  EXPECT_EQ(ClassifyUnitFailure(refused, false, false), UnitFailure::kJob);
  EXPECT_EQ(ClassifyUnitFailure(refused, true, true), UnitFailure::kJob);
  EXPECT_EQ(ClassifyUnitFailure(doomed, true, false), UnitFailure::kJob);
  // "the shard is not configured yet": a restarted server.
  EXPECT_EQ(ClassifyUnitFailure(doomed, false, false), UnitFailure::kServers);
  EXPECT_EQ(ClassifyUnitFailure(doomed, true, true), UnitFailure::kServers);
  EXPECT_EQ(ClassifyUnitFailure(lost, true, false), UnitFailure::kServers);
  EXPECT_EQ(ClassifyUnitFailure(absl::DeadlineExceededError("x"), true, false),
            UnitFailure::kServers);
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
