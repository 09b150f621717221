// The CPU backend's kernel of the batched matrix product (matmul_ops.h):
// oneDNN's matmul, its transposes as strides, its primitives made once per
// shape and kept by the kernel. Registered by op name.
#ifndef PSC_COMMON_COMPUTE_CPU_MATMUL_KERNELS_H_
#define PSC_COMMON_COMPUTE_CPU_MATMUL_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cpu {

// Registers BatchMatMul into `registry`, bound to `context` (not owned; it
// must outlive the registry's use). The registry owns the primitive cache.
absl::Status RegisterCpuMatMulKernels(CpuKernelContext* context, KernelRegistry* registry);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_MATMUL_KERNELS_H_
