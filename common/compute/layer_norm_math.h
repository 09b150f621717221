// Layer normalization of one row (LayerNormalization over the trailing axes
// that hold it), shared by the CPU loops and the CUDA kernels of
// layer_norm_ops.h. Per row: the mean and the biased variance, summed in
// float32 in two passes as Keras's moments (jnp.mean, jnp.var) sum them,
// rstd = 1 / sqrt(variance + epsilon), and y = x inv + (beta - mean inv)
// with inv = rstd x gamma: Keras's arithmetic (ops.layer_normalization).
#ifndef PSC_COMMON_COMPUTE_LAYER_NORM_MATH_H_
#define PSC_COMMON_COMPUTE_LAYER_NORM_MATH_H_

#include <cmath>
#include <cstdint>

#include "common/compute/host_device.h"

namespace psc {
namespace compute {
namespace layer_norm {

// y's row from x's (`cols` values); gamma and beta of cols values, or null
// (1 and 0).
PSC_HOST_DEVICE inline void ForwardRow(const float* x, const float* gamma, const float* beta,
                                       int64_t cols, float epsilon, float* y, float* mean,
                                       float* rstd) {
  float sum = 0.0f;
  for (int64_t j = 0; j < cols; ++j) sum += x[j];
  const float m = sum / static_cast<float>(cols);
  float squares = 0.0f;
  for (int64_t j = 0; j < cols; ++j) squares += (x[j] - m) * (x[j] - m);
  const float r = 1.0f / sqrtf(squares / static_cast<float>(cols) + epsilon);
  for (int64_t j = 0; j < cols; ++j) {
    const float inv = gamma == nullptr ? r : r * gamma[j];
    const float res = (beta == nullptr ? 0.0f : beta[j]) - m * inv;
    y[j] = x[j] * inv + res;
  }
  *mean = m;
  *rstd = r;
}

// dx's row: rstd (g - mean(g) - x-hat mean(g x-hat)), g = dy x gamma, x-hat
// = (x - mean) rstd, from the forward's statistics.
PSC_HOST_DEVICE inline void BackwardRow(const float* x, const float* dy, const float* gamma,
                                        float mean, float rstd, int64_t cols, float* dx) {
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int64_t j = 0; j < cols; ++j) {
    const float g = gamma == nullptr ? dy[j] : dy[j] * gamma[j];
    g_sum += g;
    gx_sum += g * (x[j] - mean) * rstd;
  }
  const float n = static_cast<float>(cols);
  for (int64_t j = 0; j < cols; ++j) {
    const float g = gamma == nullptr ? dy[j] : dy[j] * gamma[j];
    dx[j] = rstd * (g - g_sum / n - (x[j] - mean) * rstd * gx_sum / n);
  }
}

// Column j of dgamma (the sum over the rows of dy x-hat) and dbeta (of dy),
// summed in double: a column of a batch of sequences has many rows.
PSC_HOST_DEVICE inline void ColumnGradients(const float* x, const float* dy, const float* mean,
                                            const float* rstd, int64_t rows, int64_t cols,
                                            int64_t j, float* dgamma, float* dbeta) {
  double dg = 0.0, db = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float d = dy[r * cols + j];
    dg += static_cast<double>(d * ((x[r * cols + j] - mean[r]) * rstd[r]));
    db += static_cast<double>(d);
  }
  if (dgamma != nullptr) dgamma[j] = static_cast<float>(dg);
  if (dbeta != nullptr) dbeta[j] = static_cast<float>(db);
}

}  // namespace layer_norm
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_LAYER_NORM_MATH_H_
