// The CPU backend: convolutions and dense layers on oneDNN (Debian's 2.6),
// the rest as plain OpenMP loops. Convolutions run Winograd where it pays and
// direct elsewhere, by a fixed rule (cpu_conv.h); activations are held in the
// layout their convolution prefers (plain NHWC or channel-blocked,
// cpu_tensor.h) and passed on without reordering, and pooling and ReLU
// backward run on either. Kernels are reordered from Keras's HWIO into the
// layout oneDNN picks, once per call. Primitives are created once per shape
// and cached; ReLU is fused as a post-op.
//
// oneDNN throws dnnl::error; every op catches it and returns INTERNAL naming
// the op. Thread-compatible (see backend.h).
#ifndef PSC_COMMON_COMPUTE_CPU_BACKEND_H_
#define PSC_COMMON_COMPUTE_CPU_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compute/backend.h"
#include "common/compute/cpu_conv.h"

namespace psc {
namespace compute {

// `threads` >= 1 is the OpenMP (and so oneDNN) thread count every op of
// this backend runs with, on whichever thread calls it (and the calling
// thread's default from then on); 0 keeps the default (all cores). Results
// are reproducible bit for bit for a fixed thread count. INVALID_ARGUMENT
// for threads < 0.
absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCpuBackend(int threads);

struct CpuBackendOptions {
  int threads = 0;  // as above
  ConvAlgorithm conv = ConvAlgorithm::kAuto;
};
absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCpuBackend(const CpuBackendOptions& options);

// For benchmarks and logs: per convolution shape the backend has run, "Conv2D
// [n,h,w,c]->k: winograd|direct (oneDNN's fwd / bwd_data / bwd_weights
// implementations)"; empty for a backend that is not the CPU backend.
std::vector<std::string> CpuConvolutionsChosen(const ComputeBackend& backend);

// The thread count the CPU backend runs with.
int CpuBackendThreads();

// Whether this CPU multiplies bfloat16 natively (AVX512_BF16 or AMX, as
// oneDNN detects them): "avx512_core_amx", "avx512_core_bf16", or "" when it
// has neither (oneDNN would emulate bfloat16, slower than float32).
std::string CpuBfloat16Isa();

// Whether the CPU backend computes in `dtypes` (Model::ComputeDtypes) here:
// float32 always; bfloat16 where CpuBfloat16Isa() names an ISA; float16
// never (oneDNN 2.6 has no float16 convolutions or matmuls on CPUs).
// INVALID_ARGUMENT naming the dtype, why and what to pass instead.
absl::Status CheckCpuComputeDtypes(const std::vector<DType>& dtypes);

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_BACKEND_H_
