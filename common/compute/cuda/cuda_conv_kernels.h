// The CUDA backend's kernels of the convolution ops (conv_ops.h): cuDNN's
// convolutions through CudaConv (cuda_conv.h), which the kernels own, and
// our bias, ReLU and bias-gradient kernels, on the backend's stream,
// registered by op name when the plugin makes a backend.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_KERNELS_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_KERNELS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/compute/cuda/cuda_context.h"
#include "common/compute/cuda/cuda_conv.h"
#include "common/compute/cuda/cuda_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cuda {

// The convolution a capability query names: input x [N,H,W,C], kernel
// [KH,KW,C/groups,K] (or none: K = 1), its window; INVALID_ARGUMENT or
// UNIMPLEMENTED as the op would answer (the kernels accept exactly the
// queries this makes a shape of).
absl::StatusOr<ConvShape> ConvShapeOf(const OpSpec& spec);

// Registers Conv2D, Conv2DBackwardData and Conv2DBackwardWeights into
// `registry`, bound to `context` and `shared` (neither owned; both must
// outlive the registry's use). Returns the algorithm choices the kernels
// share, which the backend plans ahead (Prepare) and describes.
absl::StatusOr<std::shared_ptr<CudaConv>> RegisterCudaConvKernels(CudaKernelContext* context,
                                                                  const CudaContext* shared,
                                                                  KernelRegistry* registry);

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_CONV_KERNELS_H_
