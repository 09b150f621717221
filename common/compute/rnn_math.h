// One step of a recurrent cell, element by element, shared by the CPU loops
// and the CUDA kernels of rnn_ops.h, with Keras's default activations
// (sigmoid gates, tanh): its LSTMCell, its gates in Keras's order i, f, c, o
// along the last axis of z = x W + h U + b ([n, 4U]); its GRUCell with
// reset_after=True, the gates z, r, h of x W + b_in and h_prev U + b_rec
// ([n, 3U] each). No CUDA headers.
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

// Element e = row r x U + unit j of a GRU step: z = s(xz_z + hz_z), r =
// s(xz_r + hz_r), hh = tanh(xz_h + r hz_h), h = z h_prev + (1 - z) hh.
// h_prev null: zeros (the first step).
PSC_HOST_DEVICE inline void GruForward(const float* xz, const float* hz, const float* h_prev,
                                       int64_t units, int64_t e, float* h) {
  const int64_t r = e / units, j = e % units;
  const float* x = xz + r * 3 * units;
  const float* hr = hz + r * 3 * units;
  const float z = Sigmoid(x[j] + hr[j]), rr = Sigmoid(x[units + j] + hr[units + j]);
  const float hh = tanhf(x[2 * units + j] + rr * hr[2 * units + j]);
  const float hp = h_prev == nullptr ? 0.0f : h_prev[e];
  h[e] = z * hp + (1.0f - z) * hh;
}

// Its gradients at element e from dh: those of xz (dxz) and of hz (dhz),
// and dh_prev's part that does not go through hz (dh z; null: not wanted).
PSC_HOST_DEVICE inline void GruBackward(const float* xz, const float* hz, const float* h_prev,
                                        const float* dh, int64_t units, int64_t e, float* dxz,
                                        float* dhz, float* dh_prev) {
  const int64_t r = e / units, j = e % units;
  const float* x = xz + r * 3 * units;
  const float* hr = hz + r * 3 * units;
  const float z = Sigmoid(x[j] + hr[j]), rr = Sigmoid(x[units + j] + hr[units + j]);
  const float hh = tanhf(x[2 * units + j] + rr * hr[2 * units + j]);
  const float hp = h_prev == nullptr ? 0.0f : h_prev[e];
  const float dzp = dh[e] * (hp - hh) * z * (1.0f - z);
  const float dhh = dh[e] * (1.0f - z) * (1.0f - hh * hh);
  const float drp = dhh * hr[2 * units + j] * rr * (1.0f - rr);
  float* dx = dxz + r * 3 * units;
  float* dr = dhz + r * 3 * units;
  dx[j] = dzp;
  dx[units + j] = drp;
  dx[2 * units + j] = dhh;
  dr[j] = dzp;
  dr[units + j] = drp;
  dr[2 * units + j] = dhh * rr;
  if (dh_prev != nullptr) dh_prev[e] = dh[e] * z;
}

}  // namespace rnn
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_RNN_MATH_H_
