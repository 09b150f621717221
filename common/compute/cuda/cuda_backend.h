// The GPU backend: ComputeBackend (backend.h) on cuDNN and cuBLAS, for one
// logical device: one GPU, or one of the N virtual devices a GPU is split
// into (each with its own stream, handles and capped allocator).
//
//   convolutions   cuDNN's legacy API, any kernel, strides and padding, the
//                  algorithm chosen once per shape and window by a fixed rule
//                  (algorithm_choice.h, cuda_conv.h); asymmetric "same"
//                  padding, which cuDNN's symmetric padding cannot express,
//                  made explicit (conv_padding.h); bias and ReLU fused in one
//                  kernel after it
//   dense layers   cuBLAS SGEMM (default math), the same bias+ReLU kernel
//   pooling        max and average over any window (cuda_kernels.h): cuDNN's
//                  pooling has neither asymmetric padding nor the contract's
//                  tie rule (the first maximum); the backward passes gather,
//                  each input element summing the windows that hold it
//   batch norm     kernels, the per-channel sums in a fixed order in double
//   ReLU backward  cudnnActivationBackward
//   bias gradient, softmax cross-entropy: deterministic kernels (cuda_kernels.h)
//
// Numerics: float32 with TF32 off unless allow_tf32 (cuDNN keeps only
// CUDNN_FMA_MATH algorithms; cuBLAS runs CUBLAS_DEFAULT_MATH, which for
// float32 is full precision), and only deterministic algorithms. The
// convolution algorithms are chosen by cuDNN's heuristic ranking, not by
// timing, so two backends (two processes, workers, runs or virtual devices)
// on the same GPU model with the same cuDNN, shapes and options compute
// bit-identical gradients. With cudnn_autotune the ranking is cudnnFind's
// measured one: possibly faster, but then near-tied algorithms can differ
// between backends and so can the last bits of the gradients.
//
// Synchronization: every op is queued on the device's stream and returns
// without waiting, except CopyToHost and CopyManyToHost (the host reads the
// data; the latter once for all its tensors): a training step waits when
// the executor reads the loss's totals. CopyFromHost stages through pinned buffers, so it
// does not wait either. Prepare plans convolution shapes up front; a shape
// not prepared is planned on its first call (with autotune, that call waits
// while cuDNN times its algorithms).
//
// Memory: every buffer, workspace included, comes from the device's
// DeviceAllocator (common/gpu/device_allocator.h): growth or reserve mode,
// capped by memory_limit_bytes; running out is RESOURCE_EXHAUSTED naming the
// device and the limit. Tensors must not be used after their backend is gone
// (destroying them afterwards is safe).
//
// This header is CUDA-free, but its definitions are built only into the GPU
// plugin (libpsc_cuda_plugin.so): the rest of pscluster reaches them through
// gpu::GpuApi (gpu_plugin/gpu_api.h), which forwards each call to the
// function of the same name here.
// Thread-compatible (see backend.h); different backends may run on
// different threads at once.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_BACKEND_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/compute/backend.h"
#include "common/compute/cuda/cuda_types.h"

namespace psc {
namespace compute {

// A backend on the logical device `options` names. Errors:
//   FAILED_PRECONDITION no usable GPU (no driver, driver too old, no device,
//                       no such ordinal, cuDNN or cuBLAS not built for this
//                       GPU or driver), the message naming the library's reason
//   INVALID_ARGUMENT    bad options (negative limit, logical_index out of range)
//   RESOURCE_EXHAUSTED  reserve mode cannot take its memory
//   INTERNAL            a CUDA, cuDNN or cuBLAS call failed (named)
absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCudaBackend(
    const CudaBackendOptions& options);

// INVALID_ARGUMENT for a backend CreateCudaBackend did not make.
absl::StatusOr<CudaMemoryStats> GetCudaMemoryStats(const ComputeBackend& backend);

// Each convolution shape (and window) the backend has planned and the
// algorithm of each direction ("x [64,28,28,1] -> 32, 3x3/1 same: fwd NHWC
// algo 1 (FMA, 0 bytes workspace); ..."; "explicit padding; " first where
// the window's padding is asymmetric). INVALID_ARGUMENT for a backend
// CreateCudaBackend did not make.
absl::StatusOr<std::vector<std::string>> DescribeCudaConvAlgorithms(const ComputeBackend& backend);

// Waits for everything queued on a CUDA backend's stream (benchmarks,
// tests). INVALID_ARGUMENT for another backend.
absl::Status SynchronizeCudaBackend(ComputeBackend* backend);

// The local reduction of mirrored replicas: for each i, sums[i] (on
// `sum_backend`) += each parts[r][i] (on parts_backends[r], another logical
// device, possibly of another GPU), in replica order, by device-to-device
// copies into sum_backend's memory and the AddInto kernel. Shapes must match
// (INVALID_ARGUMENT). Queued on sum_backend's stream after the parts'
// streams' queued work; returns without waiting. All backends must be CUDA
// backends.
absl::Status ReduceIntoOnDevice(ComputeBackend* sum_backend, const std::vector<DeviceTensor*>& sums,
                                const std::vector<ComputeBackend*>& parts_backends,
                                const std::vector<std::vector<const DeviceTensor*>>& parts);

// Where a CUDA backend queues its work (CudaQueue). For code that queues its own device work in
// order with the backend's (the NCCL all-reduce of mirrored replicas, nccl_collective.h); the
// stream belongs to the backend and lives as long as it. INVALID_ARGUMENT for another backend.
absl::StatusOr<CudaQueue> GetCudaQueue(ComputeBackend* backend);

// The device memory of a tensor a CUDA backend allocated: tensor->size()
// floats on that backend's GPU, owned by the tensor. Whoever writes or reads
// it outside the backend orders that with the backend's stream
// (GetCudaQueue). INVALID_ARGUMENT for another backend's tensor.
absl::StatusOr<float*> CudaTensorData(DeviceTensor* tensor);

// Multiplies every element of `tensors` (allocated by `backend`, a CUDA
// backend) by `factor` in place, one float32 multiply each (cublasSscal:
// what x *= factor gives on the host); factor 0 writes zeros whatever the
// tensors held (NaN and infinity included). Queued on the backend's
// stream; returns without waiting. INVALID_ARGUMENT for another backend or
// its tensors, UNIMPLEMENTED for a tensor over 2^31 elements.
absl::Status ScaleOnDevice(ComputeBackend* backend, const std::vector<DeviceTensor*>& tensors,
                           float factor);

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_BACKEND_H_
