// Host tensors for OpDefs' cases: random values the float32 kernels see
// exactly (each rounded to float, from compute/reference/reference_ops.h's
// library-independent draws); and what the OpDef files share.
#ifndef PSC_COMMON_OPS_HOST_TENSORS_H_
#define PSC_COMMON_OPS_HOST_TENSORS_H_

#include <random>
#include <string>

#include "absl/status/status.h"
#include "common/compute/reference/reference_ops.h"
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

// INVALID_ARGUMENT "<op>: <what>", as shape rules refuse.
absl::Status Refuse(const char* op, const std::string& what);
// OK for a shape of rank 4, else INVALID_ARGUMENT "<op>: <what> has shape
// [..], want [N,H,W,C]".
absl::Status WantImage(const char* op, const char* what, const Shape& s);
// The reference's description of a window.
compute::reference::Window2D RefWindow(const compute::Window& w);
// A dimension as the reference takes it (shape rules bounded it).
inline int Int(int64_t v) { return static_cast<int>(v); }

}  // namespace ops
}  // namespace psc

#endif  // PSC_COMMON_OPS_HOST_TENSORS_H_
