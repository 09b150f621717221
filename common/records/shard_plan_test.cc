#include "common/records/shard_plan.h"

#include <map>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::records {
namespace {

using ::testing::HasSubstr;

// Every record of every file, read by the slots of one epoch: how often.
std::map<std::pair<int, int64_t>, int> Reads(const std::vector<std::vector<Piece>>& slots) {
  std::map<std::pair<int, int64_t>, int> reads;
  for (const auto& pieces : slots) {
    for (const Piece& p : pieces) {
      for (int64_t i = 0; i < p.count; ++i) ++reads[{p.file, p.first + i}];
    }
  }
  return reads;
}

TEST(ShardPlanTest, EveryRecordAtMostOnceAndEachSlotItsQuota) {
  ShardPlanOptions o;
  o.records = {700, 0, 130, 1000, 55, 400, 999};  // uneven, one empty
  o.batch_size = 96;
  o.replicas = 3;
  o.seed = 7;
  auto plan = ShardPlan::Create(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t total = std::accumulate(o.records.begin(), o.records.end(), int64_t{0});
  EXPECT_EQ(plan->steps_per_epoch(), total / 96);
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    const auto slots = plan->Epoch(epoch);
    ASSERT_EQ(slots.size(), 3u);
    for (int r = 0; r < 3; ++r) {
      int64_t n = 0;
      for (const Piece& p : slots[r]) {
        EXPECT_GT(p.count, 0);
        EXPECT_GE(p.first, 0);
        EXPECT_LE(p.first + p.count, o.records[p.file]);
        n += p.count;
      }
      EXPECT_EQ(n, plan->steps_per_epoch() * 32) << "slot " << r;
      EXPECT_EQ(plan->SlotEpoch(epoch, r), slots[r]);
    }
    const auto reads = Reads(slots);
    for (const auto& [record, times] : reads) EXPECT_EQ(times, 1);
    EXPECT_EQ(static_cast<int64_t>(reads.size()), plan->steps_per_epoch() * 96);
    EXPECT_LT(total - static_cast<int64_t>(reads.size()), 96) << "fewer than a batch left";
  }
}

TEST(ShardPlanTest, APureFunctionOfSeedEpochAndR) {
  ShardPlanOptions o;
  o.records = {50, 60, 70, 80, 90, 100, 110, 120};
  o.batch_size = 40;
  o.replicas = 2;
  o.seed = 1;
  auto a = ShardPlan::Create(o);
  auto b = ShardPlan::Create(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->Epoch(3), b->Epoch(3)) << "two plans, one answer";
  EXPECT_NE(a->FileOrder(0), a->FileOrder(1)) << "each epoch its own order";
  o.seed = 2;
  auto c = ShardPlan::Create(o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->FileOrder(0), c->FileOrder(0));
  // Every file once in each epoch's order.
  std::vector<int> order = a->FileOrder(5);
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // steps_per_epoch lower: each slot reads that many steps' worth.
  o.steps_per_epoch = 3;
  auto short_plan = ShardPlan::Create(o);
  ASSERT_TRUE(short_plan.ok());
  int64_t n = 0;
  for (const Piece& p : short_plan->SlotEpoch(0, 1)) n += p.count;
  EXPECT_EQ(n, 3 * 20);
}

TEST(ShardPlanTest, RefusesWhatCannotBePlanned) {
  const struct {
    std::vector<int64_t> records;
    int64_t batch;
    int R;
    int64_t steps;
    const char* message;
  } cases[] = {
      {{}, 8, 1, 0, "no file"},
      {{10, -1}, 8, 1, 0, "file 1: -1 records"},
      {{int64_t{1} << 62, 1}, 8, 1, 0, "file 1: 1 records"},
      {{10}, 8, 3, 0, "want R >= 1 dividing it"},
      {{10}, 0, 1, 0, "want R >= 1 dividing it"},
      {{5}, 8, 1, 0, "fewer than a batch of 8"},
      {{100}, 8, 1, 13, "hold at most 12 batches of 8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    ShardPlanOptions o;
    o.records = c.records;
    o.batch_size = c.batch;
    o.replicas = c.R;
    o.steps_per_epoch = c.steps;
    auto plan = ShardPlan::Create(o);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(plan.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace psc::records
