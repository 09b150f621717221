// What a CPU kernel (kernel_registry.h) reaches of the CPU backend it is
// registered in: its thread count, its oneDNN reorders, which bring a
// tensor held in a blocked layout (cpu_tensor.h) to the layout the kernel
// loops over, and its oneDNN engine, stream and scratchpad. The backend implements it and registers
// its kernels with it (cpu_elementwise_kernels.h); nothing else holds one.
#ifndef PSC_COMMON_COMPUTE_CPU_KERNEL_CONTEXT_H_
#define PSC_COMMON_COMPUTE_CPU_KERNEL_CONTEXT_H_

#include <cstddef>
#include <functional>

#include "absl/status/statusor.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"
#include "dnnl.hpp"

namespace psc {
namespace compute {
namespace cpu {

// The reorder scratch buffers an op may use, one per input it converts
// (kDense: a dense layer's input, so the forward and the weight gradient of
// one layer reuse one; kConvSource and kConvGradient: a convolution's x and
// dy, in the layouts its primitives want).
enum class ReorderSlot { kFirst, kSecond, kDense, kConvSource, kConvGradient };

// Thread-compatible, as its backend.
class CpuKernelContext {
 public:
  virtual ~CpuKernelContext() = default;
  // Applies the backend's OpenMP thread count in the calling thread.
  virtual void UseThreads() = 0;
  // t's elements in the plain (logical) layout: t's own memory when it is
  // plain, else a copy in `slot`'s scratch, valid until the slot is used
  // again. RESOURCE_EXHAUSTED or INTERNAL (naming `op`) if oneDNN fails.
  virtual absl::StatusOr<const float*> Plain(const char* op, const DeviceTensor& t,
                                             ReorderSlot slot) = 0;
  // t's elements in the layout `like` is held in (plain, or blocked by
  // the same block), at t's own shape, as Plain.
  virtual absl::StatusOr<const float*> InLayoutOf(const char* op, const DeviceTensor& t,
                                                  const DeviceTensor& like, ReorderSlot slot) = 0;

  // For kernels that run oneDNN primitives: the backend's engine and
  // stream; the scratchpad for a primitive about to run (one buffer shared
  // by every op, grown to the largest; throws dnnl::error when memory runs
  // out, so call it inside RunOneDnn); and RunOneDnn, which runs `work`,
  // waits for the stream, and turns what oneDNN throws into
  // RESOURCE_EXHAUSTED or INTERNAL naming `op`.
  virtual const dnnl::engine& engine() const = 0;
  virtual dnnl::stream& stream() = 0;
  virtual dnnl::memory Scratchpad(const dnnl::memory::desc& desc) = 0;
  virtual absl::Status RunOneDnn(const char* op, const std::function<void()>& work) = 0;
  // t as oneDNN memory of `want` (t's own when it is held so, else a copy
  // in `slot`'s scratch, valid until the slot is used again); and a reorder
  // of `src`, described by `from`, into `dst`, described by `to`. Both
  // throw dnnl::error: call them inside RunOneDnn.
  virtual dnnl::memory Reordered(const DeviceTensor& t, const dnnl::memory::desc& want,
                                 ReorderSlot slot) = 0;
  virtual void Reorder(const dnnl::memory::desc& from, const void* src,
                       const dnnl::memory::desc& to, void* dst) = 0;
};

// Whether oneDNN multiplies bfloat16 natively on this CPU (AVX512_BF16 or
// AMX; cpu_isa values are sets of bits, so a test of bits, not an order).
inline bool NativeBfloat16() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

// A family's entries as registered here: those taking bfloat16 through
// oneDNN (KernelDtypes::kBFloat16) take float32 only where the CPU has no
// native bfloat16, so that Run gives them float32 copies rather than
// oneDNN emulating bfloat16 or finding no kernel.
template <typename Context, size_t N>
void Bfloat16WhereNative(KernelEntry<Context> (&entries)[N]) {
  if (NativeBfloat16()) return;
  for (KernelEntry<Context>& e : entries) {
    if (e.dtypes == KernelDtypes::kBFloat16) {
      e.dtypes = KernelDtypes::kFloat32;
      e.takes = nullptr;
    }
  }
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_KERNEL_CONTEXT_H_
