#include "worker/divergence.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace worker {
namespace {

using ::testing::HasSubstr;

TEST(DivergenceTest, AFiniteStepHasNoReport) {
  EXPECT_EQ(NonFiniteReport(1.5, {{1, 2}, {3}}, {{"a", {2}}, {"b", {1}}}), "");
}

TEST(DivergenceTest, TheReportNamesTheLossTheFirstVariableAndTheElement) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(NonFiniteReport(NAN, {{1, 2}, {3, NAN}, {-inf}}, {{"a", {2}}, {"b", {2}}, {"c", {1}}}),
            "the loss is nan; the gradient of 'b' is nan at element 1 (and 1 more variables)");
  EXPECT_EQ(NonFiniteReport(0.5, {{1, -inf}}, {{"dense/kernel", {2}}}),
            "the gradient of 'dense/kernel' is -inf at element 1");
  EXPECT_EQ(NonFiniteReport(INFINITY, {{1}}, {{"a", {1}}}), "the loss is inf");
}

TEST(DivergenceTest, TheErrorIsADeterministicJobErrorNamingWorkerStepAndCause) {
  const absl::Status s =
      DivergedError(1, 37, "the loss is nan", 10.0, absl::InvalidArgumentError("ps:0 refused it"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("worker:1, step 37: the loss is nan"));
  EXPECT_THAT(s.message(), HasSubstr("lower the learning rate, now 10"));
  EXPECT_THAT(s.message(), HasSubstr("TerminateOnNaN"));
  EXPECT_THAT(s.message(), HasSubstr("The servers: ps:0 refused it"));
}

}  // namespace
}  // namespace worker
}  // namespace psc
