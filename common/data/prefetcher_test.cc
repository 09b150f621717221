#include "common/data/prefetcher.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/data/batch_plan.h"
#include "common/data/dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::data {
namespace {

using ::testing::HasSubstr;

// `count` examples of 4x3 pixels; example i's pixels are the bytes (12 i + p) mod 256, which
// the table maps to (12 i + p) mod 256 + 0.5, and its label is i % 10.
Split MakeSplit(int64_t count) {
  Split s;
  s.count = count;
  s.height = 4;
  s.width = 3;
  for (int v = 0; v < 256; ++v) s.table[v] = static_cast<float>(v) + 0.5f;
  for (int64_t i = 0; i < count; ++i) {
    for (int p = 0; p < 12; ++p) s.pixels.push_back(static_cast<uint8_t>((12 * i + p) % 256));
    s.labels.push_back(static_cast<int32_t>(i % 10));
  }
  return s;
}

BatchPlan MakePlan(int64_t num_examples, int64_t batch_size, uint64_t seed = 1) {
  BatchPlanOptions o;
  o.num_examples = num_examples;
  o.batch_size = batch_size;
  o.shuffle_buffer = 50;
  o.seed = seed;
  absl::StatusOr<BatchPlan> plan = BatchPlan::Create(o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

TEST(GatherBatchTest, CopiesPixelsAndLabelsInOrder) {
  const Split split = MakeSplit(20);
  absl::StatusOr<Batch> b = GatherBatch(split, {7, 0, 13}, 42);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->step, 42);
  EXPECT_EQ(b->labels, (std::vector<int32_t>{7, 0, 3}));
  ASSERT_EQ(b->images.size(), 36u);
  for (int p = 0; p < 12; ++p) {
    EXPECT_EQ(b->images[p], split.Pixel(7 * 12 + p));
    EXPECT_EQ(b->images[12 + p], split.Pixel(p));
    EXPECT_EQ(b->images[24 + p], static_cast<float>((13 * 12 + p) % 256) + 0.5f);
  }
}

TEST(GatherBatchTest, EmptyIndicesGiveAnEmptyBatch) {
  absl::StatusOr<Batch> b = GatherBatch(MakeSplit(3), {}, 0);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->images.empty());
  EXPECT_TRUE(b->labels.empty());
}

TEST(GatherBatchTest, OutOfRangeIndexIsInvalid) {
  const Split split = MakeSplit(20);
  for (int64_t bad : {int64_t{20}, int64_t{-1}, int64_t{1} << 40}) {
    absl::StatusOr<Batch> b = GatherBatch(split, {1, bad}, 3);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(b.status().message(), HasSubstr("out of range"));
  }
}

TEST(GatherBatchTest, InconsistentSplitIsInvalid) {
  Split split = MakeSplit(5);
  split.labels.pop_back();
  EXPECT_EQ(GatherBatch(split, {0}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PrefetcherTest, YieldsStepsInOrderWithTheGatheredData) {
  const Split split = MakeSplit(300);
  const BatchPlan plan = MakePlan(300, 32);  // 9 steps per epoch.
  for (auto [r, R] : std::vector<std::pair<int, int>>{{0, 1}, {1, 4}, {3, 4}}) {
    Prefetcher prefetcher(&split, &plan, /*first_step=*/5, /*num_steps=*/20, r, R,
                          /*capacity=*/3);
    for (int64_t step = 5; step < 25; ++step) {
      absl::StatusOr<Batch> got = prefetcher.Next();
      ASSERT_TRUE(got.ok()) << got.status();
      absl::StatusOr<std::vector<int64_t>> indices = plan.Indices(step, r, R);
      ASSERT_TRUE(indices.ok());
      absl::StatusOr<Batch> want = GatherBatch(split, *indices, step);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(got->step, step);
      EXPECT_EQ(got->images, want->images);
      EXPECT_EQ(got->labels, want->labels);
      EXPECT_EQ(got->labels.size(), static_cast<size_t>(32 / R));
    }
    EXPECT_EQ(prefetcher.Next().status().code(), absl::StatusCode::kOutOfRange);
    EXPECT_EQ(prefetcher.Next().status().code(), absl::StatusCode::kOutOfRange);
  }
}

TEST(PrefetcherTest, CapacityOneWorks) {
  const Split split = MakeSplit(100);
  const BatchPlan plan = MakePlan(100, 10);
  Prefetcher prefetcher(&split, &plan, 0, 25, 0, 2, /*capacity=*/1);
  for (int64_t step = 0; step < 25; ++step) {
    absl::StatusOr<Batch> got = prefetcher.Next();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->step, step);
    EXPECT_EQ(got->labels.size(), 5u);
  }
  EXPECT_EQ(prefetcher.Next().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(PrefetcherTest, ZeroStepsIsImmediatelyOutOfRange) {
  const Split split = MakeSplit(10);
  const BatchPlan plan = MakePlan(10, 5);
  Prefetcher prefetcher(&split, &plan, 3, 0, 0, 1, 2);
  EXPECT_EQ(prefetcher.Next().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(PrefetcherTest, DestructionMidStreamIsPrompt) {
  const Split split = MakeSplit(1000);
  const BatchPlan plan = MakePlan(1000, 100);
  const absl::Time start = absl::Now();
  {
    // A million steps: the producer blocks on the full queue until the destructor stops it.
    Prefetcher prefetcher(&split, &plan, 0, 1000000, 0, 1, 2);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(prefetcher.Next().ok());
  }
  { Prefetcher never_consumed(&split, &plan, 0, 1000000, 0, 1, 4); }
  // Generous bound; it takes well under a millisecond. Without the stop flag it would hang.
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PrefetcherTest, ConsumersOnSeveralThreadsShareTheStream) {
  const Split split = MakeSplit(200);
  const BatchPlan plan = MakePlan(200, 20);
  Prefetcher prefetcher(&split, &plan, 0, 60, 0, 1, 2);
  std::vector<std::vector<int64_t>> steps(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {  // Bounded: stops at OUT_OF_RANGE long before.
        absl::StatusOr<Batch> b = prefetcher.Next();
        if (!b.ok()) break;
        steps[t].push_back(b->step);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<int64_t> all;
  for (const auto& s : steps) {
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
    all.insert(all.end(), s.begin(), s.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want(60);
  for (int64_t i = 0; i < 60; ++i) want[i] = i;
  EXPECT_EQ(all, want);
}

TEST(PrefetcherTest, ProducerErrorFollowsTheGoodBatches) {
  // The plan covers 100 examples but the split holds only 60: some batch reads past the end.
  const Split split = MakeSplit(60);
  const BatchPlan plan = MakePlan(100, 10);
  Prefetcher prefetcher(&split, &plan, 0, 10, 0, 1, 2);
  int64_t good = 0;
  absl::Status error;
  for (int i = 0; i < 11; ++i) {
    absl::StatusOr<Batch> b = prefetcher.Next();
    if (!b.ok()) {
      error = b.status();
      break;
    }
    EXPECT_EQ(b->step, good);
    ++good;
  }
  EXPECT_LT(good, 10);
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(error.message(), HasSubstr("out of range [0, 60)"));
  EXPECT_EQ(prefetcher.Next().status(), error);
}

TEST(PrefetcherTest, InvalidArgumentsSurfaceFromNext) {
  const Split split = MakeSplit(100);
  const BatchPlan plan = MakePlan(100, 10);
  struct Case {
    const Split* split;
    const BatchPlan* plan;
    int64_t first_step, num_steps;
    int r, R, capacity;
  };
  for (const Case& c : std::vector<Case>{{nullptr, &plan, 0, 5, 0, 1, 1},
                                         {&split, nullptr, 0, 5, 0, 1, 1},
                                         {&split, &plan, -1, 5, 0, 1, 1},
                                         {&split, &plan, 0, -5, 0, 1, 1},
                                         {&split, &plan, 0, 5, 0, 1, 0},
                                         {&split, &plan, 0, 5, 0, 3, 1},
                                         {&split, &plan, 0, 5, 2, 2, 1}}) {
    Prefetcher prefetcher(c.split, c.plan, c.first_step, c.num_steps, c.r, c.R, c.capacity);
    EXPECT_EQ(prefetcher.Next().status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(prefetcher.Next().status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// A producer's batches (a streamed slot's) come in step order, called once
// a step on the thread; its error follows the batches before it; a missing
// producer is INVALID_ARGUMENT.
TEST(PrefetcherTest, AProducersBatchesComeInStepOrderThenItsError) {
  std::vector<int64_t> asked;  // written by the thread only, read after it joined
  {
    Prefetcher prefetcher(
        [&asked](int64_t step, const std::atomic<bool>&) -> absl::StatusOr<Batch> {
          asked.push_back(step);
          if (step == 13) return absl::DataLossError("part-3: bad data CRC");
          Batch b;
          b.step = step;
          b.labels = {static_cast<int32_t>(step)};
          return b;
        },
        10, 6, 2);
    for (int64_t step = 10; step < 13; ++step) {
      auto b = prefetcher.Next();
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(b->step, step);
      EXPECT_EQ(b->labels[0], step);
    }
    EXPECT_EQ(prefetcher.Next().status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(prefetcher.Next().status().code(), absl::StatusCode::kDataLoss);
  }
  EXPECT_EQ(asked, (std::vector<int64_t>{10, 11, 12, 13}));
  Prefetcher none(Prefetcher::Produce(), 0, 5, 1);
  EXPECT_EQ(none.Next().status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psc::data
