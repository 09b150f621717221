// The recurrent cells' ops: registered kernels (kernel_registry.h) on every
// backend, called through ComputeBackend::Run, as elementwise_ops.h. The
// executor runs a recurrent layer as these cells, one step at a time,
// between the matrix products that are Dense ops: the input's projection of
// every step at once, and each step's h U (model.cc). Every tensor is
// float32, [n, ...] rows of one batch. The math: rnn_math.h; references and
// cases: common/ops/rnn_op_defs.cc.
#ifndef PSC_COMMON_COMPUTE_RNN_OPS_H_
#define PSC_COMMON_COMPUTE_RNN_OPS_H_

#include "absl/status/status.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace rnn {

inline constexpr char kLstmCell[] = "LstmCell";
inline constexpr char kLstmCellBackward[] = "LstmCellBackward";

// From the gates' pre-activations z [n, 4U] (i, f, c, o) and c_prev [n, U]
// (null: zeros): c = f c_prev + i g and h = o tanh(c), both [n, U].
inline absl::Status LstmCell(ComputeBackend* be, const DeviceTensor& z, const DeviceTensor* c_prev,
                             DeviceTensor* h, DeviceTensor* c) {
  const DeviceTensor* in[] = {&z, c_prev};
  DeviceTensor* out[] = {h, c};
  return be->Run(kLstmCell, in, OpAttrs(), out);
}

// From z, c_prev (null: zeros), the step's c, dh and dc (the gradient
// reaching c from the next step; null: none): dz [n, 4U] and dc_prev [n, U]
// (null: not wanted).
inline absl::Status LstmCellBackward(ComputeBackend* be, const DeviceTensor& z,
                                     const DeviceTensor* c_prev, const DeviceTensor& c,
                                     const DeviceTensor& dh, const DeviceTensor* dc,
                                     DeviceTensor* dz, DeviceTensor* dc_prev) {
  const DeviceTensor* in[] = {&z, c_prev, &c, &dh, dc};
  DeviceTensor* out[] = {dz, dc_prev};
  return be->Run(kLstmCellBackward, in, OpAttrs(), out);
}

// The shared checks: z [n, 4U] and each of `state` (c_prev, c, dh, dc,
// dc_prev: null where absent) [n, U], float32; *rows = n, *units = U.
// INVALID_ARGUMENT naming `op` and the tensor.
absl::Status CheckLstm(const char* op, const DeviceTensor& z,
                       std::initializer_list<std::pair<const char*, const DeviceTensor*>> state,
                       int64_t* rows, int64_t* units);

}  // namespace rnn
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_RNN_OPS_H_
