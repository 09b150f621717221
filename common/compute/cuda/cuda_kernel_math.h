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

#ifdef __CUDACC__
#define PSC_HOST_DEVICE __host__ __device__
#else
#define PSC_HOST_DEVICE
#endif

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

// The activations of backend.h's Activate (f: 0 relu, 1 sigmoid, 2 tanh,
// 3 leaky_relu, as compute::Activation's order) and their gradients from y.
PSC_HOST_DEVICE inline float Activate(int f, float alpha, float x) {
  switch (f) {
    case 0:
      return x > 0.0f ? x : 0.0f;
    case 1:
      return 1.0f / (1.0f + expf(-x));
    case 2:
      return tanhf(x);
    default:
      return x > 0.0f ? x : alpha * x;
  }
}
PSC_HOST_DEVICE inline float ActivateGradient(int f, float alpha, float y, float dy) {
  switch (f) {
    case 0:
      return y > 0.0f ? dy : 0.0f;
    case 1:
      return dy * y * (1.0f - y);
    case 2:
      return dy * (1.0f - y * y);
    default:
      return y > 0.0f ? dy : alpha * dy;
  }
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

// Output element o of a 2x2 average pool over x [n,h,w,c] (floor), summed
// as the CPU backend sums: (x00 + x01) + (x10 + x11), times 1/4.
PSC_HOST_DEVICE inline float AvgPoolElement(const float* x, int64_t h, int64_t w, int64_t c,
                                            int64_t o) {
  const int64_t oh = h / 2, ow = w / 2;
  const int64_t ch = o % c, j = (o / c) % ow, i = (o / (c * ow)) % oh, b = o / (c * ow * oh);
  const float* p = x + ((b * h + 2 * i) * w + 2 * j) * c + ch;
  return ((p[0] + p[c]) + (p[w * c] + p[w * c + c])) * 0.25f;
}
// Element e of dx [n,h,w,c] of a 2x2 average pool: its window's dy / 4, or
// 0 on the rows and columns the floor cuts off.
PSC_HOST_DEVICE inline float AvgPoolGradient(const float* dy, int64_t h, int64_t w, int64_t c,
                                             int64_t e) {
  const int64_t oh = h / 2, ow = w / 2;
  const int64_t ch = e % c, x = (e / c) % w, y = (e / (c * w)) % h, b = e / (c * w * h);
  if (y / 2 >= oh || x / 2 >= ow) return 0.0f;
  return dy[((b * oh + y / 2) * ow + x / 2) * c + ch] * 0.25f;
}

// Output element o of a 2x2 max pool over x [n,h,w,c]: dx at the window's
// first maximum gets dy[o]. dx is zero elsewhere beforehand.
PSC_HOST_DEVICE inline void MaxPoolBackwardElement(const float* x, const float* dy, float* dx,
                                                   int64_t h, int64_t w, int64_t c, int64_t o) {
  const int64_t oh = h / 2, ow = w / 2;
  const int64_t ch = o % c;
  const int64_t j = (o / c) % ow;
  const int64_t i = (o / (c * ow)) % oh;
  const int64_t b = o / (c * ow * oh);
  const int64_t base = ((b * h + 2 * i) * w + 2 * j) * c + ch;
  const int64_t offsets[4] = {0, c, w * c, w * c + c};
  int best = 0;
  float best_v = x[base];
  for (int q = 1; q < 4; ++q) {
    const float v = x[base + offsets[q]];
    if (v > best_v) {
      best_v = v;
      best = q;
    }
  }
  dx[base + offsets[best]] = dy[o];
}

// Row i of softmax cross-entropy over logits [n, m] (as the CPU backend
// computes it, in double): the gradient row, the row's loss and whether its
// argmax (the first on ties) is the label.
PSC_HOST_DEVICE inline void SoftmaxRow(const float* logits, const int32_t* labels, int64_t m,
                                       float scale, int64_t i, float* dlogits, double* row_loss,
                                       int* row_correct) {
  const float* z = logits + i * m;
  float* g = dlogits + i * m;
  int64_t argmax = 0;
  for (int64_t j = 1; j < m; ++j) {
    if (z[j] > z[argmax]) argmax = j;
  }
  const float top = z[argmax];
  double sum = 0;
  for (int64_t j = 0; j < m; ++j) sum += exp(static_cast<double>(z[j] - top));
  const double log_sum = log(sum);
  const int32_t label = labels[i];
  row_loss[i] = log_sum - static_cast<double>(z[label] - top);
  row_correct[i] = argmax == label ? 1 : 0;
  for (int64_t j = 0; j < m; ++j) {
    const double p = exp(static_cast<double>(z[j] - top) - log_sum);
    g[j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) * scale);
  }
}

}  // namespace math
}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_KERNEL_MATH_H_
