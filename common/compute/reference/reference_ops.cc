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

void Extent(int in, int size, int stride, bool same, int* out, int* before) {
  // Keras's rule (TensorFlow's and JAX's "SAME" and "VALID"), written out
  // here on its own rather than taken from the backends' WindowAlong.
  if (!same) {
    *out = in < size ? 0 : (in - size) / stride + 1;
    *before = 0;
    return;
  }
  *out = (in + stride - 1) / stride;
  const int total = std::max((*out - 1) * stride + size - in, 0);
  *before = total / 2;
}

namespace {

// The geometry of one windowed op: input h x w, output oh x ow, and the
// input row and column a window's (0, 0) element reads at output (oy, ox).
struct Geometry {
  int oh = 0, ow = 0, top = 0, left = 0;
  Geometry(int h, int w, const Window2D& win) {
    Extent(h, (win.kh - 1) * win.dil_h + 1, win.sh, win.same, &oh, &top);
    Extent(w, (win.kw - 1) * win.dil_w + 1, win.sw, win.same, &ow, &left);
  }
  int Row(int oy, int ky, const Window2D& win) const { return oy * win.sh - top + ky * win.dil_h; }
  int Col(int ox, int kx, const Window2D& win) const { return ox * win.sw - left + kx * win.dil_w; }
};

// A convolution's groups: input channels per group (the kernel's third
// dimension) and output channels per group.
struct Groups {
  int cg = 0, kg = 0;
  Groups(const char* op, int c, int kout, const Window2D& win) {
    if (win.groups < 1 || c % win.groups != 0 || kout % win.groups != 0) {
      std::fprintf(stderr, "reference::%s: %d and %d channels in %d groups\n", op, c, kout,
                   win.groups);
      std::abort();
    }
    cg = c / win.groups;
    kg = kout / win.groups;
  }
  // The input channel of kernel input index `i` for output channel `o`.
  int Input(int o, int i) const { return o / kg * cg + i; }
};

}  // namespace

std::vector<double> Conv2D(const std::vector<double>& x, int n, int h, int w, int c,
                           const std::vector<double>& k, const std::vector<double>& b, int kout,
                           const Window2D& win, bool relu) {
  CheckSize("Conv2D", "x", x, int64_t{n} * h * w * c);
  const Groups gr("Conv2D", c, kout, win);
  CheckSize("Conv2D", "k", k, int64_t{win.kh} * win.kw * gr.cg * kout);
  if (!b.empty()) CheckSize("Conv2D", "b", b, kout);
  const Geometry g(h, w, win);
  std::vector<double> y(int64_t{n} * g.oh * g.ow * kout);
  for (int in = 0; in < n; ++in) {
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        for (int ok = 0; ok < kout; ++ok) {
          double s = b.empty() ? 0.0 : b[ok];
          for (int ky = 0; ky < win.kh; ++ky) {
            const int iy = g.Row(oy, ky, win);
            if (iy < 0 || iy >= h) continue;
            for (int kx = 0; kx < win.kw; ++kx) {
              const int ix = g.Col(ox, kx, win);
              if (ix < 0 || ix >= w) continue;
              for (int i = 0; i < gr.cg; ++i) {
                s += x[At4(in, iy, ix, gr.Input(ok, i), h, w, c)] *
                     k[At4(ky, kx, i, ok, win.kw, gr.cg, kout)];
              }
            }
          }
          y[At4(in, oy, ox, ok, g.oh, g.ow, kout)] = relu ? std::max(s, 0.0) : s;
        }
      }
    }
  }
  return y;
}

std::vector<double> Conv2DBackwardData(const std::vector<double>& dy, int n, int h, int w, int kout,
                                       const std::vector<double>& k, int c, const Window2D& win) {
  const Geometry g(h, w, win);
  CheckSize("Conv2DBackwardData", "dy", dy, int64_t{n} * g.oh * g.ow * kout);
  const Groups gr("Conv2DBackwardData", c, kout, win);
  CheckSize("Conv2DBackwardData", "k", k, int64_t{win.kh} * win.kw * gr.cg * kout);
  // The transpose of Conv2D's loop.
  std::vector<double> dx(int64_t{n} * h * w * c);
  for (int in = 0; in < n; ++in) {
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        for (int ky = 0; ky < win.kh; ++ky) {
          const int iy = g.Row(oy, ky, win);
          if (iy < 0 || iy >= h) continue;
          for (int kx = 0; kx < win.kw; ++kx) {
            const int ix = g.Col(ox, kx, win);
            if (ix < 0 || ix >= w) continue;
            for (int ok = 0; ok < kout; ++ok) {
              const double d = dy[At4(in, oy, ox, ok, g.oh, g.ow, kout)];
              for (int i = 0; i < gr.cg; ++i) {
                dx[At4(in, iy, ix, gr.Input(ok, i), h, w, c)] +=
                    d * k[At4(ky, kx, i, ok, win.kw, gr.cg, kout)];
              }
            }
          }
        }
      }
    }
  }
  return dx;
}

WeightGrads Conv2DBackwardWeights(const std::vector<double>& x, int n, int h, int w, int c,
                                  const std::vector<double>& dy, int kout, const Window2D& win) {
  const Geometry g(h, w, win);
  CheckSize("Conv2DBackwardWeights", "x", x, int64_t{n} * h * w * c);
  CheckSize("Conv2DBackwardWeights", "dy", dy, int64_t{n} * g.oh * g.ow * kout);
  const Groups gr("Conv2DBackwardWeights", c, kout, win);
  WeightGrads r;
  r.dw.assign(int64_t{win.kh} * win.kw * gr.cg * kout, 0.0);
  r.db.assign(kout, 0.0);
  for (int in = 0; in < n; ++in) {
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        for (int ok = 0; ok < kout; ++ok) {
          const double d = dy[At4(in, oy, ox, ok, g.oh, g.ow, kout)];
          r.db[ok] += d;
          for (int ky = 0; ky < win.kh; ++ky) {
            const int iy = g.Row(oy, ky, win);
            if (iy < 0 || iy >= h) continue;
            for (int kx = 0; kx < win.kw; ++kx) {
              const int ix = g.Col(ox, kx, win);
              if (ix < 0 || ix >= w) continue;
              for (int i = 0; i < gr.cg; ++i) {
                r.dw[At4(ky, kx, i, ok, win.kw, gr.cg, kout)] +=
                    x[At4(in, iy, ix, gr.Input(ok, i), h, w, c)] * d;
              }
            }
          }
        }
      }
    }
  }
  return r;
}

std::vector<double> Activate(int f, double alpha, const std::vector<double>& x) {
  constexpr double kSeluAlpha = 1.67326324235437728481, kSeluScale = 1.05070098735548049342;
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
      case 3:
        y[i] = v > 0 ? v : alpha * v;
        break;
      case 4:
        y[i] = v > 0 ? v : alpha * std::expm1(v);
        break;
      case 5:
        y[i] = v > 0 ? kSeluScale * v : kSeluScale * kSeluAlpha * std::expm1(v);
        break;
      case 6:
        y[i] = std::log1p(std::exp(v));
        break;
      case 7:
        y[i] = v / (1 + std::fabs(v));
        break;
      case 8:
        y[i] = std::min(std::max(v + 3, 0.0), 6.0) / 6;
        break;
      case 9:
        y[i] = std::min(std::max(0.2 * v + 0.5, 0.0), 1.0);
        break;
      case 10:
        y[i] = std::min(std::max(v, 0.0), alpha);
        break;
      case 11:
        y[i] = std::exp(v);
        break;
      case 12:
        y[i] = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
        break;
      default:
        y[i] = v / (1 + std::exp(-v));
    }
  }
  return y;
}

std::vector<double> ActivateBackward(int f, double alpha, const std::vector<double>& y,
                                     const std::vector<double>& dy) {
  constexpr double kSeluAlpha = 1.67326324235437728481, kSeluScale = 1.05070098735548049342;
  CheckSize("ActivateBackward", "dy", dy, static_cast<int64_t>(y.size()));
  std::vector<double> dx(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const double v = y[i], g = dy[i];
    switch (f) {
      case 0:
        dx[i] = v > 0 ? g : 0.0;
        break;
      case 1:
        dx[i] = g * v * (1 - v);
        break;
      case 2:
        dx[i] = g * (1 - v * v);
        break;
      case 3:
        dx[i] = v > 0 ? g : alpha * g;
        break;
      case 4:
        dx[i] = v > 0 ? g : g * (v + alpha);
        break;
      case 5:
        dx[i] = v > 0 ? kSeluScale * g : g * (v + kSeluScale * kSeluAlpha);
        break;
      case 6:
        dx[i] = g * -std::expm1(-v);
        break;
      case 7:
        dx[i] = g * (1 - std::fabs(v)) * (1 - std::fabs(v));
        break;
      case 8:
        dx[i] = v > 0 && v < 1 ? g / 6 : 0.0;
        break;
      case 9:
        dx[i] = v > 0 && v < 1 ? 0.2 * g : 0.0;
        break;
      case 10:
        dx[i] = v > 0 && v < alpha ? g : 0.0;
        break;
      case 11:
        dx[i] = g * v;
        break;
      case 12:  // v is the input
        dx[i] = g * (0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
                     v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI));
        break;
      default: {  // 13, v is the input
        const double s = 1 / (1 + std::exp(-v));
        dx[i] = g * s * (1 + v * (1 - s));
      }
    }
  }
  return dx;
}

std::vector<double> Softmax(const std::vector<double>& x, int64_t cols) {
  std::vector<double> y(x.size());
  if (cols < 1) return y;
  for (size_t r = 0; r + static_cast<size_t>(cols) <= x.size(); r += static_cast<size_t>(cols)) {
    double max = x[r], sum = 0;
    for (int64_t i = 1; i < cols; ++i) max = std::max(max, x[r + i]);
    for (int64_t i = 0; i < cols; ++i) sum += y[r + i] = std::exp(x[r + i] - max);
    for (int64_t i = 0; i < cols; ++i) y[r + i] /= sum;
  }
  return y;
}

std::vector<double> SoftmaxBackward(const std::vector<double>& y, const std::vector<double>& dy,
                                    int64_t cols) {
  std::vector<double> dx(y.size());
  if (cols < 1) return dx;
  for (size_t r = 0; r + static_cast<size_t>(cols) <= y.size(); r += static_cast<size_t>(cols)) {
    double dot = 0;
    for (int64_t i = 0; i < cols; ++i) dot += dy[r + i] * y[r + i];
    for (int64_t i = 0; i < cols; ++i) dx[r + i] = y[r + i] * (dy[r + i] - dot);
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

namespace {

// Calls f(oy, ox, iy, ix) for each output position and each input position
// inside the input that its window covers, in row-major window order.
template <typename F>
void ForEachWindow(int h, int w, const Window2D& win, F f) {
  const Geometry g(h, w, win);
  for (int oy = 0; oy < g.oh; ++oy) {
    for (int ox = 0; ox < g.ow; ++ox) {
      for (int ky = 0; ky < win.kh; ++ky) {
        const int iy = g.Row(oy, ky, win);
        if (iy < 0 || iy >= h) continue;
        for (int kx = 0; kx < win.kw; ++kx) {
          const int ix = g.Col(ox, kx, win);
          if (ix >= 0 && ix < w) f(oy, ox, iy, ix);
        }
      }
    }
  }
}

}  // namespace

std::vector<double> MaxPool(const std::vector<double>& x, int n, int h, int w, int c,
                            const Window2D& win) {
  CheckSize("MaxPool", "x", x, int64_t{n} * h * w * c);
  const Geometry g(h, w, win);
  std::vector<double> y(int64_t{n} * g.oh * g.ow * c, -std::numeric_limits<double>::infinity());
  for (int in = 0; in < n; ++in) {
    ForEachWindow(h, w, win, [&](int oy, int ox, int iy, int ix) {
      for (int ic = 0; ic < c; ++ic) {
        double& m = y[At4(in, oy, ox, ic, g.oh, g.ow, c)];
        m = std::max(m, x[At4(in, iy, ix, ic, h, w, c)]);
      }
    });
  }
  return y;
}

std::vector<double> MaxPoolBackward(const std::vector<double>& x, int n, int h, int w, int c,
                                    const std::vector<double>& dy, const Window2D& win) {
  const Geometry g(h, w, win);
  CheckSize("MaxPoolBackward", "x", x, int64_t{n} * h * w * c);
  CheckSize("MaxPoolBackward", "dy", dy, int64_t{n} * g.oh * g.ow * c);
  // Each window's first maximum in row-major window order (a later element
  // wins only if strictly larger).
  std::vector<int64_t> best(int64_t{n} * g.oh * g.ow * c, -1);
  for (int in = 0; in < n; ++in) {
    ForEachWindow(h, w, win, [&](int oy, int ox, int iy, int ix) {
      for (int ic = 0; ic < c; ++ic) {
        int64_t& b = best[At4(in, oy, ox, ic, g.oh, g.ow, c)];
        const int64_t i = At4(in, iy, ix, ic, h, w, c);
        if (b < 0 || x[i] > x[b]) b = i;
      }
    });
  }
  std::vector<double> dx(x.size(), 0.0);
  for (size_t o = 0; o < best.size(); ++o) dx[best[o]] += dy[o];
  return dx;
}

std::vector<double> AvgPool(const std::vector<double>& x, int n, int h, int w, int c,
                            const Window2D& win) {
  CheckSize("AvgPool", "x", x, int64_t{n} * h * w * c);
  const Geometry g(h, w, win);
  std::vector<double> y(int64_t{n} * g.oh * g.ow * c, 0.0);
  std::vector<int> count(int64_t{g.oh} * g.ow, 0);
  ForEachWindow(h, w, win, [&](int oy, int ox, int, int) { ++count[At2(oy, ox, g.ow)]; });
  for (int in = 0; in < n; ++in) {
    ForEachWindow(h, w, win, [&](int oy, int ox, int iy, int ix) {
      for (int ic = 0; ic < c; ++ic) {
        y[At4(in, oy, ox, ic, g.oh, g.ow, c)] +=
            x[At4(in, iy, ix, ic, h, w, c)] / count[At2(oy, ox, g.ow)];
      }
    });
  }
  return y;
}

std::vector<double> AvgPoolBackward(int n, int h, int w, int c, const std::vector<double>& dy,
                                    const Window2D& win) {
  const Geometry g(h, w, win);
  CheckSize("AvgPoolBackward", "dy", dy, int64_t{n} * g.oh * g.ow * c);
  std::vector<int> count(int64_t{g.oh} * g.ow, 0);
  ForEachWindow(h, w, win, [&](int oy, int ox, int, int) { ++count[At2(oy, ox, g.ow)]; });
  std::vector<double> dx(int64_t{n} * h * w * c, 0.0);
  for (int in = 0; in < n; ++in) {
    ForEachWindow(h, w, win, [&](int oy, int ox, int iy, int ix) {
      for (int ic = 0; ic < c; ++ic) {
        dx[At4(in, iy, ix, ic, h, w, c)] +=
            dy[At4(in, oy, ox, ic, g.oh, g.ow, c)] / count[At2(oy, ox, g.ow)];
      }
    });
  }
  return dx;
}

BatchNormResult BatchNorm(const std::vector<double>& x, int64_t rows, int c,
                          const std::vector<double>& gamma, const std::vector<double>& beta,
                          double epsilon) {
  CheckSize("BatchNorm", "x", x, rows * c);
  BatchNormResult r;
  r.mean.assign(c, 0.0);
  r.variance.assign(c, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int ch = 0; ch < c; ++ch) r.mean[ch] += x[i * c + ch];
  }
  for (int ch = 0; ch < c; ++ch) r.mean[ch] /= static_cast<double>(rows);
  for (int64_t i = 0; i < rows; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const double d = x[i * c + ch] - r.mean[ch];
      r.variance[ch] += d * d;
    }
  }
  for (int ch = 0; ch < c; ++ch) r.variance[ch] /= static_cast<double>(rows);
  r.y = BatchNormInference(x, rows, c, gamma, beta, r.mean, r.variance, epsilon);
  return r;
}

std::vector<double> BatchNormInference(const std::vector<double>& x, int64_t rows, int c,
                                       const std::vector<double>& gamma,
                                       const std::vector<double>& beta,
                                       const std::vector<double>& mean,
                                       const std::vector<double>& variance, double epsilon) {
  CheckSize("BatchNormInference", "x", x, rows * c);
  for (const auto* v : {&gamma, &beta, &mean, &variance}) {
    CheckSize("BatchNormInference", "a per-channel vector", *v, c);
  }
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      y[i * c + ch] =
          (x[i * c + ch] - mean[ch]) / std::sqrt(variance[ch] + epsilon) * gamma[ch] + beta[ch];
    }
  }
  return y;
}

BatchNormGrads BatchNormBackward(const std::vector<double>& x, int64_t rows, int c,
                                 const std::vector<double>& dy, const std::vector<double>& gamma,
                                 double epsilon) {
  CheckSize("BatchNormBackward", "dy", dy, rows * c);
  CheckSize("BatchNormBackward", "gamma", gamma, c);
  const std::vector<double> zeros(c, 0.0);
  const BatchNormResult f = BatchNorm(x, rows, c, gamma, zeros, epsilon);
  BatchNormGrads g;
  g.dgamma.assign(c, 0.0);
  g.dbeta.assign(c, 0.0);
  g.dx.assign(x.size(), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const double xhat = (x[i * c + ch] - f.mean[ch]) / std::sqrt(f.variance[ch] + epsilon);
      g.dbeta[ch] += dy[i * c + ch];
      g.dgamma[ch] += dy[i * c + ch] * xhat;
    }
  }
  const double m = static_cast<double>(rows);
  for (int64_t i = 0; i < rows; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const double inv = 1.0 / std::sqrt(f.variance[ch] + epsilon);
      const double xhat = (x[i * c + ch] - f.mean[ch]) * inv;
      g.dx[i * c + ch] =
          gamma[ch] * inv * (dy[i * c + ch] - g.dbeta[ch] / m - xhat * g.dgamma[ch] / m);
    }
  }
  return g;
}

LayerNormResult LayerNorm(const std::vector<double>& x, int64_t rows, int64_t cols,
                          const std::vector<double>& gamma, const std::vector<double>& beta,
                          double epsilon) {
  CheckSize("LayerNorm", "x", x, rows * cols);
  if (!gamma.empty()) CheckSize("LayerNorm", "gamma", gamma, cols);
  if (!beta.empty()) CheckSize("LayerNorm", "beta", beta, cols);
  LayerNormResult r;
  r.y.assign(x.size(), 0.0);
  r.mean.assign(rows, 0.0);
  r.rstd.assign(rows, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const double* row = x.data() + i * cols;
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += row[j];
    const double mean = sum / static_cast<double>(cols);
    double squares = 0;
    for (int64_t j = 0; j < cols; ++j) squares += (row[j] - mean) * (row[j] - mean);
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(cols) + epsilon);
    for (int64_t j = 0; j < cols; ++j) {
      r.y[i * cols + j] = (row[j] - mean) * rstd * (gamma.empty() ? 1.0 : gamma[j]) +
                          (beta.empty() ? 0.0 : beta[j]);
    }
    r.mean[i] = mean;
    r.rstd[i] = rstd;
  }
  return r;
}

LayerNormGrads LayerNormBackward(const std::vector<double>& x, int64_t rows, int64_t cols,
                                 const std::vector<double>& dy, const std::vector<double>& gamma,
                                 double epsilon) {
  CheckSize("LayerNormBackward", "dy", dy, rows * cols);
  const LayerNormResult f = LayerNorm(x, rows, cols, {}, {}, epsilon);  // y is x-hat
  LayerNormGrads g;
  g.dx.assign(x.size(), 0.0);
  g.dgamma.assign(cols, 0.0);
  g.dbeta.assign(cols, 0.0);
  const double count = static_cast<double>(cols);
  for (int64_t i = 0; i < rows; ++i) {
    // dx = rstd (g - mean(g) - x-hat mean(g x-hat)), g = dy gamma.
    double g_sum = 0, gx_sum = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double gj = dy[i * cols + j] * (gamma.empty() ? 1.0 : gamma[j]);
      g_sum += gj;
      gx_sum += gj * f.y[i * cols + j];
      g.dgamma[j] += dy[i * cols + j] * f.y[i * cols + j];
      g.dbeta[j] += dy[i * cols + j];
    }
    for (int64_t j = 0; j < cols; ++j) {
      const double gj = dy[i * cols + j] * (gamma.empty() ? 1.0 : gamma[j]);
      g.dx[i * cols + j] = f.rstd[i] * (gj - g_sum / count - f.y[i * cols + j] * gx_sum / count);
    }
  }
  return g;
}

namespace {
double SigmoidOf(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

LstmResult LstmCell(const std::vector<double>& z, const std::vector<double>& c_prev, int64_t rows,
                    int64_t units) {
  CheckSize("LstmCell", "z", z, rows * 4 * units);
  if (!c_prev.empty()) CheckSize("LstmCell", "c_prev", c_prev, rows * units);
  LstmResult r;
  r.h.assign(rows * units, 0.0);
  r.c.assign(rows * units, 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    const double* zr = z.data() + row * 4 * units;
    for (int64_t j = 0; j < units; ++j) {
      const int64_t e = row * units + j;
      const double i = SigmoidOf(zr[j]), f = SigmoidOf(zr[units + j]);
      const double g = std::tanh(zr[2 * units + j]), o = SigmoidOf(zr[3 * units + j]);
      r.c[e] = (c_prev.empty() ? 0.0 : f * c_prev[e]) + i * g;
      r.h[e] = o * std::tanh(r.c[e]);
    }
  }
  return r;
}

LstmGrads LstmCellBackward(const std::vector<double>& z, const std::vector<double>& c_prev,
                           const std::vector<double>& dh, const std::vector<double>& dc,
                           int64_t rows, int64_t units) {
  CheckSize("LstmCellBackward", "dh", dh, rows * units);
  if (!dc.empty()) CheckSize("LstmCellBackward", "dc", dc, rows * units);
  const LstmResult f = LstmCell(z, c_prev, rows, units);
  LstmGrads g;
  g.dz.assign(z.size(), 0.0);
  g.dc_prev.assign(rows * units, 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    const double* zr = z.data() + row * 4 * units;
    double* dzr = g.dz.data() + row * 4 * units;
    for (int64_t j = 0; j < units; ++j) {
      const int64_t e = row * units + j;
      const double i = SigmoidOf(zr[j]), fg = SigmoidOf(zr[units + j]);
      const double gg = std::tanh(zr[2 * units + j]), o = SigmoidOf(zr[3 * units + j]);
      const double tc = std::tanh(f.c[e]);
      const double cp = c_prev.empty() ? 0.0 : c_prev[e];
      const double dct = (dc.empty() ? 0.0 : dc[e]) + dh[e] * o * (1 - tc * tc);
      dzr[j] = dct * gg * i * (1 - i);
      dzr[units + j] = dct * cp * fg * (1 - fg);
      dzr[2 * units + j] = dct * i * (1 - gg * gg);
      dzr[3 * units + j] = dh[e] * tc * o * (1 - o);
      g.dc_prev[e] = dct * fg;
    }
  }
  return g;
}

std::vector<double> GruCell(const std::vector<double>& xz, const std::vector<double>& hz,
                            const std::vector<double>& h_prev, int64_t rows, int64_t units) {
  CheckSize("GruCell", "xz", xz, rows * 3 * units);
  CheckSize("GruCell", "hz", hz, rows * 3 * units);
  if (!h_prev.empty()) CheckSize("GruCell", "h_prev", h_prev, rows * units);
  std::vector<double> h(rows * units);
  for (int64_t r = 0; r < rows; ++r) {
    const double *x = xz.data() + r * 3 * units, *hr = hz.data() + r * 3 * units;
    for (int64_t j = 0; j < units; ++j) {
      const int64_t e = r * units + j;
      const double z = SigmoidOf(x[j] + hr[j]), rr = SigmoidOf(x[units + j] + hr[units + j]);
      const double hh = std::tanh(x[2 * units + j] + rr * hr[2 * units + j]);
      h[e] = z * (h_prev.empty() ? 0.0 : h_prev[e]) + (1 - z) * hh;
    }
  }
  return h;
}

GruGrads GruCellBackward(const std::vector<double>& xz, const std::vector<double>& hz,
                         const std::vector<double>& h_prev, const std::vector<double>& dh,
                         int64_t rows, int64_t units) {
  CheckSize("GruCellBackward", "dh", dh, rows * units);
  GruGrads g;
  g.dxz.assign(xz.size(), 0.0);
  g.dhz.assign(hz.size(), 0.0);
  g.dh_prev.assign(rows * units, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double *x = xz.data() + r * 3 * units, *hr = hz.data() + r * 3 * units;
    double *dx = g.dxz.data() + r * 3 * units, *dr = g.dhz.data() + r * 3 * units;
    for (int64_t j = 0; j < units; ++j) {
      const int64_t e = r * units + j;
      const double z = SigmoidOf(x[j] + hr[j]), rr = SigmoidOf(x[units + j] + hr[units + j]);
      const double hh = std::tanh(x[2 * units + j] + rr * hr[2 * units + j]);
      const double hp = h_prev.empty() ? 0.0 : h_prev[e];
      const double dzp = dh[e] * (hp - hh) * z * (1 - z);
      const double dhh = dh[e] * (1 - z) * (1 - hh * hh);
      const double drp = dhh * hr[2 * units + j] * rr * (1 - rr);
      dx[j] = dr[j] = dzp;
      dx[units + j] = dr[units + j] = drp;
      dx[2 * units + j] = dhh;
      dr[2 * units + j] = dhh * rr;
      g.dh_prev[e] = dh[e] * z;
    }
  }
  return g;
}

std::vector<double> Transpose(const std::vector<double>& x, const std::vector<int64_t>& shape,
                              const std::vector<int>& perm) {
  const size_t rank = shape.size();
  if (perm.size() != rank) {
    std::fprintf(stderr, "Transpose: a permutation of %zu axes for rank %zu\n", perm.size(), rank);
    std::abort();
  }
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  CheckSize("Transpose", "x", x, total);
  std::vector<int64_t> stride(rank, 1), out_shape(rank);
  for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * shape[d];
  for (size_t i = 0; i < rank; ++i) out_shape[i] = shape[perm[i]];
  std::vector<double> y(x.size());
  std::vector<int64_t> at(rank, 0);  // the output's coordinates
  for (int64_t o = 0; o < total; ++o) {
    int64_t from = 0;
    for (size_t i = 0; i < rank; ++i) from += at[i] * stride[perm[i]];
    y[o] = x[from];
    for (size_t i = rank; i-- > 0;) {  // the next coordinates, the last axis fastest
      if (++at[i] < out_shape[i]) break;
      at[i] = 0;
    }
  }
  return y;
}

std::vector<double> Dense(const std::vector<double>& x, int n, int k, const std::vector<double>& wk,
                          const std::vector<double>& b, int m, bool relu) {
  CheckSize("Dense", "x", x, int64_t{n} * k);
  CheckSize("Dense", "w", wk, int64_t{k} * m);
  if (!b.empty()) CheckSize("Dense", "b", b, m);
  std::vector<double> y(int64_t{n} * m);
  for (int in = 0; in < n; ++in) {
    for (int om = 0; om < m; ++om) {
      double s = b.empty() ? 0.0 : b[om];
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

absl::StatusOr<SoftmaxCrossEntropyResult> SoftmaxCrossEntropy(
    const std::vector<double>& logits, int n, int m, const std::vector<int32_t>& labels,
    double grad_scale, double label_smoothing, const std::vector<double>& weights) {
  CheckSize("SoftmaxCrossEntropy", "logits", logits, int64_t{n} * m);
  if (static_cast<int64_t>(labels.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("SoftmaxCrossEntropy: ", labels.size(), " labels for ", n, " rows"));
  }
  if (!weights.empty() && static_cast<int64_t>(weights.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("SoftmaxCrossEntropy: ", weights.size(), " weights for ", n, " rows"));
  }
  for (int in = 0; in < n; ++in) {
    if (labels[in] < 0 || labels[in] >= m) {
      return absl::InvalidArgumentError(absl::StrCat("SoftmaxCrossEntropy: label ", labels[in],
                                                     " of row ", in, " is outside [0, ", m, ")"));
    }
  }
  SoftmaxCrossEntropyResult r;
  r.dlogits.resize(int64_t{n} * m);
  std::vector<double> log_p(m), target(m);
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
    const double w = weights.empty() ? 1.0 : weights[in];
    // log p[j] = (l_j - max) - log(sum_k exp(l_k - max)); the loss is
    // -sum_j t[j] log p[j], written out as Keras's definition.
    double row_loss = 0;
    for (int j = 0; j < m; ++j) {
      log_p[j] = row[j] - max - log_sum;
      target[j] = (j == label ? 1.0 - label_smoothing : 0.0) + label_smoothing / m;
      row_loss -= target[j] * log_p[j];
    }
    r.loss_sum += w * row_loss;
    if (argmax == label) ++r.correct;
    for (int j = 0; j < m; ++j) {
      r.dlogits[At2(in, j, m)] = (std::exp(log_p[j]) - target[j]) * w * grad_scale;
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

namespace {

// A layer's forward in double, every step's gates z, c and h kept (in the
// order the steps run).
struct LstmRun {
  std::vector<std::vector<double>> z, c, h;
};

LstmRun RunLstmLayer(const std::vector<double>& x, const std::vector<double>& w,
                     const std::vector<double>& r, const std::vector<double>& b, int64_t n,
                     int64_t steps, int64_t c, int64_t units, bool reverse) {
  CheckSize("LstmLayer", "x", x, n * steps * c);
  CheckSize("LstmLayer", "w", w, c * 4 * units);
  CheckSize("LstmLayer", "r", r, units * 4 * units);
  if (!b.empty()) CheckSize("LstmLayer", "b", b, 4 * units);
  LstmRun run;
  std::vector<double> h(n * units, 0.0), cs;
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = reverse ? steps - 1 - i : i;
    std::vector<double> z(n * 4 * units, 0.0);
    for (int64_t e = 0; e < n; ++e) {
      for (int64_t g = 0; g < 4 * units; ++g) {
        double v = b.empty() ? 0.0 : b[g];
        for (int64_t k = 0; k < c; ++k) v += x[(e * steps + t) * c + k] * w[k * 4 * units + g];
        for (int64_t k = 0; k < units; ++k) v += h[e * units + k] * r[k * 4 * units + g];
        z[e * 4 * units + g] = v;
      }
    }
    LstmResult step = LstmCell(z, cs, n, units);
    run.z.push_back(std::move(z));
    run.c.push_back(step.c);
    run.h.push_back(step.h);
    h = std::move(step.h);
    cs = std::move(step.c);
  }
  return run;
}

}  // namespace

std::vector<double> LstmLayer(const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>& r, const std::vector<double>& b, int64_t n,
                              int64_t steps, int64_t c, int64_t units, bool reverse) {
  const LstmRun run = RunLstmLayer(x, w, r, b, n, steps, c, units, reverse);
  std::vector<double> y(n * steps * units);
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = reverse ? steps - 1 - i : i;
    for (int64_t e = 0; e < n; ++e) {
      for (int64_t j = 0; j < units; ++j) y[(e * steps + t) * units + j] = run.h[i][e * units + j];
    }
  }
  return y;
}

LstmLayerGrads LstmLayerBackward(const std::vector<double>& x, const std::vector<double>& w,
                                 const std::vector<double>& r, const std::vector<double>& b,
                                 const std::vector<double>& dy, int64_t n, int64_t steps, int64_t c,
                                 int64_t units, bool reverse) {
  CheckSize("LstmLayerBackward", "dy", dy, n * steps * units);
  const LstmRun run = RunLstmLayer(x, w, r, b, n, steps, c, units, reverse);
  LstmLayerGrads g;
  g.dx.assign(x.size(), 0.0);
  g.dw.assign(w.size(), 0.0);
  g.dr.assign(r.size(), 0.0);
  g.db.assign(4 * units, 0.0);
  std::vector<double> dh_next(n * units, 0.0), dc_next;
  for (int64_t i = steps - 1; i >= 0; --i) {
    const int64_t t = reverse ? steps - 1 - i : i;
    std::vector<double> dh(n * units);
    for (int64_t e = 0; e < n; ++e) {
      for (int64_t j = 0; j < units; ++j) {
        dh[e * units + j] = dy[(e * steps + t) * units + j] + dh_next[e * units + j];
      }
    }
    const std::vector<double> empty;
    LstmGrads cell =
        LstmCellBackward(run.z[i], i > 0 ? run.c[i - 1] : empty, dh, dc_next, n, units);
    std::fill(dh_next.begin(), dh_next.end(), 0.0);
    for (int64_t e = 0; e < n; ++e) {
      for (int64_t gi = 0; gi < 4 * units; ++gi) {
        const double d = cell.dz[e * 4 * units + gi];
        g.db[gi] += d;
        for (int64_t k = 0; k < c; ++k) {
          g.dw[k * 4 * units + gi] += x[(e * steps + t) * c + k] * d;
          g.dx[(e * steps + t) * c + k] += w[k * 4 * units + gi] * d;
        }
        if (i == 0) continue;
        for (int64_t k = 0; k < units; ++k) {
          g.dr[k * 4 * units + gi] += run.h[i - 1][e * units + k] * d;
          dh_next[e * units + k] += r[k * 4 * units + gi] * d;
        }
      }
    }
    dc_next = std::move(cell.dc_prev);
  }
  return g;
}

std::vector<double> SequenceMask(const std::vector<double>& x, int64_t cols, double value) {
  const int64_t rows = static_cast<int64_t>(x.size()) / cols;
  CheckSize("SequenceMask", "x", x, rows * cols);
  std::vector<double> m(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      if (x[r * cols + c] != value) m[r] = 1.0;
    }
  }
  return m;
}

std::vector<double> SelectRows(const std::vector<double>& a, const std::vector<double>& b,
                               const std::vector<double>& m) {
  const int64_t size = static_cast<int64_t>(a.empty() ? b.size() : a.size());
  const int64_t cols = size / static_cast<int64_t>(m.size());
  if (!a.empty()) CheckSize("SelectRows", "a", a, size);
  if (!b.empty()) CheckSize("SelectRows", "b", b, size);
  CheckSize("SelectRows", "rows", a.empty() ? b : a, static_cast<int64_t>(m.size()) * cols);
  std::vector<double> y(size, 0.0);
  for (int64_t e = 0; e < size; ++e) {
    const std::vector<double>& from = m[e / cols] != 0 ? a : b;
    if (!from.empty()) y[e] = from[e];
  }
  return y;
}

std::vector<double> MaskedMean(const std::vector<double>& x, const std::vector<double>& m,
                               int64_t n, int64_t steps, int64_t cols) {
  CheckSize("MaskedMean", "x", x, n * steps * cols);
  CheckSize("MaskedMean", "m", m, n * steps);
  std::vector<double> y(n * cols, 0.0);
  for (int64_t k = 0; k < n; ++k) {
    double count = 0;
    for (int64_t t = 0; t < steps; ++t) {
      if (m[k * steps + t] == 0) continue;
      count += 1;
      for (int64_t c = 0; c < cols; ++c) y[k * cols + c] += x[(k * steps + t) * cols + c];
    }
    for (int64_t c = 0; c < cols; ++c) y[k * cols + c] /= count;
  }
  return y;
}

std::vector<double> MaskedMeanBackward(const std::vector<double>& dy, const std::vector<double>& m,
                                       int64_t n, int64_t steps, int64_t cols) {
  CheckSize("MaskedMeanBackward", "dy", dy, n * cols);
  CheckSize("MaskedMeanBackward", "m", m, n * steps);
  std::vector<double> dx(n * steps * cols, 0.0);
  for (int64_t k = 0; k < n; ++k) {
    double count = 0;
    for (int64_t t = 0; t < steps; ++t) count += m[k * steps + t] != 0 ? 1 : 0;
    for (int64_t t = 0; t < steps; ++t) {
      if (m[k * steps + t] == 0) continue;
      for (int64_t c = 0; c < cols; ++c) dx[(k * steps + t) * cols + c] = dy[k * cols + c] / count;
    }
  }
  return dx;
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
