// How the CUDA backend gives cuDNN a convolution's padding, as plain C++ (no
// CUDA headers), so the rule is unit-tested without a GPU.
//
// Keras's "same" padding puts total / 2 (rounded down) before the input and
// the rest after it (backend.h's WindowAlong): a 3x3 stride-2 window on 28
// rows pads 0 before and 1 after. cuDNN's legacy convolution descriptor has
// one padding per axis, applied on both sides. So:
//   symmetric (before == after on both axes, "valid" included): cuDNN pads,
//     on the activations as they are;
//   otherwise: the input is copied into a zero-filled buffer of
//     [N, before_h + H + after_h, before_w + W + after_w, C] (both axes padded
//     explicitly), and cuDNN runs without padding. Backward data computes the
//     padded gradient and crops it back to H x W; backward filter reads the
//     padded input.
// Either way cuDNN's output extent is the window's (out rows and columns).
#ifndef PSC_COMMON_COMPUTE_CUDA_CONV_PADDING_H_
#define PSC_COMMON_COMPUTE_CUDA_CONV_PADDING_H_

#include <cstdint>

namespace psc {
namespace compute {
namespace cuda {

struct CudnnPadding {
  // Whether the input is padded explicitly (then pad_h and pad_w are 0).
  bool explicit_pad = false;
  // The explicit zero padding on each side (all 0 unless explicit_pad).
  int64_t top = 0, bottom = 0, left = 0, right = 0;
  // cuDNN's symmetric padding.
  int64_t pad_h = 0, pad_w = 0;
  // The input extents cuDNN sees: the input's, or the padded buffer's.
  int64_t in_h = 0, in_w = 0;
};

// For an input of h x w rows and columns and a window that pads
// (top, bottom) rows and (left, right) columns.
inline CudnnPadding PlanCudnnPadding(int64_t h, int64_t w, int64_t top, int64_t bottom,
                                     int64_t left, int64_t right) {
  CudnnPadding p;
  if (top == bottom && left == right) {
    p.pad_h = top;
    p.pad_w = left;
    p.in_h = h;
    p.in_w = w;
    return p;
  }
  p.explicit_pad = true;
  p.top = top;
  p.bottom = bottom;
  p.left = left;
  p.right = right;
  p.in_h = top + h + bottom;
  p.in_w = left + w + right;
  return p;
}

// cuDNN's output extent along one axis: floor((in + 2 pad - size) / stride) + 1.
inline int64_t CudnnOutput(int64_t in, int64_t pad, int64_t size, int64_t stride) {
  return (in + 2 * pad - size) / stride + 1;
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CONV_PADDING_H_
