#include "ps_server/step_refusals.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

TEST(StepRefusalsTest, AStepThatCannotGatherItsReplicasIsBlockedNamingTheFirstRefusal) {
  StepRefusals r;
  EXPECT_TRUE(r.Blocked(3, 2, 2).ok());
  r.Refuse(3, 1, absl::InvalidArgumentError("'dense/kernel' non-finite value at element 7"));
  const absl::Status s = r.Blocked(3, 2, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("sync step 3 cannot complete: worker:1's gradient was "
                                     "refused ('dense/kernel' non-finite value at element 7)"));
  // Another step is not blocked by it.
  EXPECT_TRUE(r.Blocked(4, 2, 2).ok());
  // A second refusal keeps the first's status.
  r.Refuse(3, 0, absl::InvalidArgumentError("later"));
  EXPECT_THAT(r.Blocked(3, 2, 2).message(), HasSubstr("worker:1's gradient"));
  EXPECT_THAT(r.Blocked(3, 2, 2).message(), HasSubstr("and 1 more"));
  // A refusal of the next step forgets the old one.
  r.Refuse(4, 0, absl::InvalidArgumentError("x"));
  EXPECT_TRUE(r.Blocked(3, 2, 2).ok());
  EXPECT_FALSE(r.Blocked(4, 2, 2).ok());
  r.Clear();
  EXPECT_TRUE(r.Blocked(4, 2, 2).ok());
}

TEST(StepRefusalsTest, BackupWorkersLetTheStepCompleteWithoutTheRefusedOne) {
  StepRefusals r;
  r.Refuse(0, 2, absl::InvalidArgumentError("nan"));
  EXPECT_TRUE(r.Blocked(0, /*replicas=*/2, /*live=*/3).ok());
  r.Refuse(0, 1, absl::InvalidArgumentError("nan"));
  EXPECT_FALSE(r.Blocked(0, 2, 3).ok());
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
