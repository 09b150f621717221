#include "ps_server/ssp_clocks.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_server {
namespace {

TEST(SspClocksTest, TheLeaderWaitsForTheSlowestLiveWorker) {
  SspClocks clocks;
  clocks.Reset(/*staleness=*/1, {true, true});
  EXPECT_TRUE(clocks.MayRead(7)) << "no worker runs yet";
  clocks.Start(0, 0);
  clocks.Start(1, 0);
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
  clocks.Start(0, 5);
  clocks.Start(1, 5);
  clocks.Advance(1, 6);
  EXPECT_FALSE(clocks.MayRead(6));
  clocks.SetLive({false, true});
  EXPECT_TRUE(clocks.MayRead(6));
  clocks.SetLive({false, false});
  EXPECT_TRUE(clocks.MayRead(100)) << "no live worker to wait for";
  EXPECT_THAT(clocks.WhyWaiting(0, 7), ::testing::HasSubstr("worker 0 at clock 7"));
}

TEST(SspClocksTest, ClocksComeBackFromACheckpoint) {
  SspClocks clocks;
  clocks.Reset(2, {true, true, true});
  clocks.set_clocks({4, 6, 5});
  EXPECT_TRUE(clocks.MayRead(100)) << "restored between units: no worker runs";
  for (int w = 0; w < 3; ++w) clocks.Start(w, clocks.clocks()[w]);
  EXPECT_TRUE(clocks.MayRead(6));
  EXPECT_FALSE(clocks.MayRead(7));
  clocks.Advance(7, 9);  // out of range: ignored
  EXPECT_EQ(clocks.clocks(), (std::vector<int64_t>{4, 6, 5}));
}

// The work queue: a worker that ended its unit holds no one back, and one
// that starts a unit behind its last one is at that unit's step.
TEST(SspClocksTest, OnlyRunningWorkersHoldTheOthersBack) {
  SspClocks clocks;
  clocks.Reset(1, {true, true, true});
  clocks.Start(0, 0);
  clocks.Start(1, 0);
  clocks.Start(2, 0);
  clocks.Advance(0, 4);
  clocks.End(0);  // idle at clock 4
  clocks.Advance(1, 4);
  clocks.End(1);
  EXPECT_TRUE(clocks.MayRead(1));
  EXPECT_FALSE(clocks.MayRead(2)) << "worker 2 runs at 0";
  clocks.Advance(2, 4);
  clocks.End(2);
  EXPECT_TRUE(clocks.MayRead(50)) << "every worker idle";
  clocks.Start(0, 8);  // worker 0's next unit starts further on
  EXPECT_TRUE(clocks.MayRead(9));
  EXPECT_FALSE(clocks.MayRead(10));
  clocks.Start(1, 2);  // worker 1 takes a unit behind: its clock goes back
  EXPECT_EQ(clocks.clocks()[1], 2);
  EXPECT_TRUE(clocks.MayRead(3));
  EXPECT_FALSE(clocks.MayRead(4)) << "worker 1 runs at 2";
  EXPECT_THAT(clocks.WhyWaiting(0, 9), ::testing::HasSubstr("slowest running live worker"));
}

// A worker lost in mid-unit never pushed its unit's end: taken back, it is
// idle (its old clock holds no one) until it starts a unit.
TEST(SspClocksTest, AWorkerTakenBackIsIdleUntilItStartsAUnit) {
  SspClocks clocks;
  clocks.Reset(1, {true, true});
  clocks.Start(0, 10);
  clocks.Start(1, 3);  // lost at 3
  clocks.SetLive({true, false});
  EXPECT_TRUE(clocks.MayRead(11));
  clocks.SetLive({true, true});
  EXPECT_TRUE(clocks.MayRead(11)) << "worker 1 is back but runs nothing yet";
  clocks.Start(1, 12);
  EXPECT_TRUE(clocks.MayRead(11));
  EXPECT_FALSE(clocks.MayRead(12)) << "worker 0 runs at 10";
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
