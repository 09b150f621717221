// Host staging memory for the CUDA backend's copies (pinned, so copies are
// asynchronous and fast), as plain C++: the memory comes from a HostMemory
// (cudaMallocHost in production, cuda_handles.h; malloc with injected
// failures in the tests), so the growth and failure rules are unit-tested
// without a GPU.
#ifndef PSC_COMMON_COMPUTE_CUDA_STAGING_BUFFER_H_
#define PSC_COMMON_COMPUTE_CUDA_STAGING_BUFFER_H_

#include <cstddef>

#include "absl/status/statusor.h"

namespace psc {
namespace compute {
namespace cuda {

class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // `bytes` > 0. RESOURCE_EXHAUSTED when there is no room.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
};

// A buffer that grows to what is asked of it. Move-only; thread-compatible.
class StagingBuffer {
 public:
  static constexpr size_t kMinBytes = 4096;

  // `memory` is not owned and outlives the buffer.
  explicit StagingBuffer(HostMemory* memory) : memory_(memory) {}
  ~StagingBuffer() { Release(); }
  StagingBuffer(StagingBuffer&& o) noexcept;
  StagingBuffer& operator=(StagingBuffer&& o) noexcept;
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  // At least `bytes` (> 0) of memory. A smaller buffer is replaced by one of
  // max(bytes, twice the old, kMinBytes). If that allocation fails, the
  // buffer is left empty (no memory, capacity 0: nothing can write through
  // a stale pointer or trust a stale size) and the next call tries again.
  absl::StatusOr<void*> Get(size_t bytes);

  void* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  void Release();

  HostMemory* memory_;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_STAGING_BUFFER_H_
