// Host tensors for OpDefs' cases: random values the float32 kernels see
// exactly (each rounded to float, from compute/reference/reference_ops.h's
// library-independent draws).
#ifndef PSC_COMMON_OPS_HOST_TENSORS_H_
#define PSC_COMMON_OPS_HOST_TENSORS_H_

#include <random>

#include "common/ops/op_def.h"

namespace psc {
namespace ops {

// Uniform in [lo, hi].
HostTensor RandomTensor(std::mt19937* rng, const Shape& shape, double lo = -1, double hi = 1);
// Distinct values evenly spaced over [-1, 1] ((hi - lo) / (size - 1)
// apart), shuffled.
HostTensor DistinctTensor(std::mt19937* rng, const Shape& shape);
// Each value rounded to float, as a backend would hold it.
HostTensor RoundedToFloat(HostTensor t);

}  // namespace ops
}  // namespace psc

#endif  // PSC_COMMON_OPS_HOST_TENSORS_H_
