// The elementwise activations of ComputeBackend::Activate, one element at a
// time, as __host__ __device__ functions: the CPU backend's loops and the
// CUDA backend's kernels (cuda_kernel_math.h) both call them, so both
// compute each activation with the same float32 expression, and
// cuda_kernel_math_test.cc runs them on the host. `f` is compute::Activation
// as a number (backend.h's order). Each gradient is computed from the
// activation's output y, which every one of them determines (they are
// monotonic, or constant where they are not), so a Conv2D or Dense may apply
// one in place on its output; but gelu's and silu's (12, 13), which are not
// monotonic, from the input x. No CUDA headers.
#ifndef PSC_COMMON_COMPUTE_ACTIVATION_MATH_H_
#define PSC_COMMON_COMPUTE_ACTIVATION_MATH_H_

#include <cmath>
#include <cstdint>

#include "common/compute/host_device.h"

namespace psc {
namespace compute {
namespace activation {

// Keras's selu constants (keras/src/activations/activations.py).
constexpr float kSeluAlpha = 1.67326324235437728481f;
constexpr float kSeluScale = 1.05070098735548049342f;

// y = f(x); alpha: leaky_relu's slope, elu's alpha, the clipped relu's
// maximum (unused by the others).
PSC_HOST_DEVICE inline float Apply(int f, float alpha, float x) {
  switch (f) {
    case 0:  // relu
      return x > 0.0f ? x : 0.0f;
    case 1:  // sigmoid
      return 1.0f / (1.0f + expf(-x));
    case 2:  // tanh
      return tanhf(x);
    case 3:  // leaky_relu
      return x > 0.0f ? x : alpha * x;
    case 4:  // elu: alpha * (e^x - 1) below 0
      return x > 0.0f ? x : alpha * expm1f(x);
    case 5:  // selu
      return x > 0.0f ? kSeluScale * x : kSeluScale * kSeluAlpha * expm1f(x);
    case 6:  // softplus, as logaddexp(x, 0)
      return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));
    case 7:  // softsign
      return x / (1.0f + fabsf(x));
    case 8: {  // hard_sigmoid, Keras 3: relu6(x + 3) / 6
      const float r = fminf(fmaxf(x + 3.0f, 0.0f), 6.0f);
      return r / 6.0f;
    }
    case 9:  // hard_sigmoid, Keras 2: clip(0.2 x + 0.5, 0, 1)
      return fminf(fmaxf(0.2f * x + 0.5f, 0.0f), 1.0f);
    case 10:  // relu clipped at alpha (relu6: alpha 6)
      return fminf(fmaxf(x, 0.0f), alpha);
    case 11:  // exponential
      return expf(x);
    case 12:  // gelu, exact (erf)
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    default:  // 13: silu
      return x / (1.0f + expf(-x));
  }
}

// dx = dy * f'(x), from y = f(x). At a kink the gradient is the side Keras's
// (JAX's) takes: 0 for relu at 0, and 0 where a clip saturates.
PSC_HOST_DEVICE inline float Gradient(int f, float alpha, float y, float dy) {
  switch (f) {
    case 0:
      return y > 0.0f ? dy : 0.0f;
    case 1:
      return dy * y * (1.0f - y);
    case 2:
      return dy * (1.0f - y * y);
    case 3:
      return y > 0.0f ? dy : alpha * dy;
    case 4:  // e^x alpha = y + alpha below 0
      return y > 0.0f ? dy : dy * (y + alpha);
    case 5:
      return y > 0.0f ? kSeluScale * dy : dy * (y + kSeluScale * kSeluAlpha);
    case 6:  // sigmoid(x) = 1 - e^-y
      return dy * -expm1f(-y);
    case 7: {  // 1 / (1 + |x|)^2 = (1 - |y|)^2
      const float s = 1.0f - fabsf(y);
      return dy * s * s;
    }
    case 8:
      return y > 0.0f && y < 1.0f ? dy / 6.0f : 0.0f;
    case 9:
      return y > 0.0f && y < 1.0f ? 0.2f * dy : 0.0f;
    case 10:
      return y > 0.0f && y < alpha ? dy : 0.0f;
    case 11:
      return dy * y;
    case 12: {  // y is the input x: Phi(x) + x phi(x)
      const float x = y;
      const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
      const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
      return dy * (cdf + x * pdf);
    }
    default: {  // 13, y is the input x: s (1 + x (1 - s))
      const float x = y;
      const float s = 1.0f / (1.0f + expf(-x));
      return dy * s * (1.0f + x * (1.0f - s));
    }
  }
}

// Maximum or Minimum of two, and the share of its gradient that goes to a:
// 1 where a wins, 1/2 where a and b tie (as JAX's max and min), 0 where b
// wins.
PSC_HOST_DEVICE inline float Extremum(bool max, float a, float b) {
  return max ? (a > b ? a : b) : (a < b ? a : b);
}
PSC_HOST_DEVICE inline float ExtremumGradient(bool max, float a, float b, float dy) {
  if (a == b) return 0.5f * dy;
  return (max ? a > b : a < b) ? dy : 0.0f;
}

// Softmax (14) is not elementwise: one row of `cols` values (the last axis)
// at a time, e^(x - max) / sum, y may be x; and its gradient from the
// output, dx = y (dy - sum(dy y)), dx may be dy.
PSC_HOST_DEVICE inline void SoftmaxRow(const float* x, float* y, int64_t cols) {
  float max = x[0];
  for (int64_t i = 1; i < cols; ++i) max = fmaxf(max, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < cols; ++i) {
    y[i] = expf(x[i] - max);
    sum += y[i];
  }
  const float inv = 1.0f / sum;  // sum >= 1: the maximum's term is 1
  for (int64_t i = 0; i < cols; ++i) y[i] *= inv;
}
PSC_HOST_DEVICE inline void SoftmaxRowGradient(const float* y, const float* dy, float* dx,
                                               int64_t cols) {
  float dot = 0.0f;
  for (int64_t i = 0; i < cols; ++i) dot += dy[i] * y[i];
  for (int64_t i = 0; i < cols; ++i) dx[i] = y[i] * (dy[i] - dot);
}

}  // namespace activation
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_ACTIVATION_MATH_H_
