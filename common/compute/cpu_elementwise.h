// The CPU backend's elementwise and global-pooling loops (activations and
// their gradients, global average and max pooling, products), on raw float
// arrays in one layout: callers pass a blocked tensor's physical NHWC view
// (cpu_tensor.h), which elementwise ops and per-channel pooling treat alike.
// OpenMP-parallel; pure functions of their inputs.
#ifndef PSC_COMMON_COMPUTE_CPU_ELEMENTWISE_H_
#define PSC_COMMON_COMPUTE_CPU_ELEMENTWISE_H_

#include <cstdint>

#include "common/compute/backend.h"

namespace psc {
namespace compute {
namespace cpu {

// y[i] = f(x[i]) for i < n; y may be x.
void Activate(Activation f, float alpha, const float* x, float* y, int64_t n);
// dx[i] = dy[i] * f'(from y[i]); dx may be dy.
void ActivateBackward(Activation f, float alpha, const float* y, const float* dy, float* dx,
                      int64_t n);
// Softmax over each of `rows` rows of `cols` elements (plain layout): y =
// e^(x - max) / sum, in float32 as Keras computes it; y may be x.
void Softmax(const float* x, float* y, int64_t rows, int64_t cols);
// Its gradient from the output: dx = y (dy - sum(dy y)) per row; dx may be
// dy.
void SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols);
// y[i * c + ch] = mean or max over the hw positions of x[(i * hw + p) * c + ch],
// for i < images.
void GlobalPool(GlobalPooling kind, const float* x, int64_t images, int64_t hw, int64_t c,
                float* y);
// dx for GlobalPool's x, given dy (as y).
void GlobalPoolBackward(GlobalPooling kind, const float* x, const float* dy, int64_t images,
                        int64_t hw, int64_t c, float* dx);
// y[i] = a[i] * b[i]; y may be a.
void Multiply(const float* a, const float* b, float* y, int64_t n);
// y[i] = a[i] + b[i]; y may be a or b.
void Add(const float* a, const float* b, float* y, int64_t n);
// dx = dy where y > 0, else 0; dx may be dy.
void ReluBackward(const float* y, const float* dy, float* dx, int64_t n);
// The same on bfloat16 (`bf16`) or float16 elements, as their bits: dy
// where y > 0, else 0. dx may be dy.
void ReluBackward16(bool bf16, const uint16_t* y, const uint16_t* dy, uint16_t* dx, int64_t n);
// relu on bfloat16 or float16 values, on their bits: a value with the sign
// set (a negative one, -0, a negative NaN) becomes +0, the others stay.
void Relu16(const uint16_t* x, uint16_t* y, int64_t n);
// y = a + b on bfloat16 values, added in float32 and rounded to nearest
// even (a NaN stays a NaN).
void AddBf16(const uint16_t* a, const uint16_t* b, uint16_t* y, int64_t n);
// y[i] = s * x[i]; y may be x.
void Scale(const float* x, float s, float* y, int64_t n);
// activation_math.h's Extremum and ExtremumGradient over n elements.
void Extremum(bool max, const float* a, const float* b, float* y, int64_t n);
void ExtremumGradient(bool max, const float* a, const float* b, const float* dy, float* da,
                      int64_t n);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_ELEMENTWISE_H_
