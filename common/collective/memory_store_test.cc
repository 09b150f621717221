#include "common/collective/memory_store.h"

#include <thread>

#include "gtest/gtest.h"

namespace psc {
namespace collective {
namespace {

TEST(MemoryStoreTest, SetOnceThenGet) {
  MemoryStore store;
  ASSERT_TRUE(store.Set("g1/rank0", "addr0").ok());
  EXPECT_TRUE(store.Set("g1/rank0", "addr0").ok());  // a retried Set
  EXPECT_EQ(store.Set("g1/rank0", "other").code(), absl::StatusCode::kAlreadyExists);
  absl::StatusOr<std::string> v = store.Get("g1/rank0", absl::ZeroDuration());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "addr0");
}

TEST(MemoryStoreTest, GetWaitsForALaterSet) {
  MemoryStore store;
  std::thread setter([&] { ASSERT_TRUE(store.Set("k", "v").ok()); });
  absl::StatusOr<std::string> v = store.Get("k", absl::Seconds(30));
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
}

TEST(MemoryStoreTest, GetOfAMissingKeyTimesOut) {
  MemoryStore store;
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> v = store.Get("never", absl::Milliseconds(50));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(v.status().message().find("never"), std::string::npos);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(MemoryStoreTest, BadKeysAndErasePrefix) {
  MemoryStore store;
  EXPECT_EQ(store.Set("", "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Set(std::string(MemoryStore::kMaxKeyBytes + 1, 'k'), "v").code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store.Set("g1/a", "1").ok());
  ASSERT_TRUE(store.Set("g1/b", "2").ok());
  ASSERT_TRUE(store.Set("g2/a", "3").ok());
  EXPECT_EQ(store.ErasePrefix("g1/"), 2u);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_TRUE(store.Set("g1/a", "new").ok());  // a new generation may reuse the key
}

TEST(MemoryStoreTest, RefusesValuesBeyondItsCapacity) {
  MemoryStore store;
  EXPECT_EQ(store.Set("big", std::string(MemoryStore::kMaxBytes + 1, 'x')).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.size(), 0u);
}

}  // namespace
}  // namespace collective
}  // namespace psc
