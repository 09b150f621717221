#include "common/collective/store_wait.h"

#include <atomic>
#include <thread>

#include "common/collective/memory_store.h"
#include "gtest/gtest.h"

namespace psc {
namespace collective {
namespace {

TEST(StoreWaitTest, ReturnsAKeySetWhileWaiting) {
  MemoryStore store;
  std::thread setter([&] { ASSERT_TRUE(store.Set("g/k", "v").ok()); });
  auto v =
      WaitForKey(&store, "g/k", AbortKey("g/"), absl::Seconds(30), nullptr, absl::Milliseconds(10));
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
}

TEST(StoreWaitTest, AnAbandonedGroupEndsTheWaitWithTheChiefsReason) {
  MemoryStore store;
  ASSERT_TRUE(store.Set(AbortKey("g/"), "worker:2 is lost").ok());
  const absl::Time start = absl::Now();
  auto v =
      WaitForKey(&store, "g/k", AbortKey("g/"), absl::Seconds(30), nullptr, absl::Milliseconds(10));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kAborted);
  EXPECT_NE(v.status().message().find("worker:2 is lost"), std::string::npos);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(StoreWaitTest, CancelledEndsTheWait) {
  MemoryStore store;
  std::atomic<bool> stop{false};
  std::thread stopper([&] { stop = true; });
  const absl::Time start = absl::Now();
  auto v = WaitForKey(
      &store, "g/k", "", absl::Seconds(30), [&] { return stop.load(); }, absl::Milliseconds(10));
  stopper.join();
  EXPECT_EQ(v.status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(StoreWaitTest, AKeyNeverSetTimesOut) {
  MemoryStore store;
  auto v = WaitForKey(&store, "g/k", AbortKey("g/"), absl::Milliseconds(50), nullptr,
                      absl::Milliseconds(20));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(v.status().message().find("g/k"), std::string::npos);
}

}  // namespace
}  // namespace collective
}  // namespace psc
