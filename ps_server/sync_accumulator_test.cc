#include "ps_server/sync_accumulator.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_server {
namespace {

proto::PushId Id(int worker, int slot) {
  proto::PushId id;
  id.set_worker(worker);
  id.set_replica_slot(slot);
  return id;
}

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Adds one gradient of one variable.
SyncAccumulator::Verdict Add(SyncAccumulator* acc, int worker, int slot, int64_t version,
                             const std::vector<float>& g, SyncAccumulator::Step* step) {
  const std::string bytes = Bytes(g);
  const absl::string_view views[] = {bytes};
  return acc->Add(Id(worker, slot), version, views, step);
}

std::vector<float> Mean(const SyncAccumulator::Step& step, int64_t n) {
  std::vector<float> out(n, -1.0f);
  step.Mean(0, n, out.data());
  return out;
}

TEST(SyncAccumulatorTest, CompletesAtReplicasToAggregateAndCountsTowardTheNextStep) {
  SyncAccumulator acc(2);
  SyncAccumulator::Step step;
  EXPECT_EQ(Add(&acc, 0, 0, 0, {1, 2}, &step), SyncAccumulator::Verdict::kAccumulated);
  EXPECT_EQ(acc.pending(), 1);
  EXPECT_EQ(Add(&acc, 1, 1, 0, {3, 6}, &step), SyncAccumulator::Verdict::kComplete);
  EXPECT_EQ(step.size(), 2);
  EXPECT_EQ(Mean(step, 2), (std::vector<float>{2, 4}));
  EXPECT_EQ(acc.step(), 1);
  EXPECT_EQ(acc.pending(), 0);
  // A backup's late gradient of step 0 is stale now.
  EXPECT_EQ(Add(&acc, 2, 0, 0, {9, 9}, &step), SyncAccumulator::Verdict::kStale);
  EXPECT_EQ(acc.pending(), 0);
}

TEST(SyncAccumulatorTest, TheMeanIsBitIdenticalInEveryArrivalOrder) {
  // Values whose float sum depends on the order it is taken in.
  const std::vector<std::vector<float>> g = {{1e8f}, {1.0f}, {-1e8f}, {3.3f}};
  std::vector<int> order(g.size());
  std::iota(order.begin(), order.end(), 0);
  std::string first;
  int orders = 0;
  do {
    SyncAccumulator acc(4);
    SyncAccumulator::Step step;
    for (int w : order) Add(&acc, w, w, 0, g[w], &step);
    ASSERT_EQ(step.size(), 4);
    const std::string mean = Bytes(Mean(step, 1));
    if (first.empty()) first = mean;
    EXPECT_EQ(mean, first);
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(orders, 24);
  // Summed by replica slot: ((1e8 + 1) - 1e8) + 3.3, then / 4.
  float expected = ((1e8f + 1.0f) + -1e8f) + 3.3f;
  expected /= 4.0f;
  EXPECT_EQ(first, Bytes({expected}));
}

TEST(SyncAccumulatorTest, LoweringTheReplicasCompletesAHalfFilledStep) {
  SyncAccumulator acc(3);
  SyncAccumulator::Step step;
  Add(&acc, 0, 0, 0, {2}, &step);
  Add(&acc, 1, 1, 0, {4}, &step);
  EXPECT_FALSE(acc.TakeIfComplete(&step));
  acc.set_replicas(2);
  ASSERT_TRUE(acc.TakeIfComplete(&step));
  EXPECT_EQ(Mean(step, 1), (std::vector<float>{3}));
  EXPECT_EQ(acc.step(), 1);
  EXPECT_FALSE(acc.TakeIfComplete(&step)) << "an empty step never completes";
}

TEST(SyncAccumulatorTest, DiscardAndRestartDropWhatWaits) {
  SyncAccumulator acc(2);
  SyncAccumulator::Step step;
  Add(&acc, 0, 0, 0, {1}, &step);
  EXPECT_EQ(acc.Discard(), 1);
  EXPECT_EQ(acc.pending(), 0);
  EXPECT_EQ(acc.step(), 0);
  Add(&acc, 0, 0, 0, {1}, &step);
  EXPECT_EQ(acc.Restart(40), 1);
  EXPECT_EQ(acc.step(), 40);
  EXPECT_EQ(Add(&acc, 0, 0, 39, {1}, &step), SyncAccumulator::Verdict::kStale);
  EXPECT_EQ(Add(&acc, 0, 0, 40, {1}, &step), SyncAccumulator::Verdict::kAccumulated);
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
