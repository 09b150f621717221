// The CUDA backend's kernels of the mask ops (mask_ops.h): the kernels of
// cuda_kernels.h on the backend's stream, registered by op name when the
// plugin makes a backend.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_MASK_KERNELS_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_MASK_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cuda/cuda_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cuda {

// Registers SequenceMask, SelectRows, MaskedMean and MaskedMeanBackward
// into `registry`, bound to `context` (not owned; it must outlive the
// registry's use).
absl::Status RegisterCudaMaskKernels(CudaKernelContext* context, KernelRegistry* registry);

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_MASK_KERNELS_H_
