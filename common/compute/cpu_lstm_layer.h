// The CPU backend's fused LSTM layer (rnn_ops.h's LstmLayer and
// LstmLayerBackward): oneDNN's LSTM primitive over the whole sequence, its
// gates in Keras's order (i, f, c, o) and Keras's kernels ([C, 4U], [U,
// 4U]: oneDNN's ldigo) reordered to the primitive's own layout at each
// call. The forward of training keeps the primitive's workspace per layer
// instance for its backward. Registered by op name.
#ifndef PSC_COMMON_COMPUTE_CPU_LSTM_LAYER_H_
#define PSC_COMMON_COMPUTE_CPU_LSTM_LAYER_H_

#include "absl/status/status.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cpu {

// Registers LstmLayer and LstmLayerBackward into `registry`, bound to
// `context` (not owned; it must outlive the registry's use).
absl::Status RegisterCpuLstmLayerKernels(CpuKernelContext* context, KernelRegistry* registry);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_LSTM_LAYER_H_
