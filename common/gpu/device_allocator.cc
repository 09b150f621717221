#include "common/gpu/device_allocator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_context.h"

namespace psc {
namespace gpu {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

size_t RoundUp(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

}  // namespace

std::string FormatBytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) {
    return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  }
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / kMiB);
}

size_t DeviceAllocator::GrowthSizeClass(size_t bytes) {
  if (bytes > kMiB) return RoundUp(bytes, 2 * kMiB);
  size_t c = 512;
  while (c < bytes) c *= 2;
  return c;
}

DeviceAllocator::DeviceAllocator(AllocatorOptions options, std::unique_ptr<MemorySource> source)
    : options_(std::move(options)), source_(std::move(source)) {}

absl::StatusOr<std::unique_ptr<DeviceAllocator>> DeviceAllocator::Create(
    AllocatorOptions options, std::unique_ptr<MemorySource> source) {
  if (source == nullptr) return absl::InvalidArgumentError("DeviceAllocator: no memory source");
  if (options.limit_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.device_name, ": the memory limit must not be negative, not ", options.limit_bytes));
  }
  if (!options.growth && options.limit_bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.device_name, ": reserve mode needs the size to reserve"));
  }
  std::unique_ptr<DeviceAllocator> a(new DeviceAllocator(std::move(options), std::move(source)));
  if (!a->options_.growth) {
    absl::MutexLock lock(&a->mu_);
    const size_t size = RoundUp(static_cast<size_t>(a->options_.limit_bytes), kAlignment);
    absl::StatusOr<void*> arena = a->source_->Allocate(size);
    if (!arena.ok()) {
      return base::Prefix(arena.status(), absl::StrCat(a->options_.device_name, ": cannot reserve ",
                                                       FormatBytes(size), " at start"));
    }
    a->arena_ = static_cast<char*>(*arena);
    a->held_bytes_ = static_cast<int64_t>(size);
    a->free_by_offset_.emplace(0, size);
    a->free_by_size_.emplace(size, 0);
  }
  return a;
}

DeviceAllocator::~DeviceAllocator() {
  absl::MutexLock lock(&mu_);
  if (arena_ != nullptr) {
    source_->Free(arena_);
    return;
  }
  ReleaseCachedLocked();
  for (const auto& [ptr, size] : in_use_) source_->Free(ptr);
}

absl::StatusOr<void*> DeviceAllocator::Allocate(size_t bytes) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<void*> p = options_.growth ? AllocateGrowth(bytes) : AllocateReserved(bytes);
  if (p.ok()) peak_in_use_bytes_ = std::max(peak_in_use_bytes_, in_use_bytes_);
  return p;
}

absl::StatusOr<void*> DeviceAllocator::AllocateGrowth(size_t bytes) {
  const size_t size = GrowthSizeClass(bytes);
  void* ptr = nullptr;
  auto cached = cache_.find(size);
  if (cached != cache_.end() && !cached->second.empty()) {
    ptr = cached->second.back();
    cached->second.pop_back();
  } else {
    const int64_t limit = options_.limit_bytes;
    if (limit > 0 && held_bytes_ + static_cast<int64_t>(size) > limit) ReleaseCachedLocked();
    if (limit > 0 && held_bytes_ + static_cast<int64_t>(size) > limit) {
      return Exhausted(bytes,
                       absl::StrCat("it would exceed the memory limit of ", FormatBytes(limit)));
    }
    absl::StatusOr<void*> fresh = source_->Allocate(size);
    if (!fresh.ok() && absl::IsResourceExhausted(fresh.status())) {
      ReleaseCachedLocked();  // the device is full: give the cache back and try once more
      fresh = source_->Allocate(size);
    }
    if (!fresh.ok()) {
      if (absl::IsResourceExhausted(fresh.status())) {
        return Exhausted(bytes,
                         absl::StrCat("the device has no room (", fresh.status().message(), ")"));
      }
      return base::Prefix(fresh.status(),
                          absl::StrCat(options_.device_name, ": allocating ", FormatBytes(size)));
    }
    ptr = *fresh;
    held_bytes_ += static_cast<int64_t>(size);
  }
  in_use_.emplace(ptr, size);
  in_use_bytes_ += static_cast<int64_t>(size);
  return ptr;
}

absl::StatusOr<void*> DeviceAllocator::AllocateReserved(size_t bytes) {
  const size_t size = RoundUp(std::max<size_t>(bytes, 1), kAlignment);
  auto best = free_by_size_.lower_bound(size);
  if (best == free_by_size_.end()) {
    const size_t largest = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
    return Exhausted(bytes, absl::StrCat("the reserved ", FormatBytes(options_.limit_bytes),
                                         " has no free range that large (largest ",
                                         FormatBytes(static_cast<int64_t>(largest)), ")"));
  }
  const size_t range = best->first;
  const uintptr_t offset = best->second;
  free_by_size_.erase(best);
  free_by_offset_.erase(offset);
  if (range > size) {
    free_by_offset_.emplace(offset + size, range - size);
    free_by_size_.emplace(range - size, offset + size);
  }
  void* ptr = arena_ + offset;
  in_use_.emplace(ptr, size);
  in_use_bytes_ += static_cast<int64_t>(size);
  return ptr;
}

void DeviceAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  absl::MutexLock lock(&mu_);
  auto it = in_use_.find(ptr);
  if (it == in_use_.end()) return;  // not ours, or freed twice: a bug, but never a crash here
  const size_t size = it->second;
  in_use_.erase(it);
  in_use_bytes_ -= static_cast<int64_t>(size);
  if (arena_ != nullptr) {
    FreeReserved(static_cast<char*>(ptr) - arena_, size);
  } else {
    cache_[size].push_back(ptr);
  }
}

std::map<uintptr_t, size_t>::iterator DeviceAllocator::EraseFreeRange(
    std::map<uintptr_t, size_t>::iterator range) {
  auto [first, last] = free_by_size_.equal_range(range->second);
  for (auto s = first; s != last; ++s) {
    if (s->second == range->first) {
      free_by_size_.erase(s);
      break;
    }
  }
  return free_by_offset_.erase(range);
}

void DeviceAllocator::FreeReserved(uintptr_t offset, size_t size) {
  auto next = free_by_offset_.lower_bound(offset);
  if (next != free_by_offset_.end() && next->first == offset + size) {
    size += next->second;
    next = EraseFreeRange(next);
  }
  if (next != free_by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      EraseFreeRange(prev);
    }
  }
  free_by_offset_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
}

void DeviceAllocator::ReleaseCached() {
  absl::MutexLock lock(&mu_);
  ReleaseCachedLocked();
}

void DeviceAllocator::ReleaseCachedLocked() {
  for (auto& [size, ptrs] : cache_) {
    for (void* p : ptrs) {
      source_->Free(p);
      held_bytes_ -= static_cast<int64_t>(size);
    }
  }
  cache_.clear();
}

absl::Status DeviceAllocator::Exhausted(size_t bytes, absl::string_view why) const {
  return absl::ResourceExhaustedError(
      absl::StrCat(options_.device_name, ": out of memory: allocating ",
                   FormatBytes(static_cast<int64_t>(bytes)), " failed because ", why, "; in use ",
                   FormatBytes(in_use_bytes_), " in ", in_use_.size(), " buffers, held ",
                   FormatBytes(held_bytes_),
                   ". Give the device a higher memory limit or train a smaller batch"));
}

AllocatorStats DeviceAllocator::stats() const {
  absl::MutexLock lock(&mu_);
  AllocatorStats s;
  s.in_use_bytes = in_use_bytes_;
  s.held_bytes = held_bytes_;
  s.peak_in_use_bytes = peak_in_use_bytes_;
  s.limit_bytes = options_.limit_bytes;
  s.allocations = static_cast<int64_t>(in_use_.size());
  return s;
}

}  // namespace gpu
}  // namespace psc
