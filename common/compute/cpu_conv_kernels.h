// The CPU backend's kernels of the convolution ops (conv_ops.h): oneDNN's
// convolutions, Winograd or direct by cpu_conv.h's rule, their primitives
// made once per shape and kept by the kernels, registered by op name.
#ifndef PSC_COMMON_COMPUTE_CPU_CONV_KERNELS_H_
#define PSC_COMMON_COMPUTE_CPU_CONV_KERNELS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compute/cpu_conv.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cpu {

// What the kernels have chosen so far: per convolution shape run, "Conv2D
// [n,h,w,c]->k 3x3/1 same: winograd / ... (oneDNN's implementations)".
using ConvChoices = std::function<std::vector<std::string>()>;

// Registers Conv2D, Conv2DBackwardData and Conv2DBackwardWeights into
// `registry`, bound to `context` (not owned; it must outlive the
// registry's use), choosing algorithms by `algorithm`. The kernels share
// a cache of primitives, which the registry owns; the function returned
// reads it.
absl::StatusOr<ConvChoices> RegisterCpuConvKernels(CpuKernelContext* context,
                                                   ConvAlgorithm algorithm,
                                                   KernelRegistry* registry);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_CONV_KERNELS_H_
