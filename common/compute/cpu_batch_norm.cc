#include "common/compute/cpu_batch_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace psc {
namespace compute {
namespace cpu {
namespace {

// The batch is cut into at most this many chunks of whole examples.
constexpr int64_t kChunks = 16;

// Per channel, the sums over the batch of f(element index, channel) and
// of g(element index, channel), as double, in one pass over the elements
// (g may be null: one sum): each chunk sums on one thread, then the
// chunks add in order. Each sum's order is that of a pass of its own.
template <typename F, typename G>
void ChannelSums(const ChannelLayout& l, F f, G g, std::vector<double>* f_sum,
                 std::vector<double>* g_sum) {
  const int64_t c = l.channels();
  const int64_t chunks = std::min(kChunks, std::max<int64_t>(l.n, 1));
  std::vector<double> part(chunks * c, 0.0), g_part(g_sum != nullptr ? chunks * c : 0, 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    double* acc = part.data() + k * c;
    double* g_acc = g_sum != nullptr ? g_part.data() + k * c : nullptr;
    const int64_t first = l.n * k / chunks, last = l.n * (k + 1) / chunks;
    for (int64_t i = first; i < last; ++i) {
      for (int64_t blk = 0; blk < l.blocks; ++blk) {
        double* a = acc + blk * l.b;
        const int64_t base = (i * l.blocks + blk) * l.hw * l.b;
        if (g_acc == nullptr) {
          for (int64_t p = 0; p < l.hw; ++p) {
            for (int64_t j = 0; j < l.b; ++j) a[j] += f(base + p * l.b + j, blk * l.b + j);
          }
          continue;
        }
        double* ga = g_acc + blk * l.b;
        for (int64_t p = 0; p < l.hw; ++p) {
          for (int64_t j = 0; j < l.b; ++j) {
            a[j] += f(base + p * l.b + j, blk * l.b + j);
            ga[j] += g(base + p * l.b + j, blk * l.b + j);
          }
        }
      }
    }
  }
  for (auto [out, in] : {std::pair{f_sum, &part}, std::pair{g_sum, &g_part}}) {
    if (out == nullptr) continue;
    out->assign(c, 0.0);
    for (int64_t k = 0; k < chunks; ++k) {
      for (int64_t ch = 0; ch < c; ++ch) (*out)[ch] += (*in)[k * c + ch];
    }
  }
}

// One sum per channel of f.
template <typename F>
std::vector<double> ChannelSums(const ChannelLayout& l, F f) {
  std::vector<double> sum;
  ChannelSums(l, f, f, &sum, nullptr);
  return sum;
}

// out[e] = g(e, channel of e) for every element e.
template <typename G>
void ForEachElement(const ChannelLayout& l, G g) {
  const int64_t images = l.n * l.blocks;
#pragma omp parallel for schedule(static)
  for (int64_t img = 0; img < images; ++img) {
    const int64_t blk = img % l.blocks;
    const int64_t base = img * l.hw * l.b;
    for (int64_t p = 0; p < l.hw; ++p) {
      for (int64_t j = 0; j < l.b; ++j) g(base + p * l.b + j, blk * l.b + j);
    }
  }
}

// y = (x - mean) * scale + beta per channel, scale = gamma / sqrt(variance
// + epsilon), each element in double and rounded once. The mean comes off
// before scaling, as Keras computes it: x * scale + (beta - mean * scale)
// in float32 loses the difference to rounding where |mean| is large
// against the spread, and a float32 mean loses it where the spread is tiny
// (scale large); either moved a small ResNet's gradients by 1e-3 to 3e-2 of
// Keras's (tests/interop/keras_models.py).
void Normalize(const ChannelLayout& l, const float* x, const float* gamma, const float* beta,
               const double* mean, const double* variance, float epsilon, float* y) {
  const int64_t c = l.channels();
  std::vector<double> scale(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    scale[ch] = gamma[ch] / std::sqrt(variance[ch] + static_cast<double>(epsilon));
  }
  ForEachElement(l, [&](int64_t e, int64_t ch) {
    y[e] = static_cast<float>((double{x[e]} - mean[ch]) * scale[ch] + beta[ch]);
  });
}

}  // namespace

void SumPerChannel(const ChannelLayout& l, const float* x, float* out) {
  const std::vector<double> sum = ChannelSums(l, [&](int64_t e, int64_t) { return double{x[e]}; });
  for (int64_t ch = 0; ch < l.channels(); ++ch) out[ch] = static_cast<float>(sum[ch]);
}

void BatchNorm(const ChannelLayout& l, const float* x, const float* gamma, const float* beta,
               float epsilon, float* y, float* mean, float* variance) {
  const int64_t c = l.channels();
  const double m = static_cast<double>(l.n * l.hw);
  std::vector<double> mu = ChannelSums(l, [&](int64_t e, int64_t) { return double{x[e]}; });
  for (double& v : mu) v /= m;
  std::vector<double> var = ChannelSums(l, [&](int64_t e, int64_t ch) {
    const double d = x[e] - mu[ch];
    return d * d;
  });
  for (double& v : var) v /= m;
  for (int64_t ch = 0; ch < c; ++ch) {
    mean[ch] = static_cast<float>(mu[ch]);
    variance[ch] = static_cast<float>(var[ch]);
  }
  Normalize(l, x, gamma, beta, mu.data(), var.data(), epsilon, y);
}

void BatchNormInference(const ChannelLayout& l, const float* x, const float* gamma,
                        const float* beta, const float* mean, const float* variance, float epsilon,
                        float* y) {
  const std::vector<double> mu(mean, mean + l.channels()), var(variance, variance + l.channels());
  Normalize(l, x, gamma, beta, mu.data(), var.data(), epsilon, y);
}

void BatchNormBackward(const ChannelLayout& l, const float* x, const float* dy, const float* gamma,
                       const float* mean, const float* variance, float epsilon, float* dx,
                       float* dgamma, float* dbeta) {
  const int64_t c = l.channels();
  const double m = static_cast<double>(l.n * l.hw);
  std::vector<double> inv(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    inv[ch] = 1.0 / std::sqrt(static_cast<double>(variance[ch]) + epsilon);
  }
  std::vector<double> sum_dy, sum_dy_xhat;  // in one pass over dy and x
  ChannelSums(
      l, [&](int64_t e, int64_t) { return double{dy[e]}; },
      [&](int64_t e, int64_t ch) { return double{dy[e]} * ((x[e] - double{mean[ch]}) * inv[ch]); },
      &sum_dy, &sum_dy_xhat);
  std::vector<double> scale(c), mean_dy(c), slope(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    dbeta[ch] = static_cast<float>(sum_dy[ch]);
    dgamma[ch] = static_cast<float>(sum_dy_xhat[ch]);
    // dx = gamma * inv * (dy - sum_dy / m - xhat * sum_dy_xhat / m), with
    // xhat = (x - mean) * inv: scale * ((dy - mean_dy) - (x - mean) *
    // slope), each element in double and rounded once (dy's mean taken
    // off before scaling, as autodiff of Keras's forward does: where dy is
    // nearly constant over a channel, dx is a small difference).
    scale[ch] = gamma[ch] * inv[ch];
    mean_dy[ch] = sum_dy[ch] / m;
    slope[ch] = sum_dy_xhat[ch] / m * inv[ch];
  }
  ForEachElement(l, [&](int64_t e, int64_t ch) {
    dx[e] = static_cast<float>(scale[ch] * ((double{dy[e]} - mean_dy[ch]) -
                                            (double{x[e]} - double{mean[ch]}) * slope[ch]));
  });
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
