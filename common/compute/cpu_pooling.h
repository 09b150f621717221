// The CPU backend's windowed pooling (max and average, any window, strides
// and Keras padding) and their gradients, on raw float arrays in NHWC order.
// Callers pass a blocked tensor's physical NHWC view (cpu_tensor.h): pooling
// treats channels alike, so `images` = N*C/b images of c = b channels pool
// exactly as the logical tensor. Keras's default window, 2x2 with stride 2
// and "valid" padding, has loops of its own (the seed model's hot path).
// OpenMP-parallel over images; deterministic: each image's gradients are
// summed by one thread in a fixed order.
#ifndef PSC_COMMON_COMPUTE_CPU_POOLING_H_
#define PSC_COMMON_COMPUTE_CPU_POOLING_H_

#include <cstdint>

#include "common/compute/backend.h"

namespace psc {
namespace compute {
namespace cpu {

// y [images, oh, ow, c] = the maximum of each window of x [images, h, w, c]
// (padding never wins).
void MaxPool(const float* x, int64_t images, int64_t h, int64_t w, int64_t c, const Window& win,
             float* y);
// dx [images, h, w, c]: each window's dy at its first maximum in row-major
// window order, summed over overlapping windows; 0 elsewhere.
void MaxPoolBackward(const float* x, const float* dy, int64_t images, int64_t h, int64_t w,
                     int64_t c, const Window& win, float* dx);
// y = the mean of each window's elements inside x (padding not counted).
// MaxPool and MaxPoolBackward of 2x2 windows with stride 2 ("valid") on
// bfloat16 elements, as their bits; the same maxima and ties as the float
// versions.
void MaxPool2x2Bf16(const uint16_t* x, int64_t images, int64_t h, int64_t w, int64_t c,
                    uint16_t* y);
void MaxPool2x2BackwardBf16(const uint16_t* x, const uint16_t* dy, int64_t images, int64_t h,
                            int64_t w, int64_t c, uint16_t* dx);
void AvgPool(const float* x, int64_t images, int64_t h, int64_t w, int64_t c, const Window& win,
             float* y);
// dx: each window's dy / its count of elements inside x, on each of them.
void AvgPoolBackward(const float* dy, int64_t images, int64_t h, int64_t w, int64_t c,
                     const Window& win, float* dx);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_POOLING_H_
