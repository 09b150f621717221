// The CUDA backend's kernels of the elementwise ops (elementwise_ops.h):
// the kernels of cuda_kernels.h (and cuDNN's ReLU gradient) on the
// backend's stream, registered by op
// name when the plugin makes a backend.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_ELEMENTWISE_KERNELS_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_ELEMENTWISE_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cuda/cuda_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cuda {

// Registers Activate, ActivateBackward, Add, Copy, Scale, Multiply,
// Extremum, ExtremumGradient, CopyBlock and ReluBackward (cuDNN's, its
// descriptors kept by the kernel) into `registry`, bound to `context` (not owned; it
// must outlive the registry's use).
absl::Status RegisterCudaElementwiseKernels(CudaKernelContext* context, KernelRegistry* registry);

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_ELEMENTWISE_KERNELS_H_
