// The dynamic loss scale against Keras 3's LossScaleOptimizer rules, and
// the worker's unscaling.
#include "common/optimizer/loss_scale.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace optimizer {
namespace {

using ::testing::HasSubstr;

proto::LossScaleConfig Config(double initial, int64_t growth) {
  proto::LossScaleConfig c;
  c.set_initial_scale(initial);
  c.set_growth_steps(growth);
  return c;
}

TEST(LossScaleTest, KerasDefaults) {
  const proto::LossScaleConfig c = KerasLossScale();
  EXPECT_EQ(c.initial_scale(), 32768.0);
  EXPECT_EQ(c.growth_steps(), 2000);
  EXPECT_TRUE(CheckLossScaleConfig(c).ok());
}

TEST(LossScaleTest, FollowsKerasOverAMixedSequence) {
  // Keras's rule, step by step: an overflow halves and resets the counter;
  // a finite step doubles when the counter is at growth - 1 (then 0),
  // else counts.
  LossScale s(Config(1024, 3));
  const bool verdicts[] = {true,  true, true, true, false, true, true, false,
                           false, true, true, true, true,  true, true, true};
  double scale = 1024;
  int64_t counter = 0, skipped = 0;
  for (bool finite : verdicts) {
    s.Update(finite);
    if (!finite) {
      scale /= 2;
      counter = 0;
      ++skipped;
    } else if (counter == 2) {
      scale *= 2;
      counter = 0;
    } else {
      ++counter;
    }
    ASSERT_EQ(s.scale(), scale);
    ASSERT_EQ(s.State().good_steps(), counter);
    ASSERT_EQ(s.State().skipped_steps(), skipped);
  }
  // 3 finite steps doubled to 2048, the overflow halved to 1024, two
  // finite steps, two overflows to 256, three finite to 512, three to 1024,
  // one counted.
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.State().good_steps(), 1);
  EXPECT_EQ(s.State().skipped_steps(), 3);
}

TEST(LossScaleTest, GrowthOfOneDoublesEveryFiniteStep) {
  LossScale s(Config(1, 1));
  for (int i = 0; i < 5; ++i) s.Update(true);
  EXPECT_EQ(s.scale(), 32.0f);
  EXPECT_EQ(s.State().good_steps(), 0);
}

TEST(LossScaleTest, NeverDoublesToInfinity) {
  LossScale s(Config(std::ldexp(1.0, 126), 1));
  s.Update(true);
  EXPECT_EQ(s.scale(), std::ldexp(1.0f, 127));
  s.Update(true);
  EXPECT_EQ(s.scale(), std::ldexp(1.0f, 127)) << "stays at 2^127, where Keras's goes to inf";
  EXPECT_EQ(s.State().good_steps(), 0);
  s.Update(false);
  EXPECT_EQ(s.scale(), std::ldexp(1.0f, 126));
}

TEST(LossScaleTest, NeverHalvesBelowTheSmallestNormalFloat) {
  LossScale s(Config(std::ldexp(1.0, -125), 2));
  s.Update(false);
  EXPECT_EQ(s.scale(), kMinLossScale);
  s.Update(false);
  EXPECT_EQ(s.scale(), kMinLossScale) << "Keras's would go on to 0 and never recover";
  EXPECT_EQ(s.State().skipped_steps(), 2);
  LossScale restored(Config(1, 2));
  EXPECT_TRUE(restored.Restore(s.State(), "ckpt").ok()) << "every state Update makes restores";
}

TEST(LossScaleTest, AVerdictOnAScaleNoLongerCurrentChangesNothing) {
  // Async: two workers computed at 1024; the first overflow halves it, the
  // second (computed at 1024 too) must not halve it again.
  LossScale s(Config(1024, 2));
  s.Update(false, 1024);
  EXPECT_EQ(s.scale(), 512.0f);
  s.Update(false, 1024);
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.State().skipped_steps(), 2) << "both skipped, one halving";
  // A finite step at 1024 says nothing about 512... nor toward doubling.
  s.Update(true, 1024);
  EXPECT_EQ(s.State().good_steps(), 0);
  // At the current scale, or a lower one, or unsaid (0): counted.
  s.Update(true, 512);
  s.Update(true, 256);
  EXPECT_EQ(s.scale(), 1024.0f) << "two finite steps at or below 512 doubled it";
  s.Update(false);
  EXPECT_EQ(s.scale(), 512.0f);
}

TEST(LossScaleTest, RefusesBadConfigs) {
  for (double bad :
       {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity(), 1e39, 1e-39}) {
    const absl::Status st = CheckLossScaleConfig(Config(bad, 2000));
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << bad;
    EXPECT_THAT(std::string(st.message()), HasSubstr("initial loss scale"));
  }
  for (int64_t bad : {int64_t{0}, int64_t{-3}, (int64_t{1} << 40) + 1}) {
    const absl::Status st = CheckLossScaleConfig(Config(2, bad));
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << bad;
    EXPECT_THAT(std::string(st.message()), HasSubstr("growth steps"));
  }
}

TEST(LossScaleTest, RestoresItsStateAndRefusesDamagedOnes) {
  LossScale a(Config(256, 10));
  a.Update(true);
  a.Update(false);
  a.Update(true);
  a.Update(true);
  LossScale b(Config(256, 10));
  ASSERT_TRUE(b.Restore(a.State(), "ckpt").ok());
  EXPECT_EQ(b.scale(), 128.0f);
  EXPECT_EQ(b.State().good_steps(), 2);
  EXPECT_EQ(b.State().skipped_steps(), 1);

  proto::LossScaleState bad = a.State();
  bad.set_scale(0);
  EXPECT_TRUE(absl::IsDataLoss(b.Restore(bad, "ckpt")));
  bad.set_scale(0.1);  // no float32
  EXPECT_TRUE(absl::IsDataLoss(b.Restore(bad, "ckpt")));
  bad.set_scale(1e-39);  // below kMinLossScale: no state Update makes
  EXPECT_TRUE(absl::IsDataLoss(b.Restore(bad, "ckpt")));
  bad = a.State();
  bad.set_good_steps(-1);
  const absl::Status st = b.Restore(bad, "ckpt-7");
  EXPECT_TRUE(absl::IsDataLoss(st));
  EXPECT_THAT(std::string(st.message()), HasSubstr("ckpt-7"));
  bad = a.State();
  bad.set_skipped_steps(-1);
  EXPECT_TRUE(absl::IsDataLoss(b.Restore(bad, "ckpt")));
  // Unchanged by the refusals.
  EXPECT_EQ(b.scale(), 128.0f);
  EXPECT_EQ(b.State().good_steps(), 2);
  // A job resumed with fewer growth steps than its checkpoint counted:
  // the next finite step doubles.
  LossScale fewer(Config(256, 2));
  ASSERT_TRUE(fewer.Restore(a.State(), "ckpt").ok());
  EXPECT_EQ(fewer.State().good_steps(), 1);
  fewer.Update(true);
  EXPECT_EQ(fewer.scale(), 256.0f);
}

TEST(LossScaleTest, UnscalesTheTrainableGradientsOnly) {
  std::vector<std::vector<float>> g = {{1024.0f, -3.0f}, {0.5f, 7.0f}, {96.0f}};
  // The second is a moving average's statistic: not a gradient of the loss.
  ASSERT_TRUE(UnscaleGradients(32.0f, {true, false, true}, &g));
  EXPECT_EQ(g[0], (std::vector<float>{32.0f, -3.0f / 32.0f}));
  EXPECT_EQ(g[1], (std::vector<float>{0.5f, 7.0f}));
  EXPECT_EQ(g[2], (std::vector<float>{3.0f}));
}

TEST(LossScaleTest, AnOverflowAnywhereZeroesTheWholeGradient) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {inf, -inf, std::nanf("")}) {
    std::vector<std::vector<float>> g = {{1.0f, 2.0f}, {3.0f, bad, 4.0f}};
    EXPECT_FALSE(UnscaleGradients(2.0f, {true, true}, &g)) << bad;
    EXPECT_EQ(g[0], (std::vector<float>{0.0f, 0.0f}));
    EXPECT_EQ(g[1], (std::vector<float>{0.0f, 0.0f, 0.0f}));
  }
  // Not finite in a moving average's statistic counts too.
  std::vector<std::vector<float>> g = {{1.0f}, {std::nanf("")}};
  EXPECT_FALSE(UnscaleGradients(2.0f, {true, false}, &g));
  // A scale below 1 that makes a finite gradient overflow.
  std::vector<std::vector<float>> big = {{3e38f}};
  EXPECT_FALSE(UnscaleGradients(0.5f, {true}, &big));
  EXPECT_EQ(big[0][0], 0.0f);
}

}  // namespace
}  // namespace optimizer
}  // namespace psc
