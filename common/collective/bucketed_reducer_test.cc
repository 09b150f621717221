#include "common/collective/bucketed_reducer.h"

#include <thread>

#include "common/collective/gloo_collective.h"
#include "common/collective/memory_store.h"
#include "gtest/gtest.h"

namespace psc {
namespace collective {
namespace {

// A one-rank "group" that records what it was asked to reduce and doubles
// the values (so a test sees which elements went through it), or fails.
class RecordingCollective : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status AllReduceSum(absl::Span<float> data) override {
    sizes.push_back(data.size());
    if (fail_after >= 0 && static_cast<int>(sizes.size()) > fail_after) {
      return absl::UnavailableError("peer gone");
    }
    for (float& x : data) x *= 2;
    return absl::OkStatus();
  }
  absl::Status Broadcast(absl::Span<float>, int) override { return absl::OkStatus(); }
  std::string Describe() const override { return "recording"; }
  std::vector<size_t> sizes;
  int fail_after = -1;
};

TEST(BucketedReducerTest, FusesInReadyOrderAndReturnsEveryVariable) {
  // Variables 0..3 of 100, 10, 300, 5 floats; the backward pass readies
  // 3, 2, 1, 0. Buckets of 400 bytes (100 floats): {3, 2}, {1, 0}.
  auto r = BucketedReducer::Create({100, 10, 300, 5}, {3, 2, 1, 0}, 400);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->num_buckets(), 2);
  RecordingCollective c;
  ASSERT_TRUE((*r)->Begin(&c).ok());
  for (int v : {3, 2, 1, 0}) {
    absl::Span<float> slot = (*r)->Slot(v);
    for (size_t i = 0; i < slot.size(); ++i) slot[i] = static_cast<float>(v * 1000 + i);
    ASSERT_TRUE((*r)->MarkReady(v).ok());
  }
  std::vector<std::vector<float>> grads;
  ReduceTiming timing;
  ASSERT_TRUE((*r)->Finish(&grads, &timing).ok());
  EXPECT_EQ(c.sizes, (std::vector<size_t>{305, 110}));
  ASSERT_EQ(grads.size(), 4u);
  const std::vector<size_t> sizes = {100, 10, 300, 5};
  for (int v = 0; v < 4; ++v) {
    ASSERT_EQ(grads[v].size(), sizes[v]);
    for (size_t i = 0; i < sizes[v]; ++i) ASSERT_EQ(grads[v][i], 2.0f * (v * 1000 + i));
  }
  EXPECT_GE(timing.comm, absl::ZeroDuration());
  // A second step reuses the buckets.
  ASSERT_TRUE((*r)->Begin(&c).ok());
  for (int v : {3, 2, 1, 0}) ASSERT_TRUE((*r)->MarkReady(v).ok());
  ASSERT_TRUE((*r)->Finish(&grads, nullptr).ok());
  EXPECT_EQ(c.sizes.size(), 4u);
}

// Frozen variables are given 0 elements: they are marked ready like the
// others, and a bucket of only them calls no all-reduce.
TEST(BucketedReducerTest, EmptyVariablesAreReadiedButNotReduced) {
  auto r = BucketedReducer::Create({0, 3, 0, 0}, {3, 2, 1, 0}, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)->num_buckets(), 2);  // {3, 2, 1}, {0}
  RecordingCollective c;
  ASSERT_TRUE((*r)->Begin(&c).ok());
  for (int v : {3, 2, 1, 0}) {
    absl::Span<float> slot = (*r)->Slot(v);
    for (float& x : slot) x = 1.5f;
    ASSERT_TRUE((*r)->MarkReady(v).ok());
  }
  std::vector<std::vector<float>> grads;
  ASSERT_TRUE((*r)->Finish(&grads, nullptr).ok());
  EXPECT_EQ(c.sizes, (std::vector<size_t>{3}));
  EXPECT_EQ(grads, (std::vector<std::vector<float>>{{}, {3, 3, 3}, {}, {}}));
}

TEST(BucketedReducerTest, RefusesOutOfOrderAndIncompleteSteps) {
  auto r = BucketedReducer::Create({4, 4}, {1, 0}, 4);
  ASSERT_TRUE(r.ok());
  RecordingCollective c;
  EXPECT_EQ((*r)->MarkReady(1).code(), absl::StatusCode::kFailedPrecondition);  // no step
  ASSERT_TRUE((*r)->Begin(&c).ok());
  EXPECT_EQ((*r)->Begin(&c).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*r)->MarkReady(0).code(), absl::StatusCode::kFailedPrecondition);  // order
  ASSERT_TRUE((*r)->MarkReady(1).ok());
  EXPECT_EQ((*r)->MarkReady(1).code(), absl::StatusCode::kFailedPrecondition);  // twice
  std::vector<std::vector<float>> grads;
  EXPECT_EQ((*r)->Finish(&grads, nullptr).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*r)->Begin(&c).ok());  // closed: a new step may start
}

TEST(BucketedReducerTest, BadShapesAreInvalid) {
  EXPECT_EQ(BucketedReducer::Create({1, 2}, {0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BucketedReducer::Create({1, 2}, {0, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BucketedReducer::Create({-1}, {0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BucketedReducer::Create({1}, {0}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BucketedReducerTest, AFailedBucketFailsTheStepAndSkipsTheRest) {
  auto r = BucketedReducer::Create({4, 4, 4}, {2, 1, 0}, 16);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)->num_buckets(), 3);
  RecordingCollective c;
  c.fail_after = 1;
  ASSERT_TRUE((*r)->Begin(&c).ok());
  for (int v : {2, 1, 0}) ASSERT_TRUE((*r)->MarkReady(v).ok());
  std::vector<std::vector<float>> grads;
  EXPECT_EQ((*r)->Finish(&grads, nullptr).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(c.sizes.size(), 2u);  // the third bucket was not tried
}

TEST(BucketedReducerTest, TwoRanksOverGlooAgreeWithTheSums) {
  MemoryStore store;
  std::vector<std::vector<std::vector<float>>> out(2);
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      GlooOptions o;
      o.timeout = absl::Seconds(30);
      auto c = CreateGlooCollective(&store, "br/", rank, 2, o);
      if (!c.ok()) {
        status[rank] = c.status();
        return;
      }
      auto r = BucketedReducer::Create({1000, 7, 5000}, {2, 1, 0}, 4096);
      if (!r.ok()) {
        status[rank] = r.status();
        return;
      }
      for (int step = 0; step < 3 && status[rank].ok(); ++step) {
        status[rank] = (*r)->Begin(c->get());
        for (int v : {2, 1, 0}) {
          absl::Span<float> slot = (*r)->Slot(v);
          for (size_t i = 0; i < slot.size(); ++i) slot[i] = (rank + 1) * (v + step) + 0.25f * i;
          if (status[rank].ok()) status[rank] = (*r)->MarkReady(v);
        }
        if (status[rank].ok()) status[rank] = (*r)->Finish(&out[rank], nullptr);
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(status[0].ok()) << status[0];
  ASSERT_TRUE(status[1].ok()) << status[1];
  EXPECT_EQ(out[0], out[1]);
  // The last step (2): element i of v is (1 + 2) * (v + 2) + 2 * 0.25 i.
  for (int v = 0; v < 3; ++v) {
    for (size_t i = 0; i < out[0][v].size(); ++i) {
      ASSERT_EQ(out[0][v][i], 3.0f * (v + 2) + 0.5f * i) << v << " " << i;
    }
  }
}

}  // namespace
}  // namespace collective
}  // namespace psc
