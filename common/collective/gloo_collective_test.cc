#include "common/collective/gloo_collective.h"

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/shutdown.h"
#include "common/collective/memory_store.h"
#include "gtest/gtest.h"

namespace psc {
namespace collective {
namespace {

// As the worker daemon does: a write to a rank that left (the leaving-peer
// tests) is EPIPE, not a SIGPIPE that ends the test binary.
const bool kBrokenPipesIgnored = (base::IgnoreBrokenPipes(), true);

GlooOptions Options(absl::Duration timeout = absl::Seconds(30)) {
  GlooOptions o;
  o.hostname = "127.0.0.1";
  o.timeout = timeout;
  return o;
}

// Forms a group of `size` ranks in this process, one thread per rank.
std::vector<std::unique_ptr<Collective>> FormGroup(MemoryStore* store, const std::string& prefix,
                                                   int size) {
  std::vector<std::unique_ptr<Collective>> group(size);
  std::vector<absl::Status> status(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto c = CreateGlooCollective(store, prefix, r, size, Options());
      status[r] = c.status();
      if (c.ok()) group[r] = *std::move(c);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  return group;
}

TEST(GlooCollectiveTest, AllReduceSumsOnEveryRankBitIdentically) {
  constexpr int kRanks = 3;
  // Not a multiple of the ranks, and over one segment of Gloo's ring.
  constexpr size_t kElements = 435306;
  MemoryStore store;
  auto group = FormGroup(&store, "g0/", kRanks);
  ASSERT_EQ(group.size(), static_cast<size_t>(kRanks));
  for (const auto& c : group) ASSERT_NE(c, nullptr);
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(kElements));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& d : data)
    for (float& x : d) x = normal(rng);
  // The plain reference: per element, the sum in double.
  std::vector<double> expect(kElements, 0.0);
  for (const auto& d : data)
    for (size_t i = 0; i < kElements; ++i) expect[i] += d[i];
  std::vector<absl::Status> status(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] { status[r] = group[r]->AllReduceSum(absl::MakeSpan(data[r])); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(status[r].ok()) << status[r];
  for (int r = 1; r < kRanks; ++r) {
    ASSERT_EQ(std::memcmp(data[0].data(), data[r].data(), kElements * sizeof(float)), 0)
        << "rank " << r << " differs from rank 0";
  }
  for (size_t i = 0; i < kElements; ++i) {
    ASSERT_NEAR(data[0][i], expect[i], 1e-5 * (1.0 + std::abs(expect[i]))) << "element " << i;
  }
}

TEST(GlooCollectiveTest, BroadcastCopiesTheRootsValues) {
  MemoryStore store;
  auto group = FormGroup(&store, "b/", 2);
  std::vector<std::vector<float>> data = {{1, 2, 3}, {0, 0, 0}};
  std::vector<absl::Status> status(2);
  std::thread peer([&] { status[1] = group[1]->Broadcast(absl::MakeSpan(data[1]), 0); });
  status[0] = group[0]->Broadcast(absl::MakeSpan(data[0]), 0);
  peer.join();
  ASSERT_TRUE(status[0].ok()) << status[0];
  ASSERT_TRUE(status[1].ok()) << status[1];
  EXPECT_EQ(data[1], (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(group[0]->Broadcast(absl::MakeSpan(data[0]), 2).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GlooCollectiveTest, ASingleRankGroupLeavesValuesAsTheyAre) {
  MemoryStore store;
  auto c = CreateGlooCollective(&store, "solo/", 0, 1, Options());
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> v = {1.5f, -2.0f};
  ASSERT_TRUE((*c)->AllReduceSum(absl::MakeSpan(v)).ok());
  EXPECT_EQ(v, (std::vector<float>{1.5f, -2.0f}));
}

TEST(GlooCollectiveTest, BadRankOrSizeIsInvalid) {
  MemoryStore store;
  EXPECT_EQ(CreateGlooCollective(&store, "x/", 2, 2, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateGlooCollective(&store, "x/", 0, 0, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateGlooCollective(&store, "x/", -1, 2, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GlooCollectiveTest, APeerThatNeverArrivesTimesOut) {
  MemoryStore store;
  const absl::Time start = absl::Now();
  auto c = CreateGlooCollective(&store, "lonely/", 0, 2, Options(absl::Milliseconds(300)));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST(GlooCollectiveTest, APeerThatLeavesFailsTheOperationBeforeTheTimeout) {
  MemoryStore store;
  std::vector<std::unique_ptr<Collective>> group(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto c = CreateGlooCollective(&store, "leave/", r, 2, Options(absl::Seconds(60)));
      ASSERT_TRUE(c.ok()) << c.status();
      group[r] = *std::move(c);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_NE(group[0], nullptr);
  ASSERT_NE(group[1], nullptr);
  group[1].reset();  // the peer's process ends: its connections close
  std::vector<float> v(1000, 1.0f);
  const absl::Time start = absl::Now();
  absl::Status s = group[0]->AllReduceSum(absl::MakeSpan(v));
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kInternal)
      << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  // The group is unusable after a failure.
  EXPECT_FALSE(group[0]->AllReduceSum(absl::MakeSpan(v)).ok());
}

}  // namespace
}  // namespace collective
}  // namespace psc
