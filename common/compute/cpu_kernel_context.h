// What a CPU kernel (kernel_registry.h) reaches of the CPU backend it is
// registered in: its thread count and its oneDNN reorders, which bring a
// tensor held in a blocked layout (cpu_tensor.h) to the layout the kernel
// loops over. The backend implements it and registers its kernels with it
// (cpu_elementwise_kernels.h); nothing else holds one.
#ifndef PSC_COMMON_COMPUTE_CPU_KERNEL_CONTEXT_H_
#define PSC_COMMON_COMPUTE_CPU_KERNEL_CONTEXT_H_

#include "absl/status/statusor.h"
#include "common/compute/backend.h"

namespace psc {
namespace compute {
namespace cpu {

// The reorder scratch buffers an op may use, one per input it converts.
enum class ReorderSlot { kFirst, kSecond };

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
};

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_KERNEL_CONTEXT_H_
