// Where each element of a transposed tensor comes from, shared by the CPU
// loop and the CUDA kernel of the Transpose op (elementwise_ops.h).
#ifndef PSC_COMMON_COMPUTE_TRANSPOSE_MATH_H_
#define PSC_COMMON_COMPUTE_TRANSPOSE_MATH_H_

#include <cstdint>

#include "common/compute/host_device.h"

namespace psc {
namespace compute {
namespace elementwise {

// y = x with y's axis i being x's axis perm[i] (CheckTranspose makes it).
struct TransposePlan {
  static constexpr int kMaxRank = 6;
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};     // y's shape
  int64_t from_stride[kMaxRank] = {};  // per y axis i: x's stride along axis perm[i]
  int64_t total = 0;                   // elements
};

// The index in x of y's element `o` (row-major).
PSC_HOST_DEVICE inline int64_t TransposeSource(const TransposePlan& p, int64_t o) {
  int64_t from = 0;
  for (int i = p.rank - 1; i >= 0; --i) {
    const int64_t c = o % p.out_dims[i];
    o /= p.out_dims[i];
    from += c * p.from_stride[i];
  }
  return from;
}

}  // namespace elementwise
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_TRANSPOSE_MATH_H_
