// Keras's masks over a sequence's steps, element by element, shared by the
// CPU loops and the CUDA kernels of mask_ops.h. A mask holds 1 (the step is
// kept) or 0 (masked) per row: a row is one step of one example, `cols`
// values wide. No CUDA headers.
#ifndef PSC_COMMON_COMPUTE_MASK_MATH_H_
#define PSC_COMMON_COMPUTE_MASK_MATH_H_

#include <cstdint>

#include "common/compute/host_device.h"

namespace psc {
namespace compute {
namespace mask {

// Row r of x: 1 where any of its `cols` values differs from `value`
// (Keras's Masking and Embedding(mask_zero=True): any(x != value, -1)).
PSC_HOST_DEVICE inline float RowMask(const float* x, int64_t cols, float value, int64_t r) {
  for (int64_t c = 0; c < cols; ++c) {
    if (x[r * cols + c] != value) return 1.0f;
  }
  return 0.0f;
}

// Element e of rows of `cols`: a's where the row's mask is not 0, else b's
// (Keras's where(mask, a, b)); a null a or b is zeros.
PSC_HOST_DEVICE inline float SelectRow(const float* a, const float* b, const float* m, int64_t cols,
                                       int64_t e) {
  const float* from = m[e / cols] != 0.0f ? a : b;
  return from == nullptr ? 0.0f : from[e];
}

// Example n's kept steps, of `steps`.
PSC_HOST_DEVICE inline float KeptSteps(const float* m, int64_t steps, int64_t n) {
  float count = 0.0f;
  for (int64_t t = 0; t < steps; ++t) count += m[n * steps + t] != 0.0f ? 1.0f : 0.0f;
  return count;
}

// Element e = (n, c) of the masked mean of x [N, steps, cols] over the
// steps: the kept steps' sum over their count (Keras's
// GlobalAveragePooling1D with a mask; 0 / 0 where none is kept, as there).
PSC_HOST_DEVICE inline float MaskedMean(const float* x, const float* m, int64_t steps, int64_t cols,
                                        int64_t e) {
  const int64_t n = e / cols, c = e % cols;
  float sum = 0.0f;
  for (int64_t t = 0; t < steps; ++t) {
    if (m[n * steps + t] != 0.0f) sum += x[(n * steps + t) * cols + c];
  }
  return sum / KeptSteps(m, steps, n);
}

// Its gradient at element e = (n, t, c) of x, given the example's kept
// count: dy (n, c) over the count where step t is kept, else 0.
PSC_HOST_DEVICE inline float MaskedMeanGradient(const float* dy, const float* m, int64_t steps,
                                                int64_t cols, float count, int64_t e) {
  const int64_t row = e / cols, n = row / steps;
  return m[row] != 0.0f ? dy[n * cols + e % cols] / count : 0.0f;
}

}  // namespace mask
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_MASK_MATH_H_
