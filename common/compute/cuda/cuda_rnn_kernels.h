// The CUDA backend's kernels of the recurrent cells' ops (rnn_ops.h): the
// kernels of cuda_kernels.h on the backend's stream, registered by op name
// when the plugin makes a backend.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_RNN_KERNELS_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_RNN_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cuda/cuda_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cuda {

// Registers LstmCell and LstmCellBackward into `registry`, bound to
// `context` (not owned; it must outlive the registry's use).
absl::Status RegisterCudaRnnKernels(CudaKernelContext* context, KernelRegistry* registry);

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_RNN_KERNELS_H_
