// The CUDA backend's kernels of the embedding ops (embedding_ops.h): our
// own lookup and gradient kernels on the backend's stream, registered by op
// name when the plugin makes a backend.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_EMBEDDING_KERNELS_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_EMBEDDING_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cuda/cuda_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cuda {

// Registers EmbeddingLookup and EmbeddingGradient into `registry`, bound
// to `context` (not owned; it must outlive the registry's use).
absl::Status RegisterCudaEmbeddingKernels(CudaKernelContext* context, KernelRegistry* registry);

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_EMBEDDING_KERNELS_H_
