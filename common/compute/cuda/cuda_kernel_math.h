// The arithmetic and indexing of the CUDA backend's kernels (cuda_kernels.cu),
// one thread's or one block phase's share each, as __host__ __device__
// functions: the kernels call them on the GPU, and cuda_kernel_math_test.cc
// runs them on the host over every thread of an emulated grid, so the index
// math is tested where there is no GPU. No CUDA headers: a plain C++
// compiler sees ordinary inline functions.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_KERNEL_MATH_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_KERNEL_MATH_H_

#include <cmath>
#include <cstdint>

#include "common/compute/activation_math.h"
#include "common/compute/embedding_math.h"
#include "common/compute/host_device.h"

namespace psc {
namespace compute {
namespace cuda {
namespace math {

// Tiled transposes: a block of kTile x kTileRows threads moves a kTile x
// kTile tile through shared memory (padded against bank conflicts).
constexpr int kTile = 32;
constexpr int kTileRows = 8;
using Tile = float[kTile][kTile + 1];

// Phase 1 of block (bx, by) of matrix `in` [rows, cols]: thread (tx, ty)
// loads its rows of the tile.
PSC_HOST_DEVICE inline void TransposeLoad(const float* in, int64_t rows, int64_t cols, int64_t bx,
                                          int64_t by, int tx, int ty, Tile& tile) {
  const int64_t r0 = by * kTile, c0 = bx * kTile;
  for (int j = ty; j < kTile; j += kTileRows) {
    const int64_t r = r0 + j, c = c0 + tx;
    if (r < rows && c < cols) tile[j][tx] = in[r * cols + c];
  }
}

// Phase 2 (after the block's barrier): out [cols, rows] gets the tile transposed.
PSC_HOST_DEVICE inline void TransposeStore(float* out, int64_t rows, int64_t cols, int64_t bx,
                                           int64_t by, int tx, int ty, const Tile& tile) {
  const int64_t r0 = by * kTile, c0 = bx * kTile;
  for (int j = ty; j < kTile; j += kTileRows) {
    const int64_t c = c0 + j, r = r0 + tx;
    if (r < rows && c < cols) out[c * rows + r] = tile[tx][j];
  }
}

// Launch geometry. A grid has at most 2^31 - 1 blocks in x and 65,535 in y
// and z, so every count that can exceed that is put on x, or looped over by
// the kernel with the stride of the grid (a grid-stride loop): no kernel
// assumes that its grid covers the data.
constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxGridYZ = 65535;

PSC_HOST_DEVICE inline int64_t Tiles(int64_t n) { return (n + kTile - 1) / kTile; }

struct Grid {
  int64_t x = 1, y = 1, z = 1;
};

// BatchedTranspose of `batch` [rows, cols] matrices: the row tiles on x, the
// column tiles on y (the kernel loops over those beyond gridDim.y), the
// matrices on z (the host launches more grids beyond max_z).
inline Grid TransposeGrid(int64_t rows, int64_t cols, int64_t batch, int64_t max_y = kMaxGridYZ,
                          int64_t max_z = kMaxGridYZ) {
  Grid g;
  g.x = Tiles(rows);
  g.y = Tiles(cols) < max_y ? Tiles(cols) : max_y;
  g.z = batch < max_z ? batch : max_z;
  return g;
}

// Column sums in two passes over fixed row ranges ("parts"): deterministic.
constexpr int kMaxParts = 1024;
constexpr int kRowsPerPart = 256;

PSC_HOST_DEVICE inline int ColumnSumParts(int64_t rows) {
  int64_t parts = (rows + kRowsPerPart - 1) / kRowsPerPart;
  if (parts > kMaxParts) parts = kMaxParts;
  return parts < 1 ? 1 : static_cast<int>(parts);
}

PSC_HOST_DEVICE inline int64_t PartRows(int64_t rows) {
  const int parts = ColumnSumParts(rows);
  return (rows + parts - 1) / parts;
}

// Pass 1, phase 1: lane `lane` (of kTileRows) of column c sums every
// kTileRows-th row of part p.
PSC_HOST_DEVICE inline float PartLaneSum(const float* in, int64_t rows, int64_t cols, int64_t p,
                                         int64_t c, int lane) {
  const int64_t start = p * PartRows(rows);
  int64_t end = start + PartRows(rows);
  if (end > rows) end = rows;
  float acc = 0.0f;
  if (c < cols) {
    for (int64_t r = start + lane; r < end; r += kTileRows) acc += in[r * cols + c];
  }
  return acc;
}

// Pass 1's grid: one block row per part on x, the column tiles on y (the
// kernel loops over those beyond gridDim.y).
inline Grid ColumnSumGrid(int64_t rows, int64_t cols, int64_t max_y = kMaxGridYZ) {
  Grid g;
  g.x = ColumnSumParts(rows);
  g.y = Tiles(cols) < max_y ? Tiles(cols) : max_y;
  return g;
}

// Pass 1, phase 2: the lanes in order.
PSC_HOST_DEVICE inline float SumLanes(const float (&lanes)[kTileRows][kTile], int tx) {
  float total = 0.0f;
  for (int j = 0; j < kTileRows; ++j) total += lanes[j][tx];
  return total;
}

// Pass 2: column c over the parts in order.
PSC_HOST_DEVICE inline float SumParts(const float* partial, int parts, int64_t cols, int64_t c) {
  float total = 0.0f;
  for (int p = 0; p < parts; ++p) total += partial[p * cols + c];
  return total;
}

PSC_HOST_DEVICE inline float BiasActivation(float y, float b, bool relu) {
  const float v = y + b;
  return relu ? (v > 0.0f ? v : 0.0f) : v;
}

// The activations of backend.h's Activate (f: compute::Activation's
// order) and their gradients from y: activation_math.h's, shared with the
// CPU backend.
PSC_HOST_DEVICE inline float Activate(int f, float alpha, float x) {
  return activation::Apply(f, alpha, x);
}
PSC_HOST_DEVICE inline float ActivateGradient(int f, float alpha, float y, float dy) {
  return activation::Gradient(f, alpha, y, dy);
}

// Output o = (image, channel) of a global pool over x [n, hw, c]: the mean
// (a sequential sum over positions, then one scale) or the first maximum.
PSC_HOST_DEVICE inline float GlobalPoolElement(const float* x, int64_t hw, int64_t c, bool max,
                                               int64_t o) {
  const int64_t ch = o % c, b = o / c;
  const float* in = x + b * hw * c + ch;
  float acc = in[0];
  for (int64_t p = 1; p < hw; ++p) {
    const float v = in[p * c];
    acc = max ? (v > acc ? v : acc) : acc + v;
  }
  return max ? acc : acc * (1.0f / static_cast<float>(hw));
}
// Element e of dx [n, hw, c]: average, dy / hw; max, dy at the channel's
// first maximum, else 0.
PSC_HOST_DEVICE inline float GlobalPoolGradient(const float* x, const float* dy, int64_t hw,
                                                int64_t c, bool max, int64_t e) {
  const int64_t ch = e % c, p = (e / c) % hw, b = e / (c * hw);
  const float g = dy[b * c + ch];
  if (!max) return g * (1.0f / static_cast<float>(hw));
  const float* in = x + b * hw * c + ch;
  int64_t best = 0;
  for (int64_t q = 1; q < hw; ++q) {
    if (in[q * c] > in[best * c]) best = q;
  }
  return best == p ? g : 0.0f;
}

// ---- Windows: pooling, and the explicit padding of convolutions ----

// A pooling window over x [n,h,w,c] giving y [n,oh,ow,c]: kh x kw with
// strides sh, sw; output (oy, ox) covers input rows [oy * sh - top, + kh)
// and columns [ox * sw - left, + kw), clipped to the input (padding is
// never read). The host fills it from backend.h's Window.
struct PoolGeometry {
  int64_t n, h, w, c;
  int64_t oh, ow;
  int64_t kh, kw, sh, sw;
  int64_t top, left;
};

// Along one axis: the inputs [*lo, *hi) that window o covers, clipped to
// [0, in).
PSC_HOST_DEVICE inline void WindowInputs(int64_t o, int64_t size, int64_t stride, int64_t before,
                                         int64_t in, int64_t* lo, int64_t* hi) {
  const int64_t start = o * stride - before;
  *lo = start < 0 ? 0 : start;
  *hi = start + size < in ? start + size : in;
}

// Along one axis: the outputs [*lo, *hi) (out of `out`) whose windows cover
// input i: o * stride - before <= i < o * stride - before + size.
PSC_HOST_DEVICE inline void WindowOutputs(int64_t i, int64_t size, int64_t stride, int64_t before,
                                          int64_t out, int64_t* lo, int64_t* hi) {
  const int64_t last = (i + before) / stride;  // i + before >= 0
  const int64_t from = i + before - size + 1;  // o * stride >= from
  *lo = from <= 0 ? 0 : (from + stride - 1) / stride;
  *hi = last + 1 < out ? last + 1 : out;
}

// Output element o of a max pool: the position iy * w + ix in its image of
// the window's first maximum in row-major window order (a later element
// wins only if strictly larger). Every window holds an input element.
PSC_HOST_DEVICE inline int64_t MaxPoolArgmax(const float* x, const PoolGeometry& g, int64_t o) {
  const int64_t ch = o % g.c, ox = (o / g.c) % g.ow, oy = (o / (g.c * g.ow)) % g.oh;
  const int64_t b = o / (g.c * g.ow * g.oh);
  int64_t y0, y1, x0, x1;
  WindowInputs(oy, g.kh, g.sh, g.top, g.h, &y0, &y1);
  WindowInputs(ox, g.kw, g.sw, g.left, g.w, &x0, &x1);
  const float* img = x + b * g.h * g.w * g.c + ch;
  int64_t best = y0 * g.w + x0;
  float best_v = img[best * g.c];
  for (int64_t iy = y0; iy < y1; ++iy) {
    for (int64_t ix = x0; ix < x1; ++ix) {
      const float v = img[(iy * g.w + ix) * g.c];
      if (v > best_v) {
        best_v = v;
        best = iy * g.w + ix;
      }
    }
  }
  return best;
}

// Output element o of a max pool.
PSC_HOST_DEVICE inline float MaxPoolElement(const float* x, const PoolGeometry& g, int64_t o) {
  const int64_t ch = o % g.c, b = o / (g.c * g.ow * g.oh);
  return x[(b * g.h * g.w + MaxPoolArgmax(x, g, o)) * g.c + ch];
}

// Element e of dx [n,h,w,c] of a max pool, gathered: the sum, over the
// windows that cover it in row-major output order, of the dy of each whose
// argmax (MaxPoolArgmax, per output element) it is; 0 if none.
PSC_HOST_DEVICE inline float MaxPoolGradient(const int32_t* argmax, const float* dy,
                                             const PoolGeometry& g, int64_t e) {
  const int64_t ch = e % g.c, ix = (e / g.c) % g.w, iy = (e / (g.c * g.w)) % g.h;
  const int64_t b = e / (g.c * g.w * g.h);
  int64_t oy0, oy1, ox0, ox1;
  WindowOutputs(iy, g.kh, g.sh, g.top, g.oh, &oy0, &oy1);
  WindowOutputs(ix, g.kw, g.sw, g.left, g.ow, &ox0, &ox1);
  const int64_t pos = iy * g.w + ix;
  float acc = 0.0f;
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    for (int64_t ox = ox0; ox < ox1; ++ox) {
      const int64_t o = ((b * g.oh + oy) * g.ow + ox) * g.c + ch;
      if (argmax[o] == pos) acc += dy[o];
    }
  }
  return acc;
}

// Output element o of an average pool: the window's elements inside x,
// summed in row-major window order, divided by their count.
PSC_HOST_DEVICE inline float AvgPoolElement(const float* x, const PoolGeometry& g, int64_t o) {
  const int64_t ch = o % g.c, ox = (o / g.c) % g.ow, oy = (o / (g.c * g.ow)) % g.oh;
  const int64_t b = o / (g.c * g.ow * g.oh);
  int64_t y0, y1, x0, x1;
  WindowInputs(oy, g.kh, g.sh, g.top, g.h, &y0, &y1);
  WindowInputs(ox, g.kw, g.sw, g.left, g.w, &x0, &x1);
  const float* img = x + b * g.h * g.w * g.c + ch;
  float acc = 0.0f;
  for (int64_t iy = y0; iy < y1; ++iy) {
    for (int64_t ix = x0; ix < x1; ++ix) acc += img[(iy * g.w + ix) * g.c];
  }
  return acc / static_cast<float>((y1 - y0) * (x1 - x0));
}

// Element e of dx [n,h,w,c] of an average pool, gathered: the sum, over the
// windows that cover it in row-major output order, of each window's dy
// divided by its count of elements inside x; 0 if none.
PSC_HOST_DEVICE inline float AvgPoolGradient(const float* dy, const PoolGeometry& g, int64_t e) {
  const int64_t ch = e % g.c, ix = (e / g.c) % g.w, iy = (e / (g.c * g.w)) % g.h;
  const int64_t b = e / (g.c * g.w * g.h);
  int64_t oy0, oy1, ox0, ox1;
  WindowOutputs(iy, g.kh, g.sh, g.top, g.oh, &oy0, &oy1);
  WindowOutputs(ix, g.kw, g.sw, g.left, g.ow, &ox0, &ox1);
  float acc = 0.0f;
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    int64_t y0, y1;
    WindowInputs(oy, g.kh, g.sh, g.top, g.h, &y0, &y1);
    for (int64_t ox = ox0; ox < ox1; ++ox) {
      int64_t x0, x1;
      WindowInputs(ox, g.kw, g.sw, g.left, g.w, &x0, &x1);
      const float count = static_cast<float>((y1 - y0) * (x1 - x0));
      acc += dy[((b * g.oh + oy) * g.ow + ox) * g.c + ch] / count;
    }
  }
  return acc;
}

// A convolution's explicit zero padding (conv_padding.h): x [n,h,w,c] at
// row `top`, column `left` of xp [n,hp,wp,c].
struct PadGeometry {
  int64_t n, h, w, c;
  int64_t hp, wp;
  int64_t top, left;
};

// Element e of xp: x's element there, or 0 in the border. T is float, or
// the bits of a 16-bit float (whose zero is all zero bits too).
template <typename T>
PSC_HOST_DEVICE inline T PadElement(const T* x, const PadGeometry& g, int64_t e) {
  const int64_t ch = e % g.c, px = (e / g.c) % g.wp, py = (e / (g.c * g.wp)) % g.hp;
  const int64_t b = e / (g.c * g.wp * g.hp);
  const int64_t iy = py - g.top, ix = px - g.left;
  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return T(0);
  return x[((b * g.h + iy) * g.w + ix) * g.c + ch];
}

// Element e of x, cropped out of xp (PadElement's inverse).
template <typename T>
PSC_HOST_DEVICE inline T CropElement(const T* xp, const PadGeometry& g, int64_t e) {
  const int64_t ch = e % g.c, ix = (e / g.c) % g.w, iy = (e / (g.c * g.w)) % g.h;
  const int64_t b = e / (g.c * g.w * g.h);
  return xp[((b * g.hp + iy + g.top) * g.wp + ix + g.left) * g.c + ch];
}

// ---- Batch normalization over x [rows, c] (channels last) ----
//
// The per-channel sums are column reductions in ColumnSums's fixed order
// (parts of PartRows rows, kTileRows lanes each, then the lanes and the
// parts in order), accumulated in double: deterministic. The statistics
// take two of them (the sum of x, then of (x - mean)^2: the biased
// variance, without E[x^2] - mean^2's cancellation); the backward pass one,
// of dy and dy * xhat together.
enum BnReduction : int {
  kBnSumX = 0,                 // first: sum of x
  kBnSumSquaredDeviation = 1,  // first: sum of (x - mean)^2
  kBnSumGradients = 2,         // first: sum of dy (dbeta); second: of dy * xhat (dgamma)
};

// A plain aggregate: it lives in shared memory.
struct BnSums {
  double first, second;
};

struct BnInputs {
  const float* x;
  const float* dy;        // kBnSumGradients only
  const float* mean;      // all but kBnSumX
  const float* variance;  // kBnSumGradients only
  float epsilon;
};

// Pass 1, phase 1: lane `lane` of column c sums every kTileRows-th row of
// part p.
PSC_HOST_DEVICE inline BnSums BnPartLaneSum(int kind, const BnInputs& in, int64_t rows,
                                            int64_t cols, int64_t p, int64_t c, int lane) {
  BnSums acc{0.0, 0.0};
  if (c >= cols) return acc;
  const int64_t start = p * PartRows(rows);
  int64_t end = start + PartRows(rows);
  if (end > rows) end = rows;
  if (kind == kBnSumX) {
    for (int64_t r = start + lane; r < end; r += kTileRows) acc.first += in.x[r * cols + c];
    return acc;
  }
  const double mean = in.mean[c];
  if (kind == kBnSumSquaredDeviation) {
    for (int64_t r = start + lane; r < end; r += kTileRows) {
      const double d = in.x[r * cols + c] - mean;
      acc.first += d * d;
    }
    return acc;
  }
  const double inv = 1.0 / sqrt(static_cast<double>(in.variance[c]) + in.epsilon);
  for (int64_t r = start + lane; r < end; r += kTileRows) {
    const double g = in.dy[r * cols + c];
    acc.first += g;
    acc.second += g * ((in.x[r * cols + c] - mean) * inv);
  }
  return acc;
}

// Pass 1, phase 2: the lanes in order.
PSC_HOST_DEVICE inline BnSums BnSumLanes(const BnSums (&lanes)[kTileRows][kTile], int tx) {
  BnSums total{0.0, 0.0};
  for (int j = 0; j < kTileRows; ++j) {
    total.first += lanes[j][tx].first;
    total.second += lanes[j][tx].second;
  }
  return total;
}

// Pass 2: column c over the parts in order.
PSC_HOST_DEVICE inline BnSums BnSumParts(const BnSums* partial, int parts, int64_t cols,
                                         int64_t c) {
  BnSums total{0.0, 0.0};
  for (int p = 0; p < parts; ++p) {
    total.first += partial[p * cols + c].first;
    total.second += partial[p * cols + c].second;
  }
  return total;
}

// A mean over the rows (the channel's mean or biased variance) from its sum.
PSC_HOST_DEVICE inline float BnAverage(const BnSums& s, int64_t rows) {
  return static_cast<float>(s.first / static_cast<double>(rows));
}

// y = (x - mean) / sqrt(variance + epsilon) * gamma + beta.
PSC_HOST_DEVICE inline float BnNormalize(float x, float mean, float variance, float gamma,
                                         float beta, float epsilon) {
  return (x - mean) / sqrtf(variance + epsilon) * gamma + beta;
}

// dx = gamma / sqrt(variance + epsilon) * (dy - dbeta / m - xhat * dgamma / m),
// xhat = (x - mean) / sqrt(variance + epsilon), m the rows.
PSC_HOST_DEVICE inline float BnInputGradient(float x, float dy, float mean, float variance,
                                             float gamma, float dgamma, float dbeta, float m,
                                             float epsilon) {
  const float inv = 1.0f / sqrtf(variance + epsilon);
  const float xhat = (x - mean) * inv;
  return gamma * inv * (dy - dbeta / m - xhat * dgamma / m);
}

// Row i of softmax cross-entropy over logits [n, m] (as the CPU backend
// computes it, in double): the gradient row, the row's loss and whether its
// argmax (the first on ties) is the label. Targets (1 - smoothing) *
// onehot + smoothing / m; the row's loss and gradient times weights[i]
// (1 when weights is null); the gradient times scale. A label outside
// [0, m) reads nothing outside the row: the row's loss is NaN, it is not
// correct, and its gradient has no target but the smoothing's.
PSC_HOST_DEVICE inline void SoftmaxRow(const float* logits, const int32_t* labels,
                                       const float* weights, int64_t m, float scale,
                                       float smoothing, int64_t i, float* dlogits, double* row_loss,
                                       int* row_correct) {
  const float* z = logits + i * m;
  float* g = dlogits + i * m;
  int64_t argmax = 0;
  for (int64_t j = 1; j < m; ++j) {
    if (z[j] > z[argmax]) argmax = j;
  }
  const float top = z[argmax];
  double sum = 0, shifted_sum = 0;
  for (int64_t j = 0; j < m; ++j) {
    sum += exp(static_cast<double>(z[j] - top));
    shifted_sum += static_cast<double>(z[j] - top);
  }
  const double log_sum = log(sum);
  const int32_t label = labels[i];
  const bool known = label >= 0 && label < m;
  const double s = smoothing;
  const double off = s / static_cast<double>(m);
  const double on = 1.0 - s + off;
  const double w = weights == nullptr ? 1.0 : static_cast<double>(weights[i]);
  const double z_label = known ? static_cast<double>(z[label] - top) : nan("");
  row_loss[i] = w * (log_sum - (1.0 - s) * z_label - off * shifted_sum);
  row_correct[i] = known && argmax == label ? 1 : 0;
  const double row_scale = w * scale;
  for (int64_t j = 0; j < m; ++j) {
    const double p = exp(static_cast<double>(z[j] - top) - log_sum);
    g[j] = static_cast<float>((p - (j == label ? on : off)) * row_scale);
  }
}

// Embeddings (embedding_ops.h). Element e of the rows looked up, [n, d]: its id's row's element, or
// NaN for an id that names no row.
PSC_HOST_DEVICE inline float EmbeddingLookupElement(const float* ids, const float* table,
                                                    int64_t rows, int64_t d, int64_t e) {
  const int64_t id = embedding::RowOf(ids[e / d], rows);
  return id < 0 ? NAN : table[id * d + e % d];
}

// Column k of a zeroed table gradient [rows, d]: each of the n rows of dy
// added to its id's row in the ids' order (an id that names no row adds
// nothing), so a row's sum is the same on every run.
PSC_HOST_DEVICE inline void EmbeddingGradientColumn(const float* ids, const float* dy, int64_t n,
                                                    int64_t rows, int64_t d, int64_t k,
                                                    float* dtable) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = embedding::RowOf(ids[i], rows);
    if (id >= 0) dtable[id * d + k] += dy[i * d + k];
  }
}

}  // namespace math
}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_KERNEL_MATH_H_
