// The CPU backend's kernels of the layer normalization ops
// (layer_norm_ops.h): the rows of layer_norm_math.h in OpenMP loops on
// plain data, registered by op name.
#ifndef PSC_COMMON_COMPUTE_CPU_LAYER_NORM_KERNELS_H_
#define PSC_COMMON_COMPUTE_CPU_LAYER_NORM_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cpu {

// Registers LayerNorm and LayerNormBackward into `registry`, bound to
// `context` (not owned; it must outlive the registry's use).
absl::Status RegisterCpuLayerNormKernels(CpuKernelContext* context, KernelRegistry* registry);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_LAYER_NORM_KERNELS_H_
