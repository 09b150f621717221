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

void MaxPool2x2(const float* xv, int64_t n, int64_t h, int64_t w, int64_t c, float* yv) {
  const int64_t oh = h / 2, ow = w / 2;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const float* p00 = xv + ((b * h + 2 * i) * w + 2 * j) * c;
        const float* p01 = p00 + c;
        const float* p10 = p00 + w * c;
        const float* p11 = p10 + c;
        float* out = yv + ((b * oh + i) * ow + j) * c;
        for (int64_t ch = 0; ch < c; ++ch) {
          out[ch] = std::max(std::max(p00[ch], p01[ch]), std::max(p10[ch], p11[ch]));
        }
      }
    }
  }
}

void MaxPool2x2Backward(const float* xv, const float* dyv, int64_t n, int64_t h, int64_t w,
                        int64_t c, float* dxv) {
  const int64_t oh = h / 2, ow = w / 2;
  // One pass: every window writes all four of its elements (dy at its
  // maximum, 0 elsewhere); only the row and column the floor cuts off are
  // zeroed apart.
  if (h % 2 != 0 || w % 2 != 0) std::memset(dxv, 0, n * h * w * c * sizeof(float));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t base = ((b * h + 2 * i) * w + 2 * j) * c;
        const float* x00 = xv + base;
        const float* x01 = x00 + c;
        const float* x10 = x00 + w * c;
        const float* x11 = x10 + c;
        float* d00 = dxv + base;
        float* d01 = d00 + c;
        float* d10 = d00 + w * c;
        float* d11 = d10 + c;
        const float* g = dyv + ((b * oh + i) * ow + j) * c;
#pragma omp simd
        for (int64_t ch = 0; ch < c; ++ch) {
          // The first maximum in row-major window order wins ties.
          // Branch-free (bitwise & of the comparisons), so that it vectorizes.
          const float a = x00[ch], bb = x01[ch], cc = x10[ch], dd = x11[ch];
          const bool first = (a >= bb) & (a >= cc) & (a >= dd);
          const bool second = !first & (bb >= cc) & (bb >= dd);
          const bool third = !first & !second & (cc >= dd);
          const bool fourth = !first & !second & !third;
          // The gradient's bits kept or cleared (a float select that
          // vectorizes; 0.0f where not kept).
          uint32_t gb;
          std::memcpy(&gb, &g[ch], sizeof(gb));
          const uint32_t v0 = gb & -static_cast<uint32_t>(first);
          const uint32_t v1 = gb & -static_cast<uint32_t>(second);
          const uint32_t v2 = gb & -static_cast<uint32_t>(third);
          const uint32_t v3 = gb & -static_cast<uint32_t>(fourth);
          std::memcpy(&d00[ch], &v0, sizeof(v0));
          std::memcpy(&d01[ch], &v1, sizeof(v1));
          std::memcpy(&d10[ch], &v2, sizeof(v2));
          std::memcpy(&d11[ch], &v3, sizeof(v3));
        }
      }
    }
  }
}

// A bfloat16's value: its bits are a float's upper half.
inline float Bf16(uint16_t b) {
  uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
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

void MaxPool2x2Bf16(const uint16_t* xv, int64_t n, int64_t h, int64_t w, int64_t c, uint16_t* yv) {
  const int64_t oh = h / 2, ow = w / 2;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const uint16_t* p00 = xv + ((b * h + 2 * i) * w + 2 * j) * c;
        const uint16_t* p01 = p00 + c;
        const uint16_t* p10 = p00 + w * c;
        const uint16_t* p11 = p10 + c;
        uint16_t* out = yv + ((b * oh + i) * ow + j) * c;
#pragma omp simd
        for (int64_t ch = 0; ch < c; ++ch) {
          // As std::max: the first of equal values, in the float version's order.
          const uint16_t top = Bf16(p00[ch]) < Bf16(p01[ch]) ? p01[ch] : p00[ch];
          const uint16_t bottom = Bf16(p10[ch]) < Bf16(p11[ch]) ? p11[ch] : p10[ch];
          out[ch] = Bf16(top) < Bf16(bottom) ? bottom : top;
        }
      }
    }
  }
}

void MaxPool2x2BackwardBf16(const uint16_t* xv, const uint16_t* dyv, int64_t n, int64_t h,
                            int64_t w, int64_t c, uint16_t* dxv) {
  const int64_t oh = h / 2, ow = w / 2;
  if (h % 2 != 0 || w % 2 != 0) std::memset(dxv, 0, n * h * w * c * sizeof(uint16_t));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t base = ((b * h + 2 * i) * w + 2 * j) * c;
        const uint16_t* x00 = xv + base;
        const uint16_t* x01 = x00 + c;
        const uint16_t* x10 = x00 + w * c;
        const uint16_t* x11 = x10 + c;
        uint16_t* d00 = dxv + base;
        uint16_t* d01 = d00 + c;
        uint16_t* d10 = d00 + w * c;
        uint16_t* d11 = d10 + c;
        const uint16_t* g = dyv + ((b * oh + i) * ow + j) * c;
#pragma omp simd
        for (int64_t ch = 0; ch < c; ++ch) {
          // The first maximum in row-major window order wins ties.
          // Branch-free (bitwise & of the comparisons), so that it vectorizes.
          const float a = Bf16(x00[ch]), bb = Bf16(x01[ch]), cc = Bf16(x10[ch]), dd = Bf16(x11[ch]);
          const bool first = (a >= bb) & (a >= cc) & (a >= dd);
          const bool second = !first & (bb >= cc) & (bb >= dd);
          const bool third = !first & !second & (cc >= dd);
          const bool fourth = !first & !second & !third;
          const uint16_t gv = g[ch];
          d00[ch] = static_cast<uint16_t>(gv & -static_cast<uint16_t>(first));
          d01[ch] = static_cast<uint16_t>(gv & -static_cast<uint16_t>(second));
          d10[ch] = static_cast<uint16_t>(gv & -static_cast<uint16_t>(third));
          d11[ch] = static_cast<uint16_t>(gv & -static_cast<uint16_t>(fourth));
        }
      }
    }
  }
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
