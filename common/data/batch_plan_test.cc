#include "common/data/batch_plan.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The reference workload: 55,000 training examples, batch 128, buffer 10,000.
BatchPlanOptions Reference(uint64_t seed = 0) {
  BatchPlanOptions o;
  o.num_examples = 55000;
  o.batch_size = 128;
  o.shuffle_buffer = 10000;
  o.seed = seed;
  return o;
}

BatchPlan MakePlan(const BatchPlanOptions& options) {
  absl::StatusOr<BatchPlan> plan = BatchPlan::Create(options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

std::vector<int64_t> MustIndices(const BatchPlan& plan, int64_t step, int r, int R) {
  absl::StatusOr<std::vector<int64_t>> indices = plan.Indices(step, r, R);
  EXPECT_TRUE(indices.ok()) << indices.status();
  return indices.ok() ? *indices : std::vector<int64_t>{};
}

TEST(BatchPlanTest, StepsPerEpochDropsTheLastPartialBatch) {
  EXPECT_EQ(MakePlan(Reference()).steps_per_epoch(), 429);  // 55000 / 128 = 429.6875.
  BatchPlanOptions o = Reference();
  o.num_examples = 60000;
  EXPECT_EQ(MakePlan(o).steps_per_epoch(), 468);
  o.steps_per_epoch = 10;
  EXPECT_EQ(MakePlan(o).steps_per_epoch(), 10);
}

TEST(BatchPlanTest, CreateRejectsInvalidOptions) {
  auto expect_invalid = [](BatchPlanOptions o, const char* fragment) {
    absl::StatusOr<BatchPlan> plan = BatchPlan::Create(o);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(plan.status().message(), HasSubstr(fragment));
  };
  BatchPlanOptions o = Reference();
  o.num_examples = 0;
  o.batch_size = 1;
  expect_invalid(o, "num_examples 0");
  o = Reference();
  o.batch_size = 0;
  expect_invalid(o, "batch_size 0");
  o.batch_size = -3;
  expect_invalid(o, "batch_size -3");
  o.batch_size = 55001;
  expect_invalid(o, "batch_size 55001");
  o = Reference();
  o.shuffle_buffer = 0;
  expect_invalid(o, "shuffle_buffer 0");
  o = Reference();
  o.steps_per_epoch = -1;
  expect_invalid(o, "steps_per_epoch -1");
  o.steps_per_epoch = 430;
  expect_invalid(o, "steps_per_epoch 430 must be in [0, 429]");
  o.steps_per_epoch = 429;
  EXPECT_TRUE(BatchPlan::Create(o).ok());
  o = Reference();
  o.batch_size = 55000;  // One step per epoch.
  EXPECT_TRUE(BatchPlan::Create(o).ok());
}

TEST(BatchPlanTest, IndicesRejectsInvalidArguments) {
  const BatchPlan plan = MakePlan(Reference());
  for (auto [step, r, R] : std::vector<std::tuple<int64_t, int, int>>{
           {-1, 0, 1}, {0, 0, 0}, {0, 0, -2}, {0, 0, 3}, {0, -1, 4}, {0, 4, 4}, {0, 0, 256}}) {
    absl::StatusOr<std::vector<int64_t>> indices = plan.Indices(step, r, R);
    EXPECT_EQ(indices.status().code(), absl::StatusCode::kInvalidArgument)
        << step << " " << r << " " << R;
  }
  EXPECT_TRUE(plan.Indices(0, 127, 128).ok());
}

TEST(BatchPlanTest, SameSeedGivesSameIndices) {
  const BatchPlan a = MakePlan(Reference(42));
  const BatchPlan b = MakePlan(Reference(42));
  for (int64_t step : {0, 1, 2, 428, 429, 1000, 4289}) {
    EXPECT_EQ(MustIndices(a, step, 0, 1), MustIndices(b, step, 0, 1)) << step;
  }
}

TEST(BatchPlanTest, DifferentSeedGivesDifferentIndices) {
  const BatchPlan a = MakePlan(Reference(1));
  const BatchPlan b = MakePlan(Reference(2));
  for (int64_t step : {0, 1, 429, 1000}) {
    EXPECT_NE(MustIndices(a, step, 0, 1), MustIndices(b, step, 0, 1)) << step;
  }
}

// The order is part of the contract (a checkpointed job resumed by another build must read the
// same examples), so it is pinned here.
TEST(BatchPlanTest, OrderIsPinned) {
  BatchPlanOptions o;
  o.num_examples = 10;
  o.batch_size = 5;
  o.shuffle_buffer = 4;
  o.seed = 7;
  const BatchPlan plan = MakePlan(o);
  EXPECT_THAT(plan.EpochOrder(0), ElementsAre(3, 1, 5, 6, 4, 0, 9, 2, 7, 8));
  EXPECT_THAT(plan.EpochOrder(1), ElementsAre(2, 1, 0, 4, 6, 3, 5, 9, 8, 7));
  o.num_examples = 55000;
  o.batch_size = 128;
  o.shuffle_buffer = 10000;
  o.seed = 0;
  EXPECT_THAT(MustIndices(MakePlan(o), 1000, 3, 16),
              ElementsAre(16553, 19037, 25855, 15627, 26298, 21161, 19020, 8660));
}

TEST(BatchPlanTest, EachEpochVisitsEveryExampleOnce) {
  BatchPlanOptions o;
  o.num_examples = 1000;
  o.batch_size = 50;
  o.shuffle_buffer = 100;
  const BatchPlan plan = MakePlan(o);
  ASSERT_EQ(plan.steps_per_epoch(), 20);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> seen;
    for (int64_t s = 0; s < 20; ++s) {
      const std::vector<int64_t> batch = MustIndices(plan, epoch * 20 + s, 0, 1);
      ASSERT_EQ(batch.size(), 50u);
      seen.insert(seen.end(), batch.begin(), batch.end());
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(1000);
    std::iota(all.begin(), all.end(), int64_t{0});
    EXPECT_EQ(seen, all) << "epoch " << epoch;
  }
}

TEST(BatchPlanTest, NoExampleTwiceWithinAnEpochWhenTheBatchDoesNotDivide) {
  const BatchPlan plan = MakePlan(Reference(3));
  for (int64_t epoch : {0, 5}) {
    std::set<int64_t> seen;
    for (int64_t s = 0; s < plan.steps_per_epoch(); ++s) {
      for (int64_t i : MustIndices(plan, epoch * plan.steps_per_epoch() + s, 0, 1)) {
        ASSERT_GE(i, 0);
        ASSERT_LT(i, 55000);
        ASSERT_TRUE(seen.insert(i).second) << "index " << i << " twice in epoch " << epoch;
      }
    }
    EXPECT_EQ(seen.size(), 429u * 128u);
  }
}

TEST(BatchPlanTest, EpochsAreReshuffled) {
  const BatchPlan plan = MakePlan(Reference());
  const std::vector<int64_t> e0 = plan.EpochOrder(0);
  const std::vector<int64_t> e1 = plan.EpochOrder(1);
  const std::vector<int64_t> e2 = plan.EpochOrder(2);
  EXPECT_NE(e0, e1);
  EXPECT_NE(e1, e2);
  EXPECT_NE(MustIndices(plan, 0, 0, 1), MustIndices(plan, 429, 0, 1));
  // Not merely rotated or mostly equal: few positions agree.
  int64_t same = 0;
  for (size_t i = 0; i < e0.size(); ++i) same += e0[i] == e1[i];
  EXPECT_LT(same, 100);
}

TEST(BatchPlanTest, ShuffleBufferBoundsHowFarAheadAnExampleCanBeDrawn) {
  // When the k-th index is emitted, the buffer holds only indices below k + buffer.
  BatchPlanOptions o = Reference(9);
  const std::vector<int64_t> order = MakePlan(o).EpochOrder(4);
  for (size_t k = 0; k < order.size(); ++k) ASSERT_LT(order[k], static_cast<int64_t>(k) + 10000);
  // And a large buffer does reach far: the first batch is not just the first few examples.
  EXPECT_GT(*std::max_element(order.begin(), order.begin() + 128), 5000);
}

TEST(BatchPlanTest, BufferOfOneDoesNotShuffle) {
  BatchPlanOptions o = Reference();
  o.shuffle_buffer = 1;
  const BatchPlan plan = MakePlan(o);
  for (int64_t step : {0, 7, 429 + 3}) {
    std::vector<int64_t> want(128);
    std::iota(want.begin(), want.end(), (step % 429) * 128);
    EXPECT_EQ(MustIndices(plan, step, 0, 1), want);
  }
}

TEST(BatchPlanTest, BufferLargerThanTheDataIsAFullPermutation) {
  BatchPlanOptions o;
  o.num_examples = 100;
  o.batch_size = 10;
  o.shuffle_buffer = 1000000;
  const std::vector<int64_t> order = MakePlan(o).EpochOrder(0);
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(100);
  std::iota(all.begin(), all.end(), int64_t{0});
  EXPECT_EQ(sorted, all);
  EXPECT_NE(order, all);
}

TEST(BatchPlanTest, SlotsConcatenateToTheWholeBatch) {
  const BatchPlan plan = MakePlan(Reference(5));
  for (int64_t step : {0, 1, 2, 428, 429, 430, 1000, 4289}) {
    const std::vector<int64_t> whole = MustIndices(plan, step, 0, 1);
    ASSERT_EQ(whole.size(), 128u);
    for (int R : {1, 2, 4, 8}) {
      std::vector<int64_t> joined;
      for (int r = 0; r < R; ++r) {
        const std::vector<int64_t> part = MustIndices(plan, step, r, R);
        ASSERT_EQ(part.size(), static_cast<size_t>(128 / R));
        joined.insert(joined.end(), part.begin(), part.end());
      }
      EXPECT_EQ(joined, whole) << "step " << step << " R " << R;
    }
  }
}

TEST(BatchPlanTest, SlotsOfAnEpochAreDisjointAndCoverTheSameSet) {
  BatchPlanOptions o;
  o.num_examples = 1030;
  o.batch_size = 40;
  o.shuffle_buffer = 64;
  o.seed = 11;
  const BatchPlan plan = MakePlan(o);
  const int64_t epoch = 2;
  std::set<int64_t> whole;
  for (int64_t s = 0; s < plan.steps_per_epoch(); ++s) {
    for (int64_t i : MustIndices(plan, epoch * plan.steps_per_epoch() + s, 0, 1)) whole.insert(i);
  }
  for (int R : {2, 4, 8}) {
    std::set<int64_t> all_slots;
    for (int r = 0; r < R; ++r) {
      for (int64_t s = 0; s < plan.steps_per_epoch(); ++s) {
        for (int64_t i : MustIndices(plan, epoch * plan.steps_per_epoch() + s, r, R)) {
          EXPECT_TRUE(all_slots.insert(i).second) << "R " << R << ": index " << i << " twice";
        }
      }
    }
    EXPECT_EQ(all_slots, whole) << "R " << R;
  }
}

TEST(BatchPlanTest, StartingLateEqualsIteratingFromZero) {
  const BatchPlan iterated = MakePlan(Reference(17));
  std::vector<int64_t> at_1000;
  for (int64_t step = 0; step <= 1000; ++step) at_1000 = MustIndices(iterated, step, 0, 1);
  const BatchPlan fresh = MakePlan(Reference(17));
  EXPECT_EQ(MustIndices(fresh, 1000, 0, 1), at_1000);
  // Going back to an earlier epoch after a later one gives the same answer again.
  const std::vector<int64_t> at_5 = MustIndices(fresh, 5, 1, 2);
  EXPECT_EQ(MustIndices(iterated, 5, 1, 2), at_5);
  EXPECT_EQ(MustIndices(fresh, 1000, 0, 1), at_1000);
}

TEST(BatchPlanTest, StepsPerEpochOverrideUsesTheFirstBatchesOfEachEpoch) {
  BatchPlanOptions o = Reference(4);
  const BatchPlan full = MakePlan(o);
  o.steps_per_epoch = 3;
  const BatchPlan short_epochs = MakePlan(o);
  for (int64_t s = 0; s < 3; ++s) {
    EXPECT_EQ(MustIndices(short_epochs, s, 0, 1), MustIndices(full, s, 0, 1));
    // Step 3 + s is step s of epoch 1.
    EXPECT_EQ(MustIndices(short_epochs, 3 + s, 0, 1), MustIndices(full, 429 + s, 0, 1));
  }
}

TEST(BatchPlanTest, MovedPlanKeepsItsOrder) {
  BatchPlan a = MakePlan(Reference(8));
  const std::vector<int64_t> before = MustIndices(a, 600, 1, 4);
  BatchPlan b = std::move(a);
  EXPECT_EQ(MustIndices(b, 600, 1, 4), before);
}

TEST(BatchPlanTest, ConcurrentCallsAcrossEpochsAgree) {
  BatchPlanOptions o;
  o.num_examples = 5000;
  o.batch_size = 100;
  o.shuffle_buffer = 1000;
  o.seed = 21;
  const BatchPlan shared = MakePlan(o);
  const BatchPlan reference = MakePlan(o);
  std::vector<std::vector<int64_t>> want;
  for (int64_t step = 0; step < 200; ++step) want.push_back(MustIndices(reference, step, 0, 1));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Each thread walks the steps in its own order, so the cached epoch keeps changing.
      for (int64_t k = 0; k < 200; ++k) {
        const int64_t step = (k * (2 * t + 1) + 37 * t) % 200;
        absl::StatusOr<std::vector<int64_t>> got = shared.Indices(step, 0, 1);
        if (!got.ok() || *got != want[step]) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace psc::data
