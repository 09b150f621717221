#include "common/compute/cpu_elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/compute/activation_math.h"

namespace psc {
namespace compute {
namespace cpu {

void Activate(Activation f, float alpha, const float* x, float* y, int64_t n) {
  switch (f) {
    // Each element loaded before the choice, so the loop is a vector blend
    // (a conditional load keeps it a scalar branch).
    case Activation::kRelu:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
      }
      break;
    case Activation::kLeakyRelu:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : alpha * v;
      }
      break;
    case Activation::kSigmoid:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
      break;
    case Activation::kTanh:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
      break;
    default: {
      const int fi = static_cast<int>(f);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) y[i] = activation::Apply(fi, alpha, x[i]);
      break;
    }
  }
}

void Softmax(const float* x, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) activation::SoftmaxRow(x + r * cols, y + r * cols, cols);
}

void SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    activation::SoftmaxRowGradient(y + r * cols, dy + r * cols, dx + r * cols, cols);
  }
}

void ActivateBackward(Activation f, float alpha, const float* y, const float* dy, float* dx,
                      int64_t n) {
  switch (f) {
    // As Activate: both loaded first, then a blend (measured on the ResNet
    // of issue 37: the branchy loop was 23% of its step on one thread).
    case Activation::kRelu:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const float v = y[i], g = dy[i];
        dx[i] = v > 0.0f ? g : 0.0f;
      }
      break;
    case Activation::kLeakyRelu:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const float v = y[i], g = dy[i];
        dx[i] = v > 0.0f ? g : alpha * g;
      }
      break;
    case Activation::kSigmoid:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
      break;
    case Activation::kTanh:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
      break;
    default: {
      const int fi = static_cast<int>(f);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] = activation::Gradient(fi, alpha, y[i], dy[i]);
      break;
    }
  }
}

void GlobalPool(GlobalPooling kind, const float* x, int64_t images, int64_t hw, int64_t c,
                float* y) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < images; ++i) {
    const float* in = x + i * hw * c;
    float* out = y + i * c;
    std::memcpy(out, in, c * sizeof(float));
    for (int64_t p = 1; p < hw; ++p) {
      const float* row = in + p * c;
      if (kind == GlobalPooling::kMax) {
        for (int64_t ch = 0; ch < c; ++ch) out[ch] = row[ch] > out[ch] ? row[ch] : out[ch];
      } else {
        for (int64_t ch = 0; ch < c; ++ch) out[ch] += row[ch];
      }
    }
    if (kind == GlobalPooling::kAverage) {
      const float scale = 1.0f / static_cast<float>(hw);
      for (int64_t ch = 0; ch < c; ++ch) out[ch] *= scale;
    }
  }
}

void GlobalPoolBackward(GlobalPooling kind, const float* x, const float* dy, int64_t images,
                        int64_t hw, int64_t c, float* dx) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < images; ++i) {
    const float* g = dy + i * c;
    float* out = dx + i * hw * c;
    if (kind == GlobalPooling::kAverage) {
      const float scale = 1.0f / static_cast<float>(hw);
      for (int64_t p = 0; p < hw; ++p) {
        for (int64_t ch = 0; ch < c; ++ch) out[p * c + ch] = g[ch] * scale;
      }
      continue;
    }
    std::memset(out, 0, hw * c * sizeof(float));
    const float* in = x + i * hw * c;
    for (int64_t ch = 0; ch < c; ++ch) {
      int64_t best = 0;  // the first maximum in row-major order
      for (int64_t p = 1; p < hw; ++p) {
        if (in[p * c + ch] > in[best * c + ch]) best = p;
      }
      out[best * c + ch] = g[ch];
    }
  }
}

void Multiply(const float* a, const float* b, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void Add(const float* a, const float* b, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void ReluBackward(const float* __restrict y, const float* dy, float* dx, int64_t n) {
  if (dx == dy) {  // in place: one stream fewer
    float* __restrict d = dx;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = y[i] > 0.0f ? d[i] : 0.0f;
    return;
  }
  const float* __restrict dyr = dy;
  float* __restrict dxr = dx;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dxr[i] = y[i] > 0.0f ? dyr[i] : 0.0f;
}

void ReluBackward16(bool bf16, const uint16_t* __restrict y, const uint16_t* dy, uint16_t* dx,
                    int64_t n) {
  // y > 0 (not NaN): its bits in [1, +infinity's], i.e. bits - 1 below
  // +infinity's as unsigned 16-bit; branch-free, so that it vectorizes.
  const uint16_t inf = bf16 ? 0x7f80 : 0x7c00;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t keep = static_cast<uint16_t>(y[i] - 1) < inf ? 0xffff : 0;
    dx[i] = static_cast<uint16_t>(dy[i] & keep);
  }
}

void Relu16(const uint16_t* x, uint16_t* y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] & 0x8000) != 0 ? 0 : x[i];
}

namespace {

inline float FromBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even, branch-free so that the loop vectorizes; a NaN
// keeps its sign and top bits, made quiet.
inline uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
}

}  // namespace

void AddBf16(const uint16_t* a, const uint16_t* b, uint16_t* y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = ToBf16(FromBf16(a[i]) + FromBf16(b[i]));
}

void Extremum(bool max, const float* a, const float* b, float* y, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = activation::Extremum(max, a[i], b[i]);
}

void ExtremumGradient(bool max, const float* a, const float* b, const float* dy, float* da,
                      int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) da[i] = activation::ExtremumGradient(max, a[i], b[i], dy[i]);
}

void Scale(const float* x, float s, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = s * x[i];
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
