// The CPU backend's kernels of the embedding ops (embedding_ops.h): a row
// copy per id, and the gradient's rows summed in the ids' order. Registered
// by op name.
#ifndef PSC_COMMON_COMPUTE_CPU_EMBEDDING_KERNELS_H_
#define PSC_COMMON_COMPUTE_CPU_EMBEDDING_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cpu {

// Registers EmbeddingLookup and EmbeddingGradient into `registry`, bound
// to `context` (not owned; it must outlive the registry's use).
absl::Status RegisterCpuEmbeddingKernels(CpuKernelContext* context, KernelRegistry* registry);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_EMBEDDING_KERNELS_H_
