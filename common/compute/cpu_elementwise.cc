#include "common/compute/cpu_elementwise.h"

#include <cmath>
#include <cstring>

namespace psc {
namespace compute {
namespace cpu {

void Activate(Activation f, float alpha, const float* x, float* y, int64_t n) {
  switch (f) {
    case Activation::kRelu:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
      break;
    case Activation::kLeakyRelu:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
      break;
    case Activation::kSigmoid:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
      break;
    case Activation::kTanh:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
      break;
  }
}

void ActivateBackward(Activation f, float alpha, const float* y, const float* dy, float* dx,
                      int64_t n) {
  switch (f) {
    case Activation::kRelu:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
      break;
    case Activation::kLeakyRelu:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : alpha * dy[i];
      break;
    case Activation::kSigmoid:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
      break;
    case Activation::kTanh:
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
      break;
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

void Multiply(const float* a, const float* b, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
