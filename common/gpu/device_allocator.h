// Device memory for one logical device, as TensorFlow hands it out:
//
//   growth mode   (--memory_growth) a caching allocator: buffers come from the
//                 source on demand, in size classes, and go back to a cache
//                 when freed, for the next request of that class. The process
//                 holds only what it has needed so far.
//   reserve mode  (the default) one arena of the limit, taken from the source
//                 at Create, then carved best-fit with coalescing. The process
//                 holds the whole arena from the start.
//
// Either way `limit_bytes` caps what the allocator holds (in growth mode:
// buffers in use plus the cache; the cache is released to make room before a
// request is refused). A request beyond the cap, or one the source cannot
// satisfy, is RESOURCE_EXHAUSTED with a message naming the device, the
// request, the limit and what is in use: never a crash.
//
// Pure C++: the memory comes from a MemorySource (cudaMalloc in production,
// cuda_memory.h; host memory in the tests). Thread-safe.
#ifndef PSC_COMMON_GPU_DEVICE_ALLOCATOR_H_
#define PSC_COMMON_GPU_DEVICE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace psc {
namespace gpu {

// Raw memory of one device. Implementations need not be thread-safe: the
// allocator calls them under its lock.
class MemorySource {
 public:
  virtual ~MemorySource() = default;
  // `bytes` > 0. RESOURCE_EXHAUSTED when the device has no room; another
  // error (INTERNAL naming the call) when the device fails.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  // `ptr` came from Allocate and is freed once.
  virtual void Free(void* ptr) = 0;
};

struct AllocatorOptions {
  // In messages: "GPU:0", "GPU:0 (logical device 1 of 2)".
  std::string device_name = "GPU";
  // Growth mode (true) or reserve mode (false); see the file comment.
  bool growth = true;
  // The cap; 0 = none in growth mode (the device's size is the cap). Reserve
  // mode needs a positive limit: the arena's size.
  int64_t limit_bytes = 0;
};

struct AllocatorStats {
  int64_t in_use_bytes = 0;  // handed out, rounded to the allocator's granularity
  int64_t held_bytes = 0;    // taken from the source (in use + cached, or the arena)
  int64_t peak_in_use_bytes = 0;
  int64_t limit_bytes = 0;  // 0 = none
  int64_t allocations = 0;  // buffers in use
};

class DeviceAllocator {
 public:
  // Every buffer is aligned to this (cuDNN and cuBLAS want 256 bytes at most).
  static constexpr size_t kAlignment = 256;

  // INVALID_ARGUMENT for a negative limit or reserve mode without one;
  // reserve mode: the source's error (RESOURCE_EXHAUSTED naming the arena's
  // size) if the arena cannot be taken.
  static absl::StatusOr<std::unique_ptr<DeviceAllocator>> Create(
      AllocatorOptions options, std::unique_ptr<MemorySource> source);
  // Returns everything it holds to the source. Buffers still in use must
  // not be touched afterwards.
  ~DeviceAllocator();

  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // A buffer of at least `bytes` (0 gives a valid minimal buffer), aligned
  // to kAlignment, uninitialized. RESOURCE_EXHAUSTED (see the file comment).
  absl::StatusOr<void*> Allocate(size_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // `ptr` came from Allocate and is freed once; nullptr is ignored.
  void Free(void* ptr) ABSL_LOCKS_EXCLUDED(mu_);

  // Growth mode: returns the cache to the source. No-op in reserve mode.
  void ReleaseCached() ABSL_LOCKS_EXCLUDED(mu_);

  AllocatorStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const AllocatorOptions& options() const { return options_; }

  // The size class a request of `bytes` is rounded to in growth mode:
  // powers of two from 512 bytes up to 1 MiB, then multiples of 2 MiB.
  static size_t GrowthSizeClass(size_t bytes);

 private:
  DeviceAllocator(AllocatorOptions options, std::unique_ptr<MemorySource> source);

  absl::StatusOr<void*> AllocateGrowth(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<void*> AllocateReserved(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeReserved(uintptr_t offset, size_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes a free range from both indexes; returns the next by offset.
  std::map<uintptr_t, size_t>::iterator EraseFreeRange(std::map<uintptr_t, size_t>::iterator range)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseCachedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Exhausted(size_t bytes, absl::string_view why) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const AllocatorOptions options_;

  mutable absl::Mutex mu_;
  std::unique_ptr<MemorySource> source_ ABSL_GUARDED_BY(mu_);
  // Buffers handed out: pointer -> rounded size.
  absl::flat_hash_map<void*, size_t> in_use_ ABSL_GUARDED_BY(mu_);
  int64_t in_use_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_in_use_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Growth mode: the cache, size class -> free buffers of that class.
  std::map<size_t, std::vector<void*>> cache_ ABSL_GUARDED_BY(mu_);
  // Reserve mode: the arena and its free ranges, by offset and by size.
  char* arena_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<uintptr_t, size_t> free_by_offset_ ABSL_GUARDED_BY(mu_);
  std::multimap<size_t, uintptr_t> free_by_size_ ABSL_GUARDED_BY(mu_);
};

// "12.5 MiB".
std::string FormatBytes(int64_t bytes);

}  // namespace gpu
}  // namespace psc

#endif  // PSC_COMMON_GPU_DEVICE_ALLOCATOR_H_
