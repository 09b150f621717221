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
inline constexpr char kGruCell[] = "GruCell";
inline constexpr char kGruCellBackward[] = "GruCellBackward";
inline constexpr char kLstmLayer[] = "LstmLayer";
inline constexpr char kLstmLayerBackward[] = "LstmLayerBackward";

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

// A GRU step (reset_after=True): from xz = x W + b_in and hz = h_prev U +
// b_rec ([n, 3U], gates z, r, h) and h_prev [n, U] (null: zeros), h [n, U].
inline absl::Status GruCell(ComputeBackend* be, const DeviceTensor& xz, const DeviceTensor& hz,
                            const DeviceTensor* h_prev, DeviceTensor* h) {
  const DeviceTensor* in[] = {&xz, &hz, h_prev};
  DeviceTensor* out[] = {h};
  return be->Run(kGruCell, in, OpAttrs(), out);
}

// Its gradients from dh [n, U]: dxz and dhz [n, 3U], and dh_prev's part
// that does not go through hz (dh z; null: not wanted).
inline absl::Status GruCellBackward(ComputeBackend* be, const DeviceTensor& xz,
                                    const DeviceTensor& hz, const DeviceTensor* h_prev,
                                    const DeviceTensor& dh, DeviceTensor* dxz, DeviceTensor* dhz,
                                    DeviceTensor* dh_prev) {
  const DeviceTensor* in[] = {&xz, &hz, h_prev, &dh};
  DeviceTensor* out[] = {dxz, dhz, dh_prev};
  return be->Run(kGruCellBackward, in, OpAttrs(), out);
}

// A whole LSTM layer over its steps, where a backend has one fused (the
// CPU: oneDNN's LSTM primitive; the executor runs the cells above where a
// backend has none, and with a Keras mask): from x [n, T, C] (any shape of
// those values), the kernel w [C, 4U], the recurrent kernel r [U, 4U] and
// the bias b [4U] (null: none), every step's h, y [n, T, U], the steps
// taken in reverse with `reverse` (y still in the input's order). The state
// starts at zeros. With `training`, the backend keeps what the backward of
// the same `instance` (a number the caller gives each layer it runs) needs.
inline absl::Status LstmLayer(ComputeBackend* be, const DeviceTensor& x, const DeviceTensor& w,
                              const DeviceTensor& r, const DeviceTensor* b, bool reverse,
                              bool training, int64_t instance, DeviceTensor* y) {
  OpAttrs a;
  a.reverse = reverse;
  a.training = training;
  a.instance = instance;
  const DeviceTensor* in[] = {&x, &w, &r, b};
  DeviceTensor* out[] = {y};
  return be->Run(kLstmLayer, in, a, out);
}

// Its gradients from y (the forward's output) and dy (every step's, [n, T,
// U]): dx, dw, dr and db (each null where not wanted), as the last
// LstmLayer of `instance` ran with these inputs (or, where the backend kept
// nothing for it, computed again).
inline absl::Status LstmLayerBackward(ComputeBackend* be, const DeviceTensor& x,
                                      const DeviceTensor& w, const DeviceTensor& r,
                                      const DeviceTensor* b, const DeviceTensor& y,
                                      const DeviceTensor& dy, bool reverse, int64_t instance,
                                      DeviceTensor* dx, DeviceTensor* dw, DeviceTensor* dr,
                                      DeviceTensor* db) {
  OpAttrs a;
  a.reverse = reverse;
  a.instance = instance;
  const DeviceTensor* in[] = {&x, &w, &r, b, &y, &dy};
  DeviceTensor* out[] = {dx, dw, dr, db};
  return be->Run(kLstmLayerBackward, in, a, out);
}

// LstmLayer's checks: w [C, 4U], r [U, 4U], b [4U] or null, x n x T x C
// values and each of `seqs` (y, dy, null where absent) n x T x U, the
// batch n the first axis of x; *n, *steps, *c, *units.
absl::Status CheckLstmLayer(const char* op, const DeviceTensor& x, const DeviceTensor& w,
                            const DeviceTensor& r, const DeviceTensor* b,
                            std::initializer_list<const DeviceTensor*> seqs, int64_t* n,
                            int64_t* steps, int64_t* c, int64_t* units);

// The GRU's checks: xz [n, 3U], each of `gates` (hz, dxz, dhz) of its shape
// and each of `state` [n, U] (null where absent).
absl::Status CheckGru(const char* op, const DeviceTensor& xz,
                      std::initializer_list<std::pair<const char*, const DeviceTensor*>> gates,
                      std::initializer_list<std::pair<const char*, const DeviceTensor*>> state,
                      int64_t* rows, int64_t* units);

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
