#include "common/compute/reference/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psc {
namespace compute {
namespace reference {
namespace {

// A size mismatch is a bug in the calling test, not a runtime condition.
void CheckSize(const char* op, const char* what, const std::vector<double>& v, int64_t want) {
  if (static_cast<int64_t>(v.size()) == want) return;
  std::fprintf(stderr, "reference::%s: %s has %zu elements, want %lld\n", op, what, v.size(),
               static_cast<long long>(want));
  std::abort();
}

// Row-major offsets.
inline int64_t At4(int64_t i0, int64_t i1, int64_t i2, int64_t i3, int64_t d1, int64_t d2,
                   int64_t d3) {
  return ((i0 * d1 + i1) * d2 + i2) * d3 + i3;
}
inline int64_t At2(int64_t i0, int64_t i1, int64_t d1) { return i0 * d1 + i1; }

}  // namespace

std::vector<double> Conv2D(const std::vector<double>& x, int n, int h, int w, int c,
                           const std::vector<double>& k, const std::vector<double>& b, int kout,
                           bool relu) {
  CheckSize("Conv2D", "x", x, int64_t{n} * h * w * c);
  CheckSize("Conv2D", "k", k, int64_t{9} * c * kout);
  CheckSize("Conv2D", "b", b, kout);
  std::vector<double> y(int64_t{n} * h * w * kout);
  for (int in = 0; in < n; ++in) {
    for (int oy = 0; oy < h; ++oy) {
      for (int ox = 0; ox < w; ++ox) {
        for (int ok = 0; ok < kout; ++ok) {
          double s = b[ok];
          for (int ky = 0; ky < 3; ++ky) {
            const int iy = oy + ky - 1;
            if (iy < 0 || iy >= h) continue;
            for (int kx = 0; kx < 3; ++kx) {
              const int ix = ox + kx - 1;
              if (ix < 0 || ix >= w) continue;
              for (int ic = 0; ic < c; ++ic) {
                s += x[At4(in, iy, ix, ic, h, w, c)] * k[At4(ky, kx, ic, ok, 3, c, kout)];
              }
            }
          }
          y[At4(in, oy, ox, ok, h, w, kout)] = relu ? std::max(s, 0.0) : s;
        }
      }
    }
  }
  return y;
}

std::vector<double> Conv2DBackwardData(const std::vector<double>& dy, int n, int h, int w, int kout,
                                       const std::vector<double>& k, int c) {
  CheckSize("Conv2DBackwardData", "dy", dy, int64_t{n} * h * w * kout);
  CheckSize("Conv2DBackwardData", "k", k, int64_t{9} * c * kout);
  // The transpose of Conv2D's loop: y[oy,ox] read x[oy+ky-1, ox+kx-1].
  std::vector<double> dx(int64_t{n} * h * w * c);
  for (int in = 0; in < n; ++in) {
    for (int oy = 0; oy < h; ++oy) {
      for (int ox = 0; ox < w; ++ox) {
        for (int ky = 0; ky < 3; ++ky) {
          const int iy = oy + ky - 1;
          if (iy < 0 || iy >= h) continue;
          for (int kx = 0; kx < 3; ++kx) {
            const int ix = ox + kx - 1;
            if (ix < 0 || ix >= w) continue;
            for (int ic = 0; ic < c; ++ic) {
              double s = 0;
              for (int ok = 0; ok < kout; ++ok) {
                s += dy[At4(in, oy, ox, ok, h, w, kout)] * k[At4(ky, kx, ic, ok, 3, c, kout)];
              }
              dx[At4(in, iy, ix, ic, h, w, c)] += s;
            }
          }
        }
      }
    }
  }
  return dx;
}

WeightGrads Conv2DBackwardWeights(const std::vector<double>& x, int n, int h, int w, int c,
                                  const std::vector<double>& dy, int kout) {
  CheckSize("Conv2DBackwardWeights", "x", x, int64_t{n} * h * w * c);
  CheckSize("Conv2DBackwardWeights", "dy", dy, int64_t{n} * h * w * kout);
  WeightGrads g;
  g.dw.assign(int64_t{9} * c * kout, 0.0);
  g.db.assign(kout, 0.0);
  for (int in = 0; in < n; ++in) {
    for (int oy = 0; oy < h; ++oy) {
      for (int ox = 0; ox < w; ++ox) {
        for (int ok = 0; ok < kout; ++ok) {
          const double d = dy[At4(in, oy, ox, ok, h, w, kout)];
          g.db[ok] += d;
          for (int ky = 0; ky < 3; ++ky) {
            const int iy = oy + ky - 1;
            if (iy < 0 || iy >= h) continue;
            for (int kx = 0; kx < 3; ++kx) {
              const int ix = ox + kx - 1;
              if (ix < 0 || ix >= w) continue;
              for (int ic = 0; ic < c; ++ic) {
                g.dw[At4(ky, kx, ic, ok, 3, c, kout)] += x[At4(in, iy, ix, ic, h, w, c)] * d;
              }
            }
          }
        }
      }
    }
  }
  return g;
}

std::vector<double> Activate(int f, double alpha, const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    switch (f) {
      case 0:
        y[i] = std::max(v, 0.0);
        break;
      case 1:
        y[i] = 1.0 / (1.0 + std::exp(-v));
        break;
      case 2:
        y[i] = std::tanh(v);
        break;
      default:
        y[i] = v > 0 ? v : alpha * v;
    }
  }
  return y;
}

std::vector<double> ActivateBackward(int f, double alpha, const std::vector<double>& y,
                                     const std::vector<double>& dy) {
  CheckSize("ActivateBackward", "dy", dy, static_cast<int64_t>(y.size()));
  std::vector<double> dx(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    switch (f) {
      case 0:
        dx[i] = y[i] > 0 ? dy[i] : 0.0;
        break;
      case 1:
        dx[i] = dy[i] * y[i] * (1 - y[i]);
        break;
      case 2:
        dx[i] = dy[i] * (1 - y[i] * y[i]);
        break;
      default:
        dx[i] = y[i] > 0 ? dy[i] : alpha * dy[i];
    }
  }
  return dx;
}

std::vector<double> GlobalPool(bool max, const std::vector<double>& x, int n, int h, int w, int c) {
  CheckSize("GlobalPool", "x", x, int64_t{n} * h * w * c);
  std::vector<double> y(int64_t{n} * c);
  const int64_t hw = int64_t{h} * w;
  for (int b = 0; b < n; ++b) {
    for (int ch = 0; ch < c; ++ch) {
      double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t p = 0; p < hw; ++p) {
        const double v = x[(b * hw + p) * c + ch];
        acc = max ? std::max(acc, v) : acc + v;
      }
      y[int64_t{b} * c + ch] = max ? acc : acc / static_cast<double>(hw);
    }
  }
  return y;
}

std::vector<double> GlobalPoolBackward(bool max, const std::vector<double>& x, int n, int h, int w,
                                       int c, const std::vector<double>& dy) {
  CheckSize("GlobalPoolBackward", "x", x, int64_t{n} * h * w * c);
  CheckSize("GlobalPoolBackward", "dy", dy, int64_t{n} * c);
  const int64_t hw = int64_t{h} * w;
  std::vector<double> dx(x.size(), 0.0);
  for (int b = 0; b < n; ++b) {
    for (int ch = 0; ch < c; ++ch) {
      const double g = dy[int64_t{b} * c + ch];
      if (!max) {
        for (int64_t p = 0; p < hw; ++p) dx[(b * hw + p) * c + ch] = g / static_cast<double>(hw);
        continue;
      }
      int64_t best = 0;
      for (int64_t p = 1; p < hw; ++p) {
        if (x[(b * hw + p) * c + ch] > x[(b * hw + best) * c + ch]) best = p;
      }
      dx[(b * hw + best) * c + ch] = g;
    }
  }
  return dx;
}

std::vector<double> AvgPool2x2(const std::vector<double>& x, int n, int h, int w, int c) {
  CheckSize("AvgPool2x2", "x", x, int64_t{n} * h * w * c);
  const int oh = h / 2, ow = w / 2;
  std::vector<double> y(int64_t{n} * oh * ow * c);
  for (int b = 0; b < n; ++b) {
    for (int i = 0; i < oh; ++i) {
      for (int j = 0; j < ow; ++j) {
        for (int ch = 0; ch < c; ++ch) {
          double sum = 0;
          for (int di = 0; di < 2; ++di) {
            for (int dj = 0; dj < 2; ++dj) {
              sum += x[((int64_t{b} * h + 2 * i + di) * w + 2 * j + dj) * c + ch];
            }
          }
          y[((int64_t{b} * oh + i) * ow + j) * c + ch] = sum / 4;
        }
      }
    }
  }
  return y;
}

std::vector<double> AvgPool2x2Backward(int n, int h, int w, int c, const std::vector<double>& dy) {
  const int oh = h / 2, ow = w / 2;
  CheckSize("AvgPool2x2Backward", "dy", dy, int64_t{n} * oh * ow * c);
  std::vector<double> dx(int64_t{n} * h * w * c, 0.0);
  for (int b = 0; b < n; ++b) {
    for (int i = 0; i < oh; ++i) {
      for (int j = 0; j < ow; ++j) {
        for (int ch = 0; ch < c; ++ch) {
          const double g = dy[((int64_t{b} * oh + i) * ow + j) * c + ch] / 4;
          for (int di = 0; di < 2; ++di) {
            for (int dj = 0; dj < 2; ++dj) {
              dx[((int64_t{b} * h + 2 * i + di) * w + 2 * j + dj) * c + ch] = g;
            }
          }
        }
      }
    }
  }
  return dx;
}

std::vector<double> Relu(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = std::max(x[i], 0.0);
  return y;
}

std::vector<double> ReluBackward(const std::vector<double>& y, const std::vector<double>& dy) {
  CheckSize("ReluBackward", "dy", dy, static_cast<int64_t>(y.size()));
  std::vector<double> dx(y.size());
  for (size_t i = 0; i < y.size(); ++i) dx[i] = y[i] > 0 ? dy[i] : 0.0;
  return dx;
}

std::vector<double> MaxPool2x2(const std::vector<double>& x, int n, int h, int w, int c) {
  CheckSize("MaxPool2x2", "x", x, int64_t{n} * h * w * c);
  const int oh = h / 2, ow = w / 2;
  std::vector<double> y(int64_t{n} * oh * ow * c);
  for (int in = 0; in < n; ++in) {
    for (int oy = 0; oy < oh; ++oy) {
      for (int ox = 0; ox < ow; ++ox) {
        for (int ic = 0; ic < c; ++ic) {
          double m = x[At4(in, 2 * oy, 2 * ox, ic, h, w, c)];
          for (int dy = 0; dy < 2; ++dy) {
            for (int dx = 0; dx < 2; ++dx) {
              m = std::max(m, x[At4(in, 2 * oy + dy, 2 * ox + dx, ic, h, w, c)]);
            }
          }
          y[At4(in, oy, ox, ic, oh, ow, c)] = m;
        }
      }
    }
  }
  return y;
}

std::vector<double> MaxPool2x2Backward(const std::vector<double>& x, int n, int h, int w, int c,
                                       const std::vector<double>& dy) {
  const int oh = h / 2, ow = w / 2;
  CheckSize("MaxPool2x2Backward", "x", x, int64_t{n} * h * w * c);
  CheckSize("MaxPool2x2Backward", "dy", dy, int64_t{n} * oh * ow * c);
  std::vector<double> dx(x.size());
  for (int in = 0; in < n; ++in) {
    for (int oy = 0; oy < oh; ++oy) {
      for (int ox = 0; ox < ow; ++ox) {
        for (int ic = 0; ic < c; ++ic) {
          // Row-major window order; a later element wins only if strictly larger.
          int64_t best = At4(in, 2 * oy, 2 * ox, ic, h, w, c);
          for (int wy = 0; wy < 2; ++wy) {
            for (int wx = 0; wx < 2; ++wx) {
              const int64_t i = At4(in, 2 * oy + wy, 2 * ox + wx, ic, h, w, c);
              if (x[i] > x[best]) best = i;
            }
          }
          dx[best] += dy[At4(in, oy, ox, ic, oh, ow, c)];
        }
      }
    }
  }
  return dx;
}

std::vector<double> Dense(const std::vector<double>& x, int n, int k, const std::vector<double>& wk,
                          const std::vector<double>& b, int m, bool relu) {
  CheckSize("Dense", "x", x, int64_t{n} * k);
  CheckSize("Dense", "w", wk, int64_t{k} * m);
  CheckSize("Dense", "b", b, m);
  std::vector<double> y(int64_t{n} * m);
  for (int in = 0; in < n; ++in) {
    for (int om = 0; om < m; ++om) {
      double s = b[om];
      for (int ik = 0; ik < k; ++ik) s += x[At2(in, ik, k)] * wk[At2(ik, om, m)];
      y[At2(in, om, m)] = relu ? std::max(s, 0.0) : s;
    }
  }
  return y;
}

std::vector<double> DenseBackwardData(const std::vector<double>& dy, int n, int m,
                                      const std::vector<double>& wk, int k) {
  CheckSize("DenseBackwardData", "dy", dy, int64_t{n} * m);
  CheckSize("DenseBackwardData", "w", wk, int64_t{k} * m);
  std::vector<double> dx(int64_t{n} * k);
  for (int in = 0; in < n; ++in) {
    for (int ik = 0; ik < k; ++ik) {
      double s = 0;
      for (int om = 0; om < m; ++om) s += dy[At2(in, om, m)] * wk[At2(ik, om, m)];
      dx[At2(in, ik, k)] = s;
    }
  }
  return dx;
}

WeightGrads DenseBackwardWeights(const std::vector<double>& x, int n, int k,
                                 const std::vector<double>& dy, int m) {
  CheckSize("DenseBackwardWeights", "x", x, int64_t{n} * k);
  CheckSize("DenseBackwardWeights", "dy", dy, int64_t{n} * m);
  WeightGrads g;
  g.dw.assign(int64_t{k} * m, 0.0);
  g.db.assign(m, 0.0);
  for (int in = 0; in < n; ++in) {
    for (int om = 0; om < m; ++om) {
      const double d = dy[At2(in, om, m)];
      g.db[om] += d;
      for (int ik = 0; ik < k; ++ik) g.dw[At2(ik, om, m)] += x[At2(in, ik, k)] * d;
    }
  }
  return g;
}

absl::StatusOr<SoftmaxCrossEntropyResult> SoftmaxCrossEntropy(const std::vector<double>& logits,
                                                              int n, int m,
                                                              const std::vector<int32_t>& labels,
                                                              double grad_scale) {
  CheckSize("SoftmaxCrossEntropy", "logits", logits, int64_t{n} * m);
  if (static_cast<int64_t>(labels.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("SoftmaxCrossEntropy: ", labels.size(), " labels for ", n, " rows"));
  }
  for (int in = 0; in < n; ++in) {
    if (labels[in] < 0 || labels[in] >= m) {
      return absl::InvalidArgumentError(absl::StrCat("SoftmaxCrossEntropy: label ", labels[in],
                                                     " of row ", in, " is outside [0, ", m, ")"));
    }
  }
  SoftmaxCrossEntropyResult r;
  r.dlogits.resize(int64_t{n} * m);
  for (int in = 0; in < n; ++in) {
    const double* row = &logits[At2(in, 0, m)];
    int argmax = 0;
    for (int j = 1; j < m; ++j) {
      if (row[j] > row[argmax]) argmax = j;
    }
    const double max = row[argmax];
    double sum = 0;
    for (int j = 0; j < m; ++j) sum += std::exp(row[j] - max);
    const double log_sum = std::log(sum);
    const int label = labels[in];
    // -log p[label] = log(sum_j exp(l_j - max)) - (l_label - max).
    r.loss_sum += log_sum - (row[label] - max);
    if (argmax == label) ++r.correct;
    for (int j = 0; j < m; ++j) {
      const double p = std::exp(row[j] - max - log_sum);
      r.dlogits[At2(in, j, m)] = (p - (j == label ? 1.0 : 0.0)) * grad_scale;
    }
  }
  return r;
}

std::vector<double> RandomUniform(std::mt19937* rng, size_t count, double lo, double hi) {
  std::vector<double> v(count);
  for (double& e : v) {
    const double u = static_cast<double>((*rng)() >> 8) * (1.0 / 16777216.0);  // [0, 1), 24 bits
    e = static_cast<float>(lo + (hi - lo) * u);
  }
  return v;
}

std::vector<double> RandomDistinct(std::mt19937* rng, size_t count, double lo, double hi) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i) {
    v[i] =
        static_cast<float>(count == 1 ? lo : lo + (hi - lo) * static_cast<double>(i) / (count - 1));
  }
  for (size_t i = count; i > 1; --i) {
    const size_t j = (*rng)() % i;  // the tiny modulo bias does not matter here
    std::swap(v[i - 1], v[j]);
  }
  return v;
}

std::vector<double> NumericalGradient(const std::function<double(const std::vector<double>&)>& f,
                                      const std::vector<double>& x, double eps) {
  std::vector<double> g(x.size());
  std::vector<double> xp = x;
  for (size_t i = 0; i < x.size(); ++i) {
    xp[i] = x[i] + eps;
    const double plus = f(xp);
    xp[i] = x[i] - eps;
    const double minus = f(xp);
    xp[i] = x[i];
    g[i] = (plus - minus) / (2 * eps);
  }
  return g;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  CheckSize("Dot", "b", b, static_cast<int64_t>(a.size()));
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace reference
}  // namespace compute
}  // namespace psc
