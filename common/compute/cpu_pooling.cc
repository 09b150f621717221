#include "common/compute/cpu_pooling.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace psc {
namespace compute {
namespace cpu {
namespace {

// Where the windows of one image lie: output oh x ow, and for output (i, j)
// the input rows [r0, r1) and columns [c0, c1) inside the input.
struct Windows {
  int64_t oh, ow, top, left;
  Windows(int64_t h, int64_t w, const Window& win) {
    const WindowExtent rows = win.Rows(h), cols = win.Cols(w);
    oh = rows.out;
    ow = cols.out;
    top = rows.before;
    left = cols.before;
  }
};

struct Span2 {
  int64_t r0, r1, c0, c1;
  int64_t count() const { return (r1 - r0) * (c1 - c0); }
};

Span2 Inside(const Windows& g, int64_t i, int64_t j, int64_t h, int64_t w, const Window& win) {
  const int64_t r = i * win.stride_h - g.top, c = j * win.stride_w - g.left;
  return {std::max<int64_t>(r, 0), std::min(r + win.height, h), std::max<int64_t>(c, 0),
          std::min(c + win.width, w)};
}

// A bfloat16's value: its bits are a float's upper half.
inline float Bf16(uint16_t b) {
  uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The pooling loops' elements: float32, and bfloat16 as its bits (a
// float's upper half): each one's value, and its bits to copy or clear.
struct Float32Elements {
  using T = float;
  using Bits = uint32_t;
  static float Value(float v) { return v; }
};
struct Bfloat16Elements {
  using T = uint16_t;
  using Bits = uint16_t;
  static float Value(uint16_t b) { return Bf16(b); }
};

template <typename E>
void MaxPool2x2Of(const typename E::T* xv, int64_t n, int64_t h, int64_t w, int64_t c,
                  typename E::T* yv) {
  using T = typename E::T;
  const int64_t oh = h / 2, ow = w / 2;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const T* p00 = xv + ((b * h + 2 * i) * w + 2 * j) * c;
        const T* p01 = p00 + c;
        const T* p10 = p00 + w * c;
        const T* p11 = p10 + c;
        T* out = yv + ((b * oh + i) * ow + j) * c;
#pragma omp simd
        for (int64_t ch = 0; ch < c; ++ch) {
          // As std::max(std::max(p00, p01), std::max(p10, p11)): the first
          // of equal values.
          const T top = E::Value(p00[ch]) < E::Value(p01[ch]) ? p01[ch] : p00[ch];
          const T bottom = E::Value(p10[ch]) < E::Value(p11[ch]) ? p11[ch] : p10[ch];
          out[ch] = E::Value(top) < E::Value(bottom) ? bottom : top;
        }
      }
    }
  }
}

template <typename E>
void MaxPool2x2BackwardOf(const typename E::T* xv, const typename E::T* dyv, int64_t n, int64_t h,
                          int64_t w, int64_t c, typename E::T* dxv) {
  using T = typename E::T;
  using Bits = typename E::Bits;
  const int64_t oh = h / 2, ow = w / 2;
  // One pass: every window writes all four of its elements (dy at its
  // maximum, 0 elsewhere); only the row and column the floor cuts off are
  // zeroed apart.
  if (h % 2 != 0 || w % 2 != 0) std::memset(dxv, 0, n * h * w * c * sizeof(T));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t base = ((b * h + 2 * i) * w + 2 * j) * c;
        const T* x00 = xv + base;
        const T* x01 = x00 + c;
        const T* x10 = x00 + w * c;
        const T* x11 = x10 + c;
        T* d00 = dxv + base;
        T* d01 = d00 + c;
        T* d10 = d00 + w * c;
        T* d11 = d10 + c;
        const T* g = dyv + ((b * oh + i) * ow + j) * c;
#pragma omp simd
        for (int64_t ch = 0; ch < c; ++ch) {
          // The first maximum in row-major window order wins ties. The
          // choice is branch-free (bitwise & of the comparisons) and the
          // gradient's bits kept or cleared, so that it vectorizes.
          const float a = E::Value(x00[ch]), bb = E::Value(x01[ch]), cc = E::Value(x10[ch]),
                      dd = E::Value(x11[ch]);
          const bool first = (a >= bb) & (a >= cc) & (a >= dd);
          const bool second = !first & (bb >= cc) & (bb >= dd);
          const bool third = !first & !second & (cc >= dd);
          const bool fourth = !first & !second & !third;
          Bits gb;
          std::memcpy(&gb, &g[ch], sizeof(gb));
          const Bits all = static_cast<Bits>(~Bits{0});
          const Bits v0 = gb & (first ? all : Bits{0});
          const Bits v1 = gb & (second ? all : Bits{0});
          const Bits v2 = gb & (third ? all : Bits{0});
          const Bits v3 = gb & (fourth ? all : Bits{0});
          std::memcpy(&d00[ch], &v0, sizeof(v0));
          std::memcpy(&d01[ch], &v1, sizeof(v1));
          std::memcpy(&d10[ch], &v2, sizeof(v2));
          std::memcpy(&d11[ch], &v3, sizeof(v3));
        }
      }
    }
  }
}

void MaxPool2x2(const float* xv, int64_t n, int64_t h, int64_t w, int64_t c, float* yv) {
  MaxPool2x2Of<Float32Elements>(xv, n, h, w, c, yv);
}

void MaxPool2x2Backward(const float* xv, const float* dyv, int64_t n, int64_t h, int64_t w,
                        int64_t c, float* dxv) {
  MaxPool2x2BackwardOf<Float32Elements>(xv, dyv, n, h, w, c, dxv);
}

void AvgPool2x2(const float* x, int64_t n, int64_t h, int64_t w, int64_t c, float* y) {
  const int64_t oh = h / 2, ow = w / 2;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const float* p00 = x + ((b * h + 2 * i) * w + 2 * j) * c;
        const float* p01 = p00 + c;
        const float* p10 = p00 + w * c;
        const float* p11 = p10 + c;
        float* out = y + ((b * oh + i) * ow + j) * c;
#pragma omp simd
        for (int64_t ch = 0; ch < c; ++ch) {
          out[ch] = ((p00[ch] + p01[ch]) + (p10[ch] + p11[ch])) * 0.25f;
        }
      }
    }
  }
}

void AvgPool2x2Backward(const float* dy, int64_t n, int64_t h, int64_t w, int64_t c, float* dx) {
  const int64_t oh = h / 2, ow = w / 2;
  if (h % 2 != 0 || w % 2 != 0) std::memset(dx, 0, n * h * w * c * sizeof(float));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        float* d00 = dx + ((b * h + 2 * i) * w + 2 * j) * c;
        float* d01 = d00 + c;
        float* d10 = d00 + w * c;
        float* d11 = d10 + c;
        const float* g = dy + ((b * oh + i) * ow + j) * c;
#pragma omp simd
        for (int64_t ch = 0; ch < c; ++ch) {
          const float v = g[ch] * 0.25f;
          d00[ch] = v;
          d01[ch] = v;
          d10[ch] = v;
          d11[ch] = v;
        }
      }
    }
  }
}

}  // namespace

void MaxPool2x2Bf16(const uint16_t* x, int64_t images, int64_t h, int64_t w, int64_t c,
                    uint16_t* y) {
  MaxPool2x2Of<Bfloat16Elements>(x, images, h, w, c, y);
}

void MaxPool2x2BackwardBf16(const uint16_t* x, const uint16_t* dy, int64_t images, int64_t h,
                            int64_t w, int64_t c, uint16_t* dx) {
  MaxPool2x2BackwardOf<Bfloat16Elements>(x, dy, images, h, w, c, dx);
}

void MaxPool(const float* x, int64_t images, int64_t h, int64_t w, int64_t c, const Window& win,
             float* y) {
  if (win == kPool2x2) return MaxPool2x2(x, images, h, w, c, y);
  const Windows g(h, w, win);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < images; ++b) {
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) {
        const Span2 s = Inside(g, i, j, h, w, win);
        float* out = y + ((b * g.oh + i) * g.ow + j) * c;
        std::fill(out, out + c, -std::numeric_limits<float>::infinity());
        for (int64_t r = s.r0; r < s.r1; ++r) {
          for (int64_t q = s.c0; q < s.c1; ++q) {
            const float* in = x + ((b * h + r) * w + q) * c;
            for (int64_t ch = 0; ch < c; ++ch) out[ch] = std::max(out[ch], in[ch]);
          }
        }
      }
    }
  }
}

void MaxPoolBackward(const float* x, const float* dy, int64_t images, int64_t h, int64_t w,
                     int64_t c, const Window& win, float* dx) {
  if (win == kPool2x2) return MaxPool2x2Backward(x, dy, images, h, w, c, dx);
  const Windows g(h, w, win);
  // Windows may overlap: one thread per image adds its windows' gradients
  // in output order.
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < images; ++b) {
    float* dxb = dx + b * h * w * c;
    std::fill(dxb, dxb + h * w * c, 0.0f);
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) {
        const Span2 s = Inside(g, i, j, h, w, win);
        const float* grad = dy + ((b * g.oh + i) * g.ow + j) * c;
        for (int64_t ch = 0; ch < c; ++ch) {
          int64_t best = (s.r0 * w + s.c0) * c + ch;  // within the image
          for (int64_t r = s.r0; r < s.r1; ++r) {
            for (int64_t q = s.c0; q < s.c1; ++q) {
              const int64_t at = (r * w + q) * c + ch;
              if (x[b * h * w * c + at] > x[b * h * w * c + best]) best = at;
            }
          }
          dxb[best] += grad[ch];
        }
      }
    }
  }
}

void AvgPool(const float* x, int64_t images, int64_t h, int64_t w, int64_t c, const Window& win,
             float* y) {
  if (win == kPool2x2) return AvgPool2x2(x, images, h, w, c, y);
  const Windows g(h, w, win);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < images; ++b) {
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) {
        const Span2 s = Inside(g, i, j, h, w, win);
        float* out = y + ((b * g.oh + i) * g.ow + j) * c;
        std::fill(out, out + c, 0.0f);
        for (int64_t r = s.r0; r < s.r1; ++r) {
          for (int64_t q = s.c0; q < s.c1; ++q) {
            const float* in = x + ((b * h + r) * w + q) * c;
            for (int64_t ch = 0; ch < c; ++ch) out[ch] += in[ch];
          }
        }
        const float count = static_cast<float>(s.count());
        for (int64_t ch = 0; ch < c; ++ch) out[ch] /= count;
      }
    }
  }
}

void AvgPoolBackward(const float* dy, int64_t images, int64_t h, int64_t w, int64_t c,
                     const Window& win, float* dx) {
  if (win == kPool2x2) return AvgPool2x2Backward(dy, images, h, w, c, dx);
  const Windows g(h, w, win);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < images; ++b) {
    float* dxb = dx + b * h * w * c;
    std::fill(dxb, dxb + h * w * c, 0.0f);
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) {
        const Span2 s = Inside(g, i, j, h, w, win);
        const float* grad = dy + ((b * g.oh + i) * g.ow + j) * c;
        const float count = static_cast<float>(s.count());
        for (int64_t r = s.r0; r < s.r1; ++r) {
          for (int64_t q = s.c0; q < s.c1; ++q) {
            float* out = dxb + (r * w + q) * c;
            for (int64_t ch = 0; ch < c; ++ch) out[ch] += grad[ch] / count;
          }
        }
      }
    }
  }
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
