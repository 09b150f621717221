// The CPU backend's kernels of the mask ops (mask_ops.h): the elements of
// mask_math.h in OpenMP loops on plain data, registered by op name.
#ifndef PSC_COMMON_COMPUTE_CPU_MASK_KERNELS_H_
#define PSC_COMMON_COMPUTE_CPU_MASK_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cpu {

// Registers SequenceMask, SelectRows, MaskedMean and MaskedMeanBackward
// into `registry`, bound to `context` (not owned; it must outlive the
// registry's use).
absl::Status RegisterCpuMaskKernels(CpuKernelContext* context, KernelRegistry* registry);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_MASK_KERNELS_H_
