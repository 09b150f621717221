// The CUDA backend's kernels of the dense ops (dense_ops.h): cuBLAS
// matrix products and our bias kernels on the backend's stream,
// registered by op name when the plugin makes a backend.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_DENSE_KERNELS_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_DENSE_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cuda/cuda_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cuda {

// Registers Dense, DenseBackwardData and DenseBackwardWeights into
// `registry`, bound to `context` (not owned; it must outlive the
// registry's use).
absl::Status RegisterCudaDenseKernels(CudaKernelContext* context, KernelRegistry* registry);

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_DENSE_KERNELS_H_
