#include "common/compute/cuda/cuda_handles.h"

namespace psc {
namespace compute {
namespace cuda {

absl::StatusOr<TensorDesc> MakeTensorDesc() {
  cudnnTensorDescriptor_t d = nullptr;
  PSC_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&d));
  return TensorDesc(d);
}

absl::StatusOr<FilterDesc> MakeFilterDesc() {
  cudnnFilterDescriptor_t d = nullptr;
  PSC_CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&d));
  return FilterDesc(d);
}

absl::StatusOr<ConvDesc> MakeConvDesc() {
  cudnnConvolutionDescriptor_t d = nullptr;
  PSC_CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(&d));
  return ConvDesc(d);
}

absl::StatusOr<ActivationDesc> MakeActivationDesc() {
  cudnnActivationDescriptor_t d = nullptr;
  PSC_CUDNN_RETURN_IF_ERROR(cudnnCreateActivationDescriptor(&d));
  return ActivationDesc(d);
}

absl::StatusOr<Stream> MakeStream() {
  cudaStream_t s = nullptr;
  PSC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

absl::StatusOr<Event> MakeEvent() {
  cudaEvent_t e = nullptr;
  PSC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return Event(e);
}

absl::StatusOr<PinnedHost> MakePinnedHost(size_t bytes) {
  void* p = nullptr;
  PSC_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, bytes));
  return PinnedHost(p);
}

namespace {

class PinnedHostMemory : public HostMemory {
 public:
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* p = nullptr;
    PSC_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, bytes));
    return p;
  }
  void Free(void* ptr) override { cudaFreeHost(ptr); }
};

}  // namespace

HostMemory* PinnedMemory() {
  static PinnedHostMemory* const memory = new PinnedHostMemory();
  return memory;
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(std::shared_ptr<gpu::DeviceAllocator> allocator,
                                                    size_t bytes) {
  PSC_ASSIGN_OR_RETURN(void* p, allocator->Allocate(bytes));
  DeviceBuffer b;
  b.allocator_ = std::move(allocator);
  b.ptr_ = p;
  b.bytes_ = bytes;
  return b;
}

absl::StatusOr<void*> Scratch::Get(const std::shared_ptr<gpu::DeviceAllocator>& allocator,
                                   size_t bytes) {
  if (buffer_.get() != nullptr && buffer_.bytes() >= bytes) return buffer_.get();
  buffer_.Reset();  // first, so that the cap has room for the larger one
  PSC_ASSIGN_OR_RETURN(buffer_, DeviceBuffer::Allocate(allocator, bytes));
  return buffer_.get();
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
