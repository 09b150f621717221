// The CUDA backend (cuda_backend.h): shape checks as in the CPU backend,
// then cuDNN, cuBLAS and the kernels of cuda_kernels.h on the device's stream.
#include "common/compute/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/compute/conv_ops.h"
#include "common/compute/cuda/cuda_batch_norm_kernels.h"
#include "common/compute/cuda/cuda_context.h"
#include "common/compute/cuda/cuda_conv.h"
#include "common/compute/cuda/cuda_conv_kernels.h"
#include "common/compute/cuda/cuda_dense_kernels.h"
#include "common/compute/cuda/cuda_elementwise_kernels.h"
#include "common/compute/cuda/cuda_embedding_kernels.h"
#include "common/compute/cuda/cuda_handles.h"
#include "common/compute/cuda/cuda_kernel_context.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_layer_norm_kernels.h"
#include "common/compute/cuda/cuda_loss_kernels.h"
#include "common/compute/cuda/cuda_mask_kernels.h"
#include "common/compute/cuda/cuda_matmul_kernels.h"
#include "common/compute/cuda/cuda_pooling_kernels.h"
#include "common/compute/cuda/cuda_rnn_kernels.h"
#include "common/compute/cuda/cuda_status.h"
#include "common/compute/cuda/staging_buffer.h"
#include "common/compute/cuda/workspace_sizes.h"
#include "common/gpu/cuda_memory.h"
#include "common/gpu/device_allocator.h"

namespace psc {
namespace compute {
namespace {

using cuda::CudaStatus;
using cuda::DeviceBuffer;
using cuda::Scratch;

constexpr int64_t kMaxElements = (int64_t{1} << 31) - 1;  // cuDNN and cuBLAS count in int
constexpr int kUploadSlots = 64;
// Reserve mode without a limit takes this share of the free memory.
constexpr double kReserveShareOfFree = 0.9;

// Device memory from the backend's allocator, zero-filled at allocation.
class CudaTensor : public DeviceTensor {
 public:
  CudaTensor(Shape shape, DType dtype, DeviceBuffer buffer)
      : DeviceTensor(std::move(shape), dtype), buffer_(std::move(buffer)) {}
  // The elements of a float32 tensor (ops check the dtype first).
  float* data() const { return buffer_.as<float>(); }
  void* raw() const { return buffer_.as<char>(); }

 private:
  DeviceBuffer buffer_;
};

const float* Data(const DeviceTensor& t) { return static_cast<const CudaTensor&>(t).data(); }
float* Data(DeviceTensor* t) { return static_cast<CudaTensor*>(t)->data(); }

// Host -> device copies staged through a ring of pinned buffers, so the copy
// is asynchronous and the caller's memory is free again on return. A slot is
// reused only after its previous copy finished (an event), which in steady
// state has long happened: a step makes about 16 uploads and the ring holds
// 64.
class UploadRing {
 public:
  absl::Status Init(int slots) {
    for (int i = 0; i < slots; ++i) {
      Slot s;
      PSC_ASSIGN_OR_RETURN(s.done, cuda::MakeEvent());
      slots_.push_back(std::move(s));
    }
    return absl::OkStatus();
  }

  absl::Status Upload(const void* src, size_t bytes, void* dst, cudaStream_t stream) {
    if (bytes == 0) return absl::OkStatus();
    Slot& s = slots_[next_];
    next_ = (next_ + 1) % slots_.size();
    if (s.pending) PSC_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(s.done.get()));
    s.pending = false;
    // A failed growth leaves the slot empty (staging_buffer.h), never a
    // stale size over a null buffer.
    PSC_ASSIGN_OR_RETURN(void* host, s.host.Get(bytes));
    std::memcpy(host, src, bytes);
    PSC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream));
    PSC_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.done.get(), stream));
    s.pending = true;
    return absl::OkStatus();
  }

 private:
  struct Slot {
    cuda::StagingBuffer host{cuda::PinnedMemory()};
    cuda::Event done;
    bool pending = false;
  };
  std::vector<Slot> slots_;
  size_t next_ = 0;
};

class CudaBackend : public ComputeBackend, public cuda::CudaKernelContext {
 public:
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);

  ~CudaBackend() override {
    // Let queued work finish before its buffers and handles go.
    if (stream_) {
      cudaSetDevice(options_.device);
      cudaStreamSynchronize(stream_.get());
    }
  }

  std::string name() const override { return name_; }

  // Every dimension at least 1, and an input cuDNN, cuBLAS and our kernels
  // can count (in int).
  bool ShapesFit(const OpSpec& spec) const override {
    return ComputeBackend::ShapesFit(spec) && ShapeSize(spec.input) <= kMaxElements;
  }

  absl::StatusOr<std::unique_ptr<DeviceTensor>> AllocateTensor(const Shape& shape,
                                                               DType dtype) override {
    PSC_RETURN_IF_ERROR(Enter());
    // Allocate checked that the count of bytes fits.
    const size_t bytes = static_cast<size_t>(ShapeSize(shape)) * DTypeSize(dtype);
    PSC_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(allocator_, bytes));
    if (bytes > 0) {
      PSC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffer.get(), 0, bytes, stream_.get()));
    }
    return std::unique_ptr<DeviceTensor>(
        std::make_unique<CudaTensor>(shape, dtype, std::move(buffer)));
  }

  absl::Status CopyBytesFromHost(const void* src, size_t bytes, DeviceTensor* dst) override {
    PSC_RETURN_IF_ERROR(Enter());
    return uploads_.Upload(src, bytes, static_cast<CudaTensor*>(dst)->raw(), stream_.get());
  }

  absl::Status CopyBytesToHost(const DeviceTensor& src, void* dst, size_t bytes) override {
    PSC_RETURN_IF_ERROR(Enter());
    PSC_ASSIGN_OR_RETURN(void* host, download_.Get(bytes));
    PSC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, static_cast<const CudaTensor&>(src).raw(), bytes,
                                             cudaMemcpyDeviceToHost, stream_.get()));
    PSC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    std::memcpy(dst, host, bytes);
    return absl::OkStatus();
  }

  // The tensors are gathered on the device into one buffer (device-to-device
  // copies, queued), which comes to the pinned staging buffer in one copy,
  // with one wait; then each part goes to its destination.
  absl::Status CopyManyToHost(absl::Span<const DeviceTensor* const> src,
                              absl::Span<const absl::Span<float>> dst) override {
    PSC_RETURN_IF_ERROR(CheckCopyMany(src, dst));
    size_t total = 0;
    for (const DeviceTensor* t : src) total += static_cast<size_t>(t->size());  // each < 2^31
    if (total == 0) return absl::OkStatus();
    if (src.size() == 1) return CopyToHost(*src[0], dst[0]);
    PSC_RETURN_IF_ERROR(Enter());
    const size_t bytes = total * sizeof(float);
    PSC_ASSIGN_OR_RETURN(void* gathered, gather_.Get(allocator_, bytes));
    size_t offset = 0;
    for (const DeviceTensor* t : src) {
      const size_t n = static_cast<size_t>(t->size()) * sizeof(float);
      if (n == 0) continue;
      PSC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(static_cast<char*>(gathered) + offset, Data(*t), n,
                                               cudaMemcpyDeviceToDevice, stream_.get()));
      offset += n;
    }
    PSC_ASSIGN_OR_RETURN(void* host, download_.Get(bytes));
    PSC_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host, gathered, bytes, cudaMemcpyDeviceToHost, stream_.get()));
    PSC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    offset = 0;
    for (size_t i = 0; i < src.size(); ++i) {
      const size_t n = dst[i].size() * sizeof(float);
      if (n > 0) std::memcpy(dst[i].data(), static_cast<const char*>(host) + offset, n);
      offset += n;
    }
    return absl::OkStatus();
  }

  // Chooses the convolution algorithms of these shapes (and windows) now.
  absl::Status Prepare(absl::Span<const OpSpec> specs) override {
    PSC_RETURN_IF_ERROR(Enter());
    for (const OpSpec& spec : specs) {
      cuda::ConvDirection d;
      if (spec.op == conv::kConv2D) {
        d = cuda::ConvDirection::kForward;
      } else if (spec.op == conv::kConv2DBackwardData) {
        d = cuda::ConvDirection::kBackwardData;
      } else if (spec.op == conv::kConv2DBackwardWeights) {
        d = cuda::ConvDirection::kBackwardFilter;
      } else {
        continue;  // nothing to plan
      }
      absl::StatusOr<cuda::ConvShape> s = cuda::ConvShapeOf(spec);
      if (!s.ok() || !Supports(spec)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Prepare: ", spec.op, " of input ", ShapeText(spec.input), " and kernel ",
            ShapeText(spec.kernel), " over ", spec.window.Text(), " is not a shape this runs",
            s.ok() ? "" : absl::StrCat(": ", s.status().message())));
      }
      absl::Status planned = conv_->Plan(*s, d);
      // Autotune's Find needs scratch operands; where the cap has no room for
      // them now, the shape is timed on its first run, on its own buffers.
      if (options_.cudnn_autotune && absl::IsResourceExhausted(planned)) continue;
      PSC_RETURN_IF_ERROR(planned);
    }
    return absl::OkStatus();
  }

  // The checks of one of our kernels' ops over `t`: within 2^31 elements,
  // and the device entered.
  absl::Status Elementwise(const char* op, const DeviceTensor& t) override {
    if (t.size() > kMaxElements) {
      return absl::UnimplementedError(
          absl::StrCat(op, ": ", ShapeText(t.shape()), " has over 2^31 elements"));
    }
    return Enter();
  }

  absl::Status Synchronize() {
    PSC_RETURN_IF_ERROR(Enter());
    PSC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    return absl::OkStatus();
  }

  CudaMemoryStats MemoryStats() const {
    const gpu::AllocatorStats a = allocator_->stats();
    return {a.in_use_bytes, a.held_bytes, a.peak_in_use_bytes, a.limit_bytes};
  }

  int device() const { return options_.device; }
  cudaStream_t stream() const override { return stream_.get(); }
  float* DataOf(const DeviceTensor& t) const override { return const_cast<float*>(Data(t)); }
  void* MemoryOf(const DeviceTensor& t) const override {
    return static_cast<const CudaTensor&>(t).raw();
  }
  absl::StatusOr<void*> KernelScratch(size_t bytes) override {
    return kernel_scratch_.Get(allocator_, bytes);
  }
  const KernelRegistry& kernels() const override { return kernels_; }
  cublasHandle_t cublas() const override { return cublas_.get(); }
  cudnnHandle_t cudnn() const override { return cudnn_.get(); }
  absl::Status ColumnSums(const float* x, int64_t rows, int64_t cols, float* out) override {
    return BiasGradient(x, rows, cols, out);
  }
  const std::shared_ptr<gpu::DeviceAllocator>& allocator() const { return allocator_; }
  std::vector<std::string> DescribeConvAlgorithms() const { return conv_->DescribeAll(); }
  absl::Status Enter() override {
    PSC_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    return absl::OkStatus();
  }
  // Scratch for the parts a reduction copies in from another GPU.
  Scratch& peer_scratch() { return peer_scratch_; }
  cudaEvent_t reduce_event() const { return reduce_event_.get(); }

 private:
  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {}

  absl::Status Init();

  // db [cols] = the column sums of dy [rows, cols].
  absl::Status BiasGradient(const float* dy, int64_t rows, int64_t cols, float* db) {
    PSC_ASSIGN_OR_RETURN(void* partial, partials_.Get(allocator_, cuda::ColumnSumParts(rows) *
                                                                      cols * sizeof(float)));
    PSC_CUDA_RETURN_IF_ERROR(
        cuda::ColumnSums(dy, rows, cols, static_cast<float*>(partial), db, stream_.get()));
    return absl::OkStatus();
  }

  // Declared in destruction order's reverse: buffers go back to the
  // allocator before it goes, handles before the stream they use.
  const CudaBackendOptions options_;
  std::string name_;
  std::shared_ptr<gpu::DeviceAllocator> allocator_;
  cuda::Stream stream_;
  cuda::CudnnHandle cudnn_;
  cuda::CublasHandle cublas_;
  DeviceBuffer cublas_workspace_;
  cuda::Event reduce_event_;
  cuda::CudaContext context_;
  std::shared_ptr<cuda::CudaConv> conv_;  // the convolution kernels'; Prepare plans it
  UploadRing uploads_;
  cuda::StagingBuffer download_{cuda::PinnedMemory()};
  Scratch partials_, peer_scratch_, gather_, kernel_scratch_;
  KernelRegistry kernels_;
};

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaBackendOptions& o) {
  if (o.logical_count < 1 || o.logical_index < 0 || o.logical_index >= o.logical_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA backend: logical device ", o.logical_index, " of ", o.logical_count));
  }
  if (o.memory_limit_bytes < 0 || o.conv_workspace_limit_bytes < 0) {
    return absl::InvalidArgumentError("CUDA backend: memory limits must not be negative");
  }
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "no usable GPU: cudaGetDeviceCount: ", cudaGetErrorName(e), ": ", cudaGetErrorString(e)));
  }
  if (count == 0) return absl::FailedPreconditionError("no usable GPU: no CUDA device found");
  if (o.device < 0 || o.device >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("no GPU ", o.device, ": this machine has GPUs 0..", count - 1));
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend(o));
  PSC_RETURN_IF_ERROR(b->Init());
  return b;
}

absl::Status CudaBackend::Init() {
  const CudaBackendOptions& o = options_;
  name_ = o.logical_count > 1 ? absl::StrCat("gpu:", o.device, ".", o.logical_index, ":cudnn")
                              : absl::StrCat("gpu:", o.device, ":cudnn");
  PSC_RETURN_IF_ERROR(Enter());
  PSC_ASSIGN_OR_RETURN(stream_, cuda::MakeStream());
  {
    cudnnHandle_t h = nullptr;
    PSC_CUDNN_RETURN_IF_ERROR(cudnnCreate(&h));
    cudnn_ = cuda::CudnnHandle(h);
  }
  PSC_CUDNN_RETURN_IF_ERROR(cudnnSetStream(cudnn_.get(), stream_.get()));
  {
    cublasHandle_t h = nullptr;
    PSC_CUBLAS_RETURN_IF_ERROR(cublasCreate(&h));
    cublas_ = cuda::CublasHandle(h);
  }
  PSC_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_.get(), stream_.get()));
  PSC_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(
      cublas_.get(), o.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));

  // The allocator comes after the handles, so reserve mode's share of the
  // free memory leaves room for what they took.
  gpu::AllocatorOptions a;
  a.device_name = o.logical_count > 1 ? absl::StrCat("GPU:", o.device, " (logical device ",
                                                     o.logical_index, " of ", o.logical_count, ")")
                                      : absl::StrCat("GPU:", o.device);
  a.growth = o.memory_growth;
  a.limit_bytes = o.memory_limit_bytes;
  if (!a.growth && a.limit_bytes == 0) {
    PSC_ASSIGN_OR_RETURN(gpu::DeviceMemory mem, gpu::GetDeviceMemory(o.device));
    a.limit_bytes =
        static_cast<int64_t>(static_cast<double>(mem.free_bytes) * kReserveShareOfFree) /
        (2 << 20) * (2 << 20);
  }
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<gpu::MemorySource> source,
                       gpu::NewCudaMemorySource(o.device));
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<gpu::DeviceAllocator> allocator,
                       gpu::DeviceAllocator::Create(a, std::move(source)));
  allocator_ = std::move(allocator);

  // cuBLAS's workspace from our allocator, so the cap covers it too; its
  // size as the cuBLAS guide recommends for the architecture.
  int cc_major = 0;
  PSC_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, o.device));
  PSC_ASSIGN_OR_RETURN(cublas_workspace_,
                       DeviceBuffer::Allocate(allocator_, cuda::CublasWorkspaceBytes(cc_major)));
  PSC_CUBLAS_RETURN_IF_ERROR(
      cublasSetWorkspace(cublas_.get(), cublas_workspace_.get(), cublas_workspace_.bytes()));

  PSC_ASSIGN_OR_RETURN(reduce_event_, cuda::MakeEvent());
  PSC_RETURN_IF_ERROR(uploads_.Init(kUploadSlots));

  context_.device = o.device;
  context_.stream = stream_.get();
  context_.cudnn = cudnn_.get();
  context_.cublas = cublas_.get();
  context_.allocator = allocator_;
  context_.allow_tf32 = o.allow_tf32;
  context_.conv_workspace_limit = static_cast<size_t>(o.conv_workspace_limit_bytes);
  context_.autotune = o.cudnn_autotune;
  PSC_RETURN_IF_ERROR(cuda::RegisterCudaElementwiseKernels(this, &kernels_));
  PSC_RETURN_IF_ERROR(cuda::RegisterCudaPoolingKernels(this, &kernels_));
  PSC_RETURN_IF_ERROR(cuda::RegisterCudaBatchNormKernels(this, &kernels_));
  PSC_RETURN_IF_ERROR(cuda::RegisterCudaLayerNormKernels(this, &kernels_));
  PSC_RETURN_IF_ERROR(cuda::RegisterCudaRnnKernels(this, &kernels_));
  PSC_RETURN_IF_ERROR(cuda::RegisterCudaMaskKernels(this, &kernels_));
  PSC_RETURN_IF_ERROR(cuda::RegisterCudaDenseKernels(this, &kernels_));
  PSC_RETURN_IF_ERROR(cuda::RegisterCudaLossKernels(this, &kernels_));
  PSC_RETURN_IF_ERROR(cuda::RegisterCudaEmbeddingKernels(this, &kernels_));
  PSC_RETURN_IF_ERROR(cuda::RegisterCudaMatMulKernels(this, &kernels_));
  PSC_ASSIGN_OR_RETURN(conv_, cuda::RegisterCudaConvKernels(this, &context_, &kernels_));
  return absl::OkStatus();
}

CudaBackend* AsCuda(ComputeBackend* backend) { return dynamic_cast<CudaBackend*>(backend); }
CudaTensor* AsCudaTensor(DeviceTensor* tensor) { return dynamic_cast<CudaTensor*>(tensor); }

}  // namespace

bool CudaBackendBuilt() { return true; }

absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCudaBackend(
    const CudaBackendOptions& options) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::Create(options));
  return std::unique_ptr<ComputeBackend>(std::move(b));
}

absl::StatusOr<CudaMemoryStats> GetCudaMemoryStats(const ComputeBackend& backend) {
  const auto* b = dynamic_cast<const CudaBackend*>(&backend);
  if (b == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(backend.name(), " is not a CUDA backend"));
  }
  return b->MemoryStats();
}

absl::StatusOr<std::vector<std::string>> DescribeCudaConvAlgorithms(const ComputeBackend& backend) {
  const auto* b = dynamic_cast<const CudaBackend*>(&backend);
  if (b == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(backend.name(), " is not a CUDA backend"));
  }
  return b->DescribeConvAlgorithms();
}

absl::Status SynchronizeCudaBackend(ComputeBackend* backend) {
  CudaBackend* b = AsCuda(backend);
  if (b == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(backend->name(), " is not a CUDA backend"));
  }
  return b->Synchronize();
}

absl::Status ReduceIntoOnDevice(ComputeBackend* sum_backend, const std::vector<DeviceTensor*>& sums,
                                const std::vector<ComputeBackend*>& parts_backends,
                                const std::vector<std::vector<const DeviceTensor*>>& parts) {
  CudaBackend* sum = AsCuda(sum_backend);
  if (sum == nullptr) return absl::InvalidArgumentError("ReduceIntoOnDevice: not a CUDA backend");
  if (parts_backends.size() != parts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("ReduceIntoOnDevice: ", parts_backends.size(),
                                                   " backends for ", parts.size(), " parts"));
  }
  for (size_t r = 0; r < parts.size(); ++r) {
    CudaBackend* part = AsCuda(parts_backends[r]);
    if (part == nullptr)
      return absl::InvalidArgumentError("ReduceIntoOnDevice: not a CUDA backend");
    if (parts[r].size() != sums.size()) {
      return absl::InvalidArgumentError(absl::StrCat("ReduceIntoOnDevice: replica ", r, " has ",
                                                     parts[r].size(), " tensors, want ",
                                                     sums.size()));
    }
    for (size_t i = 0; i < sums.size(); ++i) {
      PSC_RETURN_IF_ERROR(WantShape("ReduceIntoOnDevice", "part", *parts[r][i], sums[i]->shape()));
    }
    // The sum's stream waits for the part's queued work (its gradients).
    PSC_RETURN_IF_ERROR(part->Enter());
    PSC_CUDA_RETURN_IF_ERROR(cudaEventRecord(part->reduce_event(), part->stream()));
    PSC_RETURN_IF_ERROR(sum->Enter());
    PSC_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(sum->stream(), part->reduce_event(), 0));
    for (size_t i = 0; i < sums.size(); ++i) {
      const float* src = Data(*parts[r][i]);
      const int64_t n = sums[i]->size();
      if (part->device() != sum->device()) {  // another GPU: copy it over first
        PSC_ASSIGN_OR_RETURN(void* staged,
                             sum->peer_scratch().Get(sum->allocator(), n * sizeof(float)));
        PSC_CUDA_RETURN_IF_ERROR(cudaMemcpyPeerAsync(staged, sum->device(), src, part->device(),
                                                     n * sizeof(float), sum->stream()));
        src = static_cast<const float*>(staged);
      }
      PSC_CUDA_RETURN_IF_ERROR(cuda::AddInto(Data(sums[i]), src, n, sum->stream()));
    }
    // The part's next writes wait until the sum has read it.
    PSC_CUDA_RETURN_IF_ERROR(cudaEventRecord(sum->reduce_event(), sum->stream()));
    PSC_RETURN_IF_ERROR(part->Enter());
    PSC_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(part->stream(), sum->reduce_event(), 0));
  }
  return absl::OkStatus();
}

absl::StatusOr<CudaQueue> GetCudaQueue(ComputeBackend* backend) {
  CudaBackend* b = AsCuda(backend);
  if (b == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(backend->name(), " is not a CUDA backend"));
  }
  return CudaQueue{b->device(), static_cast<void*>(b->stream())};
}

absl::StatusOr<float*> CudaTensorData(DeviceTensor* tensor) {
  CudaTensor* t = AsCudaTensor(tensor);
  if (t == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor of shape ", ShapeText(tensor->shape()), " is not a CUDA tensor"));
  }
  return t->data();
}

absl::Status ScaleOnDevice(ComputeBackend* backend, const std::vector<DeviceTensor*>& tensors,
                           float factor) {
  CudaBackend* b = AsCuda(backend);
  if (b == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("ScaleOnDevice: ", backend->name(), " is not a CUDA backend"));
  }
  for (DeviceTensor* t : tensors) {
    if (AsCudaTensor(t) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ScaleOnDevice: tensor of shape ", ShapeText(t->shape()), " is not a CUDA tensor"));
    }
    if (t->size() > kMaxElements) {  // cuBLAS counts in int
      return absl::UnimplementedError(
          absl::StrCat("ScaleOnDevice: ", ShapeText(t->shape()), " has over 2^31 elements"));
    }
  }
  if (factor == 1.0f) return absl::OkStatus();  // x * 1 is x
  PSC_RETURN_IF_ERROR(b->Enter());
  for (DeviceTensor* t : tensors) {
    const int64_t n = t->size();
    if (n == 0) continue;
    if (factor == 0.0f) {  // NaN * 0 would stay NaN
      PSC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(Data(t), 0, n * sizeof(float), b->stream()));
    } else {
      // The handle is bound to the backend's stream, in host pointer mode.
      PSC_CUBLAS_RETURN_IF_ERROR(
          cublasSscal(b->cublas(), static_cast<int>(n), &factor, Data(t), 1));
    }
  }
  return absl::OkStatus();
}

}  // namespace compute
}  // namespace psc
