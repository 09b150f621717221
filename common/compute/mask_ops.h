// The mask ops (Keras's masks over a sequence's steps: Embedding's
// mask_zero, Masking, and the layers they reach): registered kernels
// (kernel_registry.h) on every backend, called through ComputeBackend::Run,
// as elementwise_ops.h. A mask is a float32 tensor of 1 (a kept step) and 0
// (a masked one), one value per step of each example: [N, steps]. The math:
// mask_math.h; references and cases: common/ops/mask_op_defs.cc.
#ifndef PSC_COMMON_COMPUTE_MASK_OPS_H_
#define PSC_COMMON_COMPUTE_MASK_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace mask {

inline constexpr char kSequenceMask[] = "SequenceMask";
inline constexpr char kSelectRows[] = "SelectRows";
inline constexpr char kMaskedMean[] = "MaskedMean";
inline constexpr char kMaskedMeanBackward[] = "MaskedMeanBackward";

// m (one value per row of x, rows of `cols`): 1 where any of the row's
// values differs from `value`, else 0. Attributes: row_size (cols), scalar
// (value).
inline absl::Status SequenceMask(ComputeBackend* be, const DeviceTensor& x, int64_t cols,
                                 float value, DeviceTensor* m) {
  OpAttrs attrs;
  attrs.row_size = cols;
  attrs.scalar = value;
  const DeviceTensor* in[] = {&x};
  DeviceTensor* out[] = {m};
  return be->Run(kSequenceMask, in, attrs, out);
}

// y = a's row where m holds 1, else b's, y seen as m.size() rows (a null a
// or b: zeros; not both). Inputs m, a, b. y may be a or b. A masked step of a recurrent
// layer keeps its state (b the previous step's); Masking's output (b
// null); each one's gradient (dy as a or b).
inline absl::Status SelectRows(ComputeBackend* be, const DeviceTensor* a, const DeviceTensor* b,
                               const DeviceTensor& m, DeviceTensor* y) {
  const DeviceTensor* in[] = {&m, a, b};
  DeviceTensor* out[] = {y};
  return be->Run(kSelectRows, in, OpAttrs(), out);
}

// y [N, C]: the mean of x [N, steps, C] (any shape of that many values)
// over the steps m [N, steps] keeps.
inline absl::Status MaskedMean(ComputeBackend* be, const DeviceTensor& x, const DeviceTensor& m,
                               DeviceTensor* y) {
  const DeviceTensor* in[] = {&x, &m};
  DeviceTensor* out[] = {y};
  return be->Run(kMaskedMean, in, OpAttrs(), out);
}

// dx (x's N x steps x C values) from dy [N, C] and m.
inline absl::Status MaskedMeanBackward(ComputeBackend* be, const DeviceTensor& dy,
                                       const DeviceTensor& m, DeviceTensor* dx) {
  const DeviceTensor* in[] = {&dy, &m};
  DeviceTensor* out[] = {dx};
  return be->Run(kMaskedMeanBackward, in, OpAttrs(), out);
}

// The shared checks, INVALID_ARGUMENT naming the op. SequenceMask: x of
// rows of `cols` (> 0), m of one value per row; *rows.
absl::Status CheckSequenceMask(const DeviceTensor& x, int64_t cols, const DeviceTensor& m,
                               int64_t* rows);
// SelectRows: a or b present, of y's shape, y a whole number of m's rows;
// *cols.
absl::Status CheckSelectRows(const DeviceTensor* a, const DeviceTensor* b, const DeviceTensor& m,
                             const DeviceTensor& y, int64_t* cols);
// MaskedMean (`op`): m [N, steps], `x` N x steps x C values and `y` [N, C]
// (for the backward, x is dx and y dy); *n, *steps, *cols.
absl::Status CheckMaskedMean(const char* op, const DeviceTensor& x, const DeviceTensor& m,
                             const DeviceTensor& y, int64_t* n, int64_t* steps, int64_t* cols);

}  // namespace mask
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_MASK_OPS_H_
