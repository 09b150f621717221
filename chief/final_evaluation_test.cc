#include "chief/final_evaluation.h"

#include <optional>

#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

class FinalEvaluationTest : public ::testing::Test {
 protected:
  void Use(const char* tf_config) {
    auto c = cluster::ClusterConfig::Parse(tf_config);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_.emplace(*std::move(c));
    registry_.emplace(&*cluster_, &clock_);
  }
  base::FakeClock clock_;
  std::optional<cluster::ClusterConfig> cluster_;
  std::optional<TaskRegistry> registry_;
};

constexpr char kNoEvaluator[] =
    R"({"cluster": {"chief": ["c:1"], "worker": ["w0:1"]}, "task": {"type": "chief"}})";
constexpr char kWithEvaluator[] =
    R"({"cluster": {"chief": ["c:1"], "worker": ["w0:1"], "evaluator": ["e:1"]},
        "task": {"type": "chief"}})";

TEST_F(FinalEvaluationTest, NoEvaluatorIsNoWait) {
  Use(kNoEvaluator);
  const absl::Time start = clock_.Now();
  EXPECT_TRUE(WaitForFinalEvaluation("chief", *registry_, 60, absl::Minutes(5), &clock_));
  EXPECT_EQ(clock_.Now(), start);
}

TEST_F(FinalEvaluationTest, AListedEvaluatorThatNeverReportsIsWaitedForUpToTheLimit) {
  Use(kWithEvaluator);
  const absl::Time start = clock_.Now();
  EXPECT_FALSE(WaitForFinalEvaluation("chief", *registry_, 60, absl::Seconds(30), &clock_));
  EXPECT_EQ(clock_.Now(), start + absl::Seconds(30));
  EXPECT_TRUE(WaitForFinalEvaluation("chief", *registry_, 60, absl::ZeroDuration(), &clock_))
      << "--evaluator_wait=0: nothing to wait for";
}

TEST_F(FinalEvaluationTest, AnAnnouncedEvaluatorIsWaitedForAndItsFinalReportEndsTheWait) {
  Use(kNoEvaluator);
  ASSERT_TRUE(registry_->Register("evaluator", 0, 3).ok());
  ASSERT_TRUE(registry_->RecordEvaluation("evaluator", 0, 40).ok());
  const absl::Time start = clock_.Now();
  EXPECT_FALSE(WaitForFinalEvaluation("chief", *registry_, 60, absl::Seconds(10), &clock_))
      << "step 40 is not the final 60";
  EXPECT_EQ(clock_.Now(), start + absl::Seconds(10));
  ASSERT_TRUE(registry_->RecordEvaluation("evaluator", 0, 60).ok());
  const absl::Time later = clock_.Now();
  EXPECT_TRUE(WaitForFinalEvaluation("chief", *registry_, 60, absl::Seconds(10), &clock_));
  EXPECT_EQ(clock_.Now(), later) << "already evaluated: no wait";
}

}  // namespace
}  // namespace chief
}  // namespace psc
