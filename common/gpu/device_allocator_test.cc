// The device allocator's policies on host memory (a fake MemorySource): caps,
// growth's cache, reserve's arena, and the RESOURCE_EXHAUSTED messages.
#include "common/gpu/device_allocator.h"

#include <cstdlib>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace gpu {
namespace {

using ::testing::HasSubstr;

// Host memory with a device-like capacity; counts what it hands out.
class FakeSource : public MemorySource {
 public:
  explicit FakeSource(int64_t capacity, int64_t* taken) : capacity_(capacity), taken_(taken) {}
  ~FakeSource() override { EXPECT_TRUE(live_.empty()) << live_.size() << " buffers leaked"; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    if (*taken_ + static_cast<int64_t>(bytes) > capacity_) {
      return absl::ResourceExhaustedError("fake device full");
    }
    void* p = std::aligned_alloc(DeviceAllocator::kAlignment,
                                 (bytes + DeviceAllocator::kAlignment - 1) /
                                     DeviceAllocator::kAlignment * DeviceAllocator::kAlignment);
    if (p == nullptr) return absl::InternalError("host out of memory");
    *taken_ += static_cast<int64_t>(bytes);
    live_.emplace(p, bytes);
    return p;
  }
  void Free(void* ptr) override {
    auto it = live_.find(ptr);
    ASSERT_NE(it, live_.end());
    *taken_ -= static_cast<int64_t>(it->second);
    live_.erase(it);
    std::free(ptr);
  }

 private:
  const int64_t capacity_;
  int64_t* const taken_;
  std::map<void*, size_t> live_;
};

constexpr int64_t kMiB = 1 << 20;

std::unique_ptr<DeviceAllocator> Make(bool growth, int64_t limit, int64_t capacity,
                                      int64_t* taken) {
  AllocatorOptions o;
  o.device_name = "GPU:0";
  o.growth = growth;
  o.limit_bytes = limit;
  auto a = DeviceAllocator::Create(o, std::make_unique<FakeSource>(capacity, taken));
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *std::move(a) : nullptr;
}

TEST(DeviceAllocatorTest, SizeClasses) {
  EXPECT_EQ(DeviceAllocator::GrowthSizeClass(0), 512u);
  EXPECT_EQ(DeviceAllocator::GrowthSizeClass(1), 512u);
  EXPECT_EQ(DeviceAllocator::GrowthSizeClass(513), 1024u);
  EXPECT_EQ(DeviceAllocator::GrowthSizeClass(kMiB), static_cast<size_t>(kMiB));
  EXPECT_EQ(DeviceAllocator::GrowthSizeClass(kMiB + 1), static_cast<size_t>(2 * kMiB));
  EXPECT_EQ(DeviceAllocator::GrowthSizeClass(5 * kMiB), static_cast<size_t>(6 * kMiB));
}

TEST(DeviceAllocatorTest, BadOptionsAreInvalidArgument) {
  int64_t taken = 0;
  AllocatorOptions o;
  o.limit_bytes = -1;
  EXPECT_EQ(DeviceAllocator::Create(o, std::make_unique<FakeSource>(kMiB, &taken)).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.limit_bytes = 0;
  o.growth = false;  // reserve needs a size
  EXPECT_EQ(DeviceAllocator::Create(o, std::make_unique<FakeSource>(kMiB, &taken)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeviceAllocator::Create(AllocatorOptions{}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DeviceAllocatorTest, GrowthHoldsOnlyWhatWasNeededAndReusesTheCache) {
  int64_t taken = 0;
  auto a = Make(/*growth=*/true, 0, 64 * kMiB, &taken);
  EXPECT_EQ(taken, 0);
  auto p = a->Allocate(3000);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % DeviceAllocator::kAlignment, 0u);
  EXPECT_EQ(taken, 4096);
  a->Free(*p);
  EXPECT_EQ(a->stats().in_use_bytes, 0);
  EXPECT_EQ(a->stats().held_bytes, 4096);  // cached
  auto q = a->Allocate(4000);              // the same class: the cached buffer
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, *p);
  EXPECT_EQ(taken, 4096);
  EXPECT_EQ(a->stats().peak_in_use_bytes, 4096);
  a->Free(*q);
  a->ReleaseCached();
  EXPECT_EQ(taken, 0);
  EXPECT_EQ(a->stats().held_bytes, 0);
}

TEST(DeviceAllocatorTest, GrowthCapIsResourceExhaustedWithAClearMessage) {
  int64_t taken = 0;
  auto a = Make(/*growth=*/true, 8 * kMiB, 1024 * kMiB, &taken);
  auto p = a->Allocate(6 * kMiB);
  ASSERT_TRUE(p.ok());
  auto q = a->Allocate(3 * kMiB);  // rounds to 4 MiB: 10 > 8
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(q.status().message(), HasSubstr("GPU:0: out of memory"));
  EXPECT_THAT(q.status().message(), HasSubstr("memory limit of 8.0 MiB"));
  EXPECT_THAT(q.status().message(), HasSubstr("in use 6.0 MiB in 1 buffers"));
  EXPECT_LE(taken, 8 * kMiB);
  a->Free(*p);
}

TEST(DeviceAllocatorTest, GrowthReleasesTheCacheToStayUnderTheCap) {
  int64_t taken = 0;
  auto a = Make(/*growth=*/true, 8 * kMiB, 1024 * kMiB, &taken);
  auto p = a->Allocate(6 * kMiB);
  ASSERT_TRUE(p.ok());
  a->Free(*p);                     // 6 MiB cached
  auto q = a->Allocate(4 * kMiB);  // another class: needs the cache released
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(a->stats().held_bytes, 4 * kMiB);
  a->Free(*q);
}

TEST(DeviceAllocatorTest, GrowthRetriesAfterReleasingTheCacheWhenTheDeviceIsFull) {
  int64_t taken = 0;
  auto a = Make(/*growth=*/true, 0, 8 * kMiB, &taken);  // no cap; the device holds 8 MiB
  auto p = a->Allocate(6 * kMiB);
  ASSERT_TRUE(p.ok());
  a->Free(*p);
  auto q = a->Allocate(4 * kMiB);
  ASSERT_TRUE(q.ok()) << q.status();
  auto r = a->Allocate(6 * kMiB);  // 4 + 6 > 8 with nothing cached
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("the device has no room (fake device full)"));
  a->Free(*q);
}

TEST(DeviceAllocatorTest, ReserveTakesTheWholeArenaAtStart) {
  int64_t taken = 0;
  auto a = Make(/*growth=*/false, 16 * kMiB, 1024 * kMiB, &taken);
  EXPECT_EQ(taken, 16 * kMiB);
  EXPECT_EQ(a->stats().held_bytes, 16 * kMiB);
  auto p = a->Allocate(100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(taken, 16 * kMiB);
  EXPECT_EQ(a->stats().in_use_bytes, 256);
  a->Free(*p);
  a.reset();
  EXPECT_EQ(taken, 0);
}

TEST(DeviceAllocatorTest, ReserveThatDoesNotFitFailsAtStart) {
  int64_t taken = 0;
  AllocatorOptions o;
  o.device_name = "GPU:1";
  o.growth = false;
  o.limit_bytes = 32 * kMiB;
  auto a = DeviceAllocator::Create(o, std::make_unique<FakeSource>(16 * kMiB, &taken));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(a.status().message(), HasSubstr("GPU:1: cannot reserve 32.0 MiB at start"));
}

TEST(DeviceAllocatorTest, ReserveCoalescesFreedRanges) {
  int64_t taken = 0;
  auto a = Make(/*growth=*/false, 4 * kMiB, 1024 * kMiB, &taken);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) {
    auto p = a->Allocate(kMiB);
    ASSERT_TRUE(p.ok()) << i << ": " << p.status();
    blocks.push_back(*p);
  }
  auto full = a->Allocate(1);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("no free range that large"));
  // Free the middle two in either order: one 2 MiB range results.
  a->Free(blocks[2]);
  a->Free(blocks[1]);
  auto two = a->Allocate(2 * kMiB);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, blocks[1]);
  a->Free(*two);
  a->Free(blocks[0]);
  a->Free(blocks[3]);
  auto all = a->Allocate(4 * kMiB);  // everything coalesced back
  ASSERT_TRUE(all.ok()) << all.status();
  a->Free(*all);
  EXPECT_EQ(a->stats().in_use_bytes, 0);
  EXPECT_EQ(a->stats().peak_in_use_bytes, 4 * kMiB);
}

TEST(DeviceAllocatorTest, ReserveBuffersNeverOverlap) {
  int64_t taken = 0;
  auto a = Make(/*growth=*/false, 2 * kMiB, 1024 * kMiB, &taken);
  std::map<uintptr_t, size_t> live;
  uint32_t state = 7;
  for (int i = 0; i < 2000; ++i) {
    state = state * 1664525u + 1013904223u;
    if (!live.empty() && (state >> 28) < 7) {
      auto it = live.begin();
      std::advance(it, (state >> 8) % live.size());
      a->Free(reinterpret_cast<void*>(it->first));
      live.erase(it);
      continue;
    }
    const size_t bytes = 1 + (state >> 10) % 65536;
    auto p = a->Allocate(bytes);
    if (!p.ok()) {
      EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
      continue;
    }
    const uintptr_t at = reinterpret_cast<uintptr_t>(*p);
    auto next = live.lower_bound(at);
    if (next != live.end()) {
      EXPECT_LE(at + bytes, next->first);
    }
    if (next != live.begin()) {
      auto prev = std::prev(next);
      EXPECT_LE(prev->first + prev->second, at);
    }
    live.emplace(at, bytes);
  }
  for (const auto& [at, bytes] : live) a->Free(reinterpret_cast<void*>(at));
  EXPECT_EQ(a->stats().in_use_bytes, 0);
  auto all = a->Allocate(2 * kMiB);
  EXPECT_TRUE(all.ok()) << all.status();
  a->Free(*all);
}

TEST(DeviceAllocatorTest, FreeingUnknownPointersIsIgnored) {
  int64_t taken = 0;
  auto a = Make(/*growth=*/true, 0, kMiB, &taken);
  int local = 0;
  a->Free(&local);
  a->Free(nullptr);
  EXPECT_EQ(a->stats().allocations, 0);
}

TEST(FormatBytesTest, MiBAndGiB) {
  EXPECT_EQ(FormatBytes(3 * kMiB / 2), "1.5 MiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 30), "3.00 GiB");
}

}  // namespace
}  // namespace gpu
}  // namespace psc
