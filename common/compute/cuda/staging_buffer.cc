#include "common/compute/cuda/staging_buffer.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace cuda {

StagingBuffer::StagingBuffer(StagingBuffer&& o) noexcept
    : memory_(o.memory_),
      data_(std::exchange(o.data_, nullptr)),
      capacity_(std::exchange(o.capacity_, 0)) {}

StagingBuffer& StagingBuffer::operator=(StagingBuffer&& o) noexcept {
  if (this != &o) {
    Release();
    memory_ = o.memory_;
    data_ = std::exchange(o.data_, nullptr);
    capacity_ = std::exchange(o.capacity_, 0);
  }
  return *this;
}

void StagingBuffer::Release() {
  if (data_ != nullptr) memory_->Free(data_);
  data_ = nullptr;
  capacity_ = 0;
}

absl::StatusOr<void*> StagingBuffer::Get(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("StagingBuffer: a buffer of 0 bytes");
  if (data_ != nullptr && capacity_ >= bytes) return data_;
  const size_t want =
      std::max({bytes, capacity_ > ~size_t{0} / 2 ? bytes : 2 * capacity_, kMinBytes});
  Release();  // first: the old one is too small either way, and its room may be needed
  PSC_ASSIGN_OR_RETURN(void* p, memory_->Allocate(want));
  data_ = p;
  capacity_ = want;
  return data_;
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
