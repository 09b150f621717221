#include "ps_server/ssp_clocks.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_server {
namespace {

TEST(SspClocksTest, TheLeaderWaitsForTheSlowestLiveWorker) {
  SspClocks clocks;
  clocks.Reset(/*staleness=*/1, {true, true});
  EXPECT_TRUE(clocks.MayRead(1));
  EXPECT_FALSE(clocks.MayRead(2));
  clocks.Advance(1, 1);
  EXPECT_FALSE(clocks.MayRead(2)) << "worker 0 is still at 0";
  clocks.Advance(0, 1);
  EXPECT_TRUE(clocks.MayRead(2));
  clocks.Advance(0, 0);
  EXPECT_EQ(clocks.clocks()[0], 1) << "clocks never go back";
}

TEST(SspClocksTest, ALostWorkerLeavesTheMinimum) {
  SspClocks clocks;
  clocks.Reset(0, {true, true});
  clocks.Advance(0, 5);
  EXPECT_FALSE(clocks.MayRead(5));
  clocks.SetLive({true, false});
  EXPECT_TRUE(clocks.MayRead(5));
  clocks.SetLive({false, false});
  EXPECT_TRUE(clocks.MayRead(100)) << "no live worker to wait for";
  EXPECT_THAT(clocks.WhyWaiting(0, 7), ::testing::HasSubstr("worker 0 at clock 7"));
}

TEST(SspClocksTest, ClocksComeBackFromACheckpoint) {
  SspClocks clocks;
  clocks.Reset(2, {true, true, true});
  clocks.set_clocks({4, 6, 5});
  EXPECT_TRUE(clocks.MayRead(6));
  EXPECT_FALSE(clocks.MayRead(7));
  clocks.Advance(7, 9);  // out of range: ignored
  EXPECT_EQ(clocks.clocks(), (std::vector<int64_t>{4, 6, 5}));
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
