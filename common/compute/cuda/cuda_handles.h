// RAII owners for the CUDA backend's handles, descriptors and buffers: each
// is move-only and destroys what it holds exactly once. Creation goes
// through the Make* functions, which return a Status naming the failed call.
// Only the CUDA backend's sources include this. Thread-compatible.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_HANDLES_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_HANDLES_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "common/compute/cuda/cuda_status.h"
#include "common/compute/cuda/staging_buffer.h"
#include "common/gpu/device_allocator.h"

namespace psc {
namespace compute {
namespace cuda {

// Owns `T` (a handle type) and calls Destroy on it once.
template <typename T, auto Destroy>
class Owned {
 public:
  Owned() = default;
  explicit Owned(T h) : h_(h) {}
  ~Owned() { Reset(); }
  Owned(Owned&& o) noexcept : h_(std::exchange(o.h_, T{})) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      Reset();
      h_ = std::exchange(o.h_, T{});
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;

  T get() const { return h_; }
  explicit operator bool() const { return h_ != T{}; }
  void Reset() {
    if (h_ != T{}) Destroy(h_);
    h_ = T{};
  }

 private:
  T h_{};
};

using CudnnHandle = Owned<cudnnHandle_t, cudnnDestroy>;
using CublasHandle = Owned<cublasHandle_t, cublasDestroy>;
using TensorDesc = Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using ActivationDesc = Owned<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;
using Stream = Owned<cudaStream_t, cudaStreamDestroy>;
using Event = Owned<cudaEvent_t, cudaEventDestroy>;
using PinnedHost = Owned<void*, cudaFreeHost>;

absl::StatusOr<TensorDesc> MakeTensorDesc();
absl::StatusOr<FilterDesc> MakeFilterDesc();
absl::StatusOr<ConvDesc> MakeConvDesc();
absl::StatusOr<ActivationDesc> MakeActivationDesc();
// A non-blocking stream on the current device.
absl::StatusOr<Stream> MakeStream();
// An event without timing, for ordering only.
absl::StatusOr<Event> MakeEvent();
absl::StatusOr<PinnedHost> MakePinnedHost(size_t bytes);
// Page-locked host memory (cudaMallocHost) for StagingBuffers: the process's
// one instance. RESOURCE_EXHAUSTED when the host has no room.
HostMemory* PinnedMemory();

// Device memory from a DeviceAllocator, returned to it on destruction. The
// allocator is shared so that a buffer may outlive the backend that made it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // RESOURCE_EXHAUSTED from the allocator.
  static absl::StatusOr<DeviceBuffer> Allocate(std::shared_ptr<gpu::DeviceAllocator> allocator,
                                               size_t bytes);
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : allocator_(std::move(o.allocator_)),
        ptr_(std::exchange(o.ptr_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      allocator_ = std::move(o.allocator_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  void Reset() {
    if (ptr_ != nullptr) allocator_->Free(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

 private:
  std::shared_ptr<gpu::DeviceAllocator> allocator_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A scratch buffer that grows to the largest size asked of it. Work queued
// on the backend's one stream may still read the old buffer when it grows;
// the allocator hands memory out again only to work on that same stream, so
// stream order keeps this safe.
class Scratch {
 public:
  // A buffer of at least `bytes`; RESOURCE_EXHAUSTED from the allocator.
  absl::StatusOr<void*> Get(const std::shared_ptr<gpu::DeviceAllocator>& allocator, size_t bytes);

 private:
  DeviceBuffer buffer_;
};

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_HANDLES_H_
