// One LSTM cell step, element by element, shared by the CPU loops and the
// CUDA kernels of rnn_ops.h: Keras's LSTMCell with its default activations
// (sigmoid gates, tanh), its gates in Keras's order i, f, c, o along the last
// axis of z = x W + h U + b ([n, 4U]). No CUDA headers.
#ifndef PSC_COMMON_COMPUTE_RNN_MATH_H_
#define PSC_COMMON_COMPUTE_RNN_MATH_H_

#include <cmath>
#include <cstdint>

#include "common/compute/activation_math.h"
#include "common/compute/host_device.h"

namespace psc {
namespace compute {
namespace rnn {

PSC_HOST_DEVICE inline float Sigmoid(float x) { return activation::Apply(1, 0.0f, x); }

// Element e = row r x U + unit j: c = f c_prev + i g, h = o tanh(c). c_prev
// null: zeros (the first step).
PSC_HOST_DEVICE inline void LstmForward(const float* z, const float* c_prev, int64_t units,
                                        int64_t e, float* h, float* c) {
  const int64_t r = e / units, j = e % units;
  const float* zr = z + r * 4 * units;
  const float i = Sigmoid(zr[j]), f = Sigmoid(zr[units + j]);
  const float g = tanhf(zr[2 * units + j]), o = Sigmoid(zr[3 * units + j]);
  const float cv = (c_prev == nullptr ? 0.0f : f * c_prev[e]) + i * g;
  c[e] = cv;
  h[e] = o * tanhf(cv);
}

// Its gradients at element e from dh and dc (the gradient reaching c from
// the next step; null: none): the four gates' dz, and dc_prev (null: not
// wanted).
PSC_HOST_DEVICE inline void LstmBackward(const float* z, const float* c_prev, const float* c,
                                         const float* dh, const float* dc, int64_t units, int64_t e,
                                         float* dz, float* dc_prev) {
  const int64_t r = e / units, j = e % units;
  const float* zr = z + r * 4 * units;
  float* dzr = dz + r * 4 * units;
  const float i = Sigmoid(zr[j]), f = Sigmoid(zr[units + j]);
  const float g = tanhf(zr[2 * units + j]), o = Sigmoid(zr[3 * units + j]);
  const float tc = tanhf(c[e]);
  const float cp = c_prev == nullptr ? 0.0f : c_prev[e];
  const float dct = (dc == nullptr ? 0.0f : dc[e]) + dh[e] * o * (1.0f - tc * tc);
  dzr[j] = dct * g * i * (1.0f - i);
  dzr[units + j] = dct * cp * f * (1.0f - f);
  dzr[2 * units + j] = dct * i * (1.0f - g * g);
  dzr[3 * units + j] = dh[e] * tc * o * (1.0f - o);
  if (dc_prev != nullptr) dc_prev[e] = dct * f;
}

}  // namespace rnn
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_RNN_MATH_H_
