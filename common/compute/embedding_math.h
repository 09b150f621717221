// Which row of an embedding table an id names (embedding_ops.h), as a
// __host__ __device__ function: the CPU backend's loops and the CUDA
// backend's kernels (cuda_kernel_math.h) both call it, so both read ids
// alike. No CUDA headers.
#ifndef PSC_COMMON_COMPUTE_EMBEDDING_MATH_H_
#define PSC_COMMON_COMPUTE_EMBEDDING_MATH_H_

#include <cstdint>

#include "common/compute/host_device.h"

namespace psc {
namespace compute {
namespace embedding {

// The row `value` (a float32 id) names in a table of `rows` rows, or -1
// when it is not a whole number in [0, rows).
PSC_HOST_DEVICE inline int64_t RowOf(float value, int64_t rows) {
  if (!(value >= 0.0f) || value >= static_cast<float>(rows)) return -1;
  const int64_t id = static_cast<int64_t>(value);
  return static_cast<float>(id) == value ? id : -1;
}

}  // namespace embedding
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_EMBEDDING_MATH_H_
