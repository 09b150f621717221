// Keras's L2 normalization of a batched matrix product's operand along the
// summed axis (Dot(normalize=True): keras.ops.normalize, order 2), shared
// by the CPU loops and the CUDA kernels (matmul_ops.h's L2Normalize ops).
// Each example holds M vectors of K values, stored [M,K] (vector i's
// element j at i*K + j) or transposed [K,M] (at j*M + i). A vector's scale
// is min(1 / sqrt(sum of squares), 1 / epsilon), summed in float32 in
// element order, as Keras computes it (x * rsqrt(...), capped).
#ifndef PSC_COMMON_COMPUTE_NORMALIZE_MATH_H_
#define PSC_COMMON_COMPUTE_NORMALIZE_MATH_H_

#include <cmath>
#include <cstdint>

#include "common/compute/host_device.h"

namespace psc {
namespace compute {
namespace normalize {

// Where element j of vector `v` (= example * M + i) is.
PSC_HOST_DEVICE inline int64_t At(int64_t v, int64_t j, int64_t m, int64_t k, bool transposed) {
  const int64_t example = v / m, i = v % m;
  return example * m * k + (transposed ? j * m + i : i * k + j);
}

// Vector v's scale; *capped when 1 / epsilon bounds it (its gradient then
// is the scale alone).
PSC_HOST_DEVICE inline float Scale(const float* x, int64_t v, int64_t m, int64_t k, bool transposed,
                                   float epsilon, bool* capped) {
  float sum = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    const float e = x[At(v, j, m, k, transposed)];
    sum += e * e;
  }
  const float inv = 1.0f / sqrtf(sum);  // +inf for a zero vector
  const float cap = 1.0f / epsilon;
  *capped = !(inv < cap);
  return *capped ? cap : inv;
}

// y's vector v = x's times its scale.
PSC_HOST_DEVICE inline void Forward(const float* x, float* y, int64_t v, int64_t m, int64_t k,
                                    bool transposed, float epsilon) {
  bool capped = false;
  const float s = Scale(x, v, m, k, transposed, epsilon, &capped);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t at = At(v, j, m, k, transposed);
    y[at] = x[at] * s;
  }
}

// dx's vector v from dy's: s * dy - s^3 * x * (x . dy), or s * dy where the
// scale is capped.
PSC_HOST_DEVICE inline void Backward(const float* x, const float* dy, float* dx, int64_t v,
                                     int64_t m, int64_t k, bool transposed, float epsilon) {
  bool capped = false;
  const float s = Scale(x, v, m, k, transposed, epsilon, &capped);
  float dot = 0.0f;
  if (!capped) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t at = At(v, j, m, k, transposed);
      dot += x[at] * dy[at];
    }
  }
  const float c = capped ? 0.0f : s * s * s * dot;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t at = At(v, j, m, k, transposed);
    dx[at] = s * dy[at] - c * x[at];
  }
}

}  // namespace normalize
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_NORMALIZE_MATH_H_
