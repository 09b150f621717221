// The oneDNN primitives of one convolution shape on the CPU (any kernel
// size, strides, dilation, groups and Keras padding, with or without bias),
// in its three directions, and the rule that picks their algorithm.
//
// The rule is fixed, not timed, so every process on the same kind of CPU
// makes the same choice and computes bit-identical results:
//   * ConvAlgorithm::kDirect: oneDNN's direct convolution on plain NHWC
//     activations (its brgemm kernels on AVX-512).
//   * ConvAlgorithm::kAuto (the default): Winograd F(4x4, 3x3) in all three
//     directions for a 3x3 "same" convolution with stride 1 (neither
//     dilated nor grouped) when
//     both channel counts are multiples of 16 and oneDNN has a Winograd
//     kernel for this CPU (AVX-512); direct otherwise. Activations
//     are in the layouts these kernels prefer (channel-blocked, cpu_tensor.h),
//     so consecutive layers pass them on without reordering.
// Measured on a 2-vCPU Xeon with AVX-512 at batch 128 (docs/results.md, against
// TensorFlow), Winograd is faster in every direction of the five seed_cnn
// layers that qualify and slower on the first (1 input channel).
#ifndef PSC_COMMON_COMPUTE_CPU_CONV_H_
#define PSC_COMMON_COMPUTE_CPU_CONV_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compute/backend.h"
#include "dnnl.hpp"

namespace psc {
namespace compute {

enum class ConvAlgorithm { kAuto, kDirect };

// "auto" / "direct"; INVALID_ARGUMENT naming both for anything else.
absl::StatusOr<ConvAlgorithm> ParseConvAlgorithm(std::string_view text);
const char* ConvAlgorithmName(ConvAlgorithm algorithm);

// What kAuto does on this CPU, for logs: Winograd where the rule allows it
// when oneDNN has Winograd kernels here (AVX-512), else direct, and why.
std::string DescribeConvAlgorithm(ConvAlgorithm algorithm);

// Whether oneDNN has Winograd kernels on this CPU (AVX-512), so that kAuto
// can round otherwise than kDirect.
bool WinogradAvailable();

namespace cpu {

// The attributes of every primitive of the CPU backend: scratch memory is
// ours (the backend lends one buffer to all of them; oneDNN's per-call default
// page-faults every step), and ReLU is fused as a post-op when asked.
dnnl::primitive_attr PrimitiveAttr(bool relu);

// What one set of convolution primitives is for: input [n,h,w,c], k
// filters, the window (its size is the kernel's), a bias, a fused ReLU, and
// the dtype the activations and their gradients are computed in (float32;
// bfloat16 or float16 with float32 weights, bias and weight gradients, and
// accumulation in float32, as oneDNN's low-precision kernels do; Winograd
// only in float32).
struct ConvKey {
  int64_t n, h, w, c, k;
  Window window;
  bool bias, relu;
  DType dtype = DType::kFloat32;
  bool operator<(const ConvKey& o) const;
};

struct ConvPrimitives {
  // Creates all three directions. Throws dnnl::error (the backend catches it).
  static ConvPrimitives Create(const dnnl::engine& engine, const ConvKey& key,
                               ConvAlgorithm algorithm);

  bool winograd = false;   // the forward pass (every direction, under the rule)
  std::string algorithms;  // "winograd / winograd / winograd": fwd / bwd_data / bwd_weights
  std::string impl;        // oneDNN's implementation names, in the same order
  dnnl::memory::desc user_weights, bias;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  // Each direction's scratchpad (the backend lends one shared buffer) and
  // weights in oneDNN's layout (reordered into, or out of, per call).
  dnnl::memory::desc fwd_scratch, bwd_data_scratch, bwd_weights_scratch;
  dnnl::memory fwd_weights;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::memory bwd_data_weights;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_backward_weights bwd_weights;
  dnnl::memory diff_weights;
};

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_CONV_H_
