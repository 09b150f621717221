// The kernels of cuda_kernels.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/compute/cuda/cuda_kernel_math.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/layer_norm_math.h"
#include "common/compute/mask_math.h"
#include "common/compute/normalize_math.h"
#include "common/compute/rnn_math.h"
#include "common/compute/transpose_math.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements.
unsigned Blocks(int64_t n) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{1} << 20)));
}

__global__ void BiasActivationKernel(float* y, const float* b, int64_t n, int64_t k, bool relu) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = math::BiasActivation(y[i], b == nullptr ? 0.0f : b[i % k], relu);
  }
}

// Row tile blockIdx.x of matrix blockIdx.z, every gridDim.y-th column tile.
__global__ void SequenceMaskKernel(const float* x, int64_t rows, int64_t cols, float value,
                                   float* m) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{gridDim.x} * blockDim.x) {
    m[r] = mask::RowMask(x, cols, value, r);
  }
}

__global__ void SelectRowsKernel(const float* a, const float* b, const float* m, int64_t n,
                                 int64_t cols, float* y) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    y[e] = mask::SelectRow(a, b, m, cols, e);
  }
}

__global__ void MaskedMeanKernel(const float* x, const float* m, int64_t n, int64_t steps,
                                 int64_t cols, float* y) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    y[e] = mask::MaskedMean(x, m, steps, cols, e);
  }
}

__global__ void MaskedMeanBackwardKernel(const float* dy, const float* m, int64_t n, int64_t steps,
                                         int64_t cols, float* dx) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    const float count = mask::KeptSteps(m, steps, e / (steps * cols));
    dx[e] = mask::MaskedMeanGradient(dy, m, steps, cols, count, e);
  }
}

__global__ void LstmCellKernel(const float* z, const float* c_prev, int64_t n, int64_t units,
                               float* h, float* c) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    rnn::LstmForward(z, c_prev, units, e, h, c);
  }
}

__global__ void LstmCellBackwardKernel(const float* z, const float* c_prev, const float* c,
                                       const float* dh, const float* dc, int64_t n, int64_t units,
                                       float* dz, float* dc_prev) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    rnn::LstmBackward(z, c_prev, c, dh, dc, units, e, dz, dc_prev);
  }
}

__global__ void GruCellKernel(const float* xz, const float* hz, const float* h_prev, int64_t n,
                              int64_t units, float* h) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    rnn::GruForward(xz, hz, h_prev, units, e, h);
  }
}

__global__ void GruCellBackwardKernel(const float* xz, const float* hz, const float* h_prev,
                                      const float* dh, int64_t n, int64_t units, float* dxz,
                                      float* dhz, float* dh_prev) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    rnn::GruBackward(xz, hz, h_prev, dh, units, e, dxz, dhz, dh_prev);
  }
}

__global__ void TransposeKernel(const float* in, float* out, int64_t rows, int64_t cols) {
  __shared__ math::Tile tile;
  const int64_t offset = int64_t{blockIdx.z} * rows * cols;
  const int64_t col_tiles = math::Tiles(cols);
  for (int64_t ct = blockIdx.y; ct < col_tiles; ct += gridDim.y) {
    math::TransposeLoad(in + offset, rows, cols, ct, blockIdx.x, threadIdx.x, threadIdx.y, tile);
    __syncthreads();
    math::TransposeStore(out + offset, rows, cols, ct, blockIdx.x, threadIdx.x, threadIdx.y, tile);
    __syncthreads();  // the tile is loaded again in the next round
  }
}

// partial[p * cols + c] = sum of in[r * cols + c] over part p's rows: 8 row
// lanes per column, each summing every 8th row, then the lanes in order.
// Part blockIdx.x, every gridDim.y-th column tile.
__global__ void PartialColumnSumsKernel(const float* in, int64_t rows, int64_t cols,
                                        float* partial) {
  __shared__ float lanes[math::kTileRows][math::kTile];
  const int64_t col_tiles = math::Tiles(cols);
  for (int64_t ct = blockIdx.y; ct < col_tiles; ct += gridDim.y) {
    const int64_t c = ct * math::kTile + threadIdx.x;
    lanes[threadIdx.y][threadIdx.x] =
        math::PartLaneSum(in, rows, cols, blockIdx.x, c, static_cast<int>(threadIdx.y));
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
      partial[blockIdx.x * cols + c] = math::SumLanes(lanes, threadIdx.x);
    }
    __syncthreads();  // the lanes are written again in the next round
  }
}

__global__ void SumPartsKernel(const float* partial, int parts, int64_t cols, float* out) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    out[c] = math::SumParts(partial, parts, cols, c);
  }
}

__global__ void SoftmaxRowsKernel(const float* logits, const int32_t* labels, const float* weights,
                                  int64_t n, int64_t m, float scale, float smoothing,
                                  float* dlogits, double* row_loss, int* row_correct) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    math::SoftmaxRow(logits, labels, weights, m, scale, smoothing, i, dlogits, row_loss,
                     row_correct);
  }
}

__global__ void LossTotalsKernel(const double* row_loss, const int* row_correct, int64_t n,
                                 LossTotals* totals) {
  __shared__ double loss[kThreads];
  __shared__ long long correct[kThreads];
  double l = 0;
  long long c = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    l += row_loss[i];
    c += row_correct[i];
  }
  loss[threadIdx.x] = l;
  correct[threadIdx.x] = c;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      loss[threadIdx.x] += loss[threadIdx.x + s];
      correct[threadIdx.x] += correct[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    totals->loss_sum = loss[0];
    totals->correct = correct[0];
  }
}

__global__ void AddIntoKernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] += x[i];
  }
}

__global__ void ActivateKernel(int f, float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = math::Activate(f, alpha, x[i]);
  }
}

__global__ void ActivateBackwardKernel(int f, float alpha, const float* y, const float* dy,
                                       float* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dx[i] = math::ActivateGradient(f, alpha, y[i], dy[i]);
  }
}

__global__ void SoftmaxKernel(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{gridDim.x} * blockDim.x) {
    activation::SoftmaxRow(x + r * cols, y + r * cols, cols);
  }
}

__global__ void SoftmaxBackwardKernel(const float* y, const float* dy, float* dx, int64_t rows,
                                      int64_t cols) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{gridDim.x} * blockDim.x) {
    activation::SoftmaxRowGradient(y + r * cols, dy + r * cols, dx + r * cols, cols);
  }
}

__global__ void GlobalPoolKernel(const float* x, float* y, int64_t n, int64_t hw, int64_t c,
                                 bool max) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < n * c;
       o += int64_t{gridDim.x} * blockDim.x) {
    y[o] = math::GlobalPoolElement(x, hw, c, max, o);
  }
}

__global__ void GlobalPoolBackwardKernel(const float* x, const float* dy, float* dx, int64_t n,
                                         int64_t hw, int64_t c, bool max) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n * hw * c;
       e += int64_t{gridDim.x} * blockDim.x) {
    dx[e] = math::GlobalPoolGradient(x, dy, hw, c, max, e);
  }
}

__global__ void EmbeddingLookupKernel(const float* ids, const float* table, float* y, int64_t n,
                                      int64_t rows, int64_t d) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n * d;
       e += int64_t{gridDim.x} * blockDim.x) {
    y[e] = math::EmbeddingLookupElement(ids, table, rows, d, e);
  }
}

__global__ void EmbeddingGradientKernel(const float* ids, const float* dy, float* dtable, int64_t n,
                                        int64_t rows, int64_t d) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < d;
       k += int64_t{gridDim.x} * blockDim.x) {
    math::EmbeddingGradientColumn(ids, dy, n, rows, d, k, dtable);
  }
}

__global__ void L2NormalizeKernel(const float* x, const float* dy, float* y, int64_t vectors,
                                  int64_t m, int64_t k, bool transposed, float epsilon) {
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < vectors;
       v += int64_t{gridDim.x} * blockDim.x) {
    if (dy == nullptr) {
      normalize::Forward(x, y, v, m, k, transposed, epsilon);
    } else {
      normalize::Backward(x, dy, y, v, m, k, transposed, epsilon);
    }
  }
}

__global__ void MaxPoolKernel(const float* x, float* y, math::PoolGeometry g, int64_t outputs) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < outputs;
       o += int64_t{gridDim.x} * blockDim.x) {
    y[o] = math::MaxPoolElement(x, g, o);
  }
}

__global__ void MaxPoolArgmaxKernel(const float* x, int32_t* argmax, math::PoolGeometry g,
                                    int64_t outputs) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < outputs;
       o += int64_t{gridDim.x} * blockDim.x) {
    argmax[o] = static_cast<int32_t>(math::MaxPoolArgmax(x, g, o));  // h * w < 2^31
  }
}

__global__ void MaxPoolGradientKernel(const int32_t* argmax, const float* dy, float* dx,
                                      math::PoolGeometry g, int64_t elements) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < elements;
       e += int64_t{gridDim.x} * blockDim.x) {
    dx[e] = math::MaxPoolGradient(argmax, dy, g, e);
  }
}

__global__ void AvgPoolKernel(const float* x, float* y, math::PoolGeometry g, int64_t outputs) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < outputs;
       o += int64_t{gridDim.x} * blockDim.x) {
    y[o] = math::AvgPoolElement(x, g, o);
  }
}

__global__ void AvgPoolGradientKernel(const float* dy, float* dx, math::PoolGeometry g,
                                      int64_t elements) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < elements;
       e += int64_t{gridDim.x} * blockDim.x) {
    dx[e] = math::AvgPoolGradient(dy, g, e);
  }
}

template <typename T>
__global__ void PadKernel(const T* x, T* xp, math::PadGeometry g, int64_t elements) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < elements;
       e += int64_t{gridDim.x} * blockDim.x) {
    xp[e] = math::PadElement(x, g, e);
  }
}

template <typename T>
__global__ void CropKernel(const T* xp, T* x, math::PadGeometry g, int64_t elements) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < elements;
       e += int64_t{gridDim.x} * blockDim.x) {
    x[e] = math::CropElement(xp, g, e);
  }
}

// partial[p * cols + c] = the sums of part p's rows of column c, as
// PartialColumnSumsKernel, in double.
__global__ void BnPartialSumsKernel(int kind, math::BnInputs in, int64_t rows, int64_t cols,
                                    math::BnSums* partial) {
  __shared__ math::BnSums lanes[math::kTileRows][math::kTile];
  const int64_t col_tiles = math::Tiles(cols);
  for (int64_t ct = blockIdx.y; ct < col_tiles; ct += gridDim.y) {
    const int64_t c = ct * math::kTile + threadIdx.x;
    lanes[threadIdx.y][threadIdx.x] =
        math::BnPartLaneSum(kind, in, rows, cols, blockIdx.x, c, static_cast<int>(threadIdx.y));
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
      partial[blockIdx.x * cols + c] = math::BnSumLanes(lanes, threadIdx.x);
    }
    __syncthreads();  // the lanes are written again in the next round
  }
}

// Column c's parts in order: out[c] = their mean over the rows (kBnSumX,
// kBnSumSquaredDeviation), or out[c] = the sum of dy and out2[c] that of
// dy * xhat (kBnSumGradients).
__global__ void BnFinishKernel(int kind, const math::BnSums* partial, int parts, int64_t rows,
                               int64_t cols, float* out, float* out2) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    const math::BnSums s = math::BnSumParts(partial, parts, cols, c);
    if (kind == math::kBnSumGradients) {
      out[c] = static_cast<float>(s.first);
      out2[c] = static_cast<float>(s.second);
    } else {
      out[c] = math::BnAverage(s, rows);
    }
  }
}

__global__ void BnNormalizeKernel(const float* x, const float* gamma, const float* beta,
                                  const float* mean, const float* variance, float epsilon, float* y,
                                  int64_t n, int64_t c) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ch = i % c;
    y[i] = math::BnNormalize(x[i], mean[ch], variance[ch], gamma[ch], beta[ch], epsilon);
  }
}

__global__ void BnInputGradientKernel(const float* x, const float* dy, const float* gamma,
                                      const float* mean, const float* variance, const float* dgamma,
                                      const float* dbeta, float m, float epsilon, float* dx,
                                      int64_t n, int64_t c) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ch = i % c;
    dx[i] = math::BnInputGradient(x[i], dy[i], mean[ch], variance[ch], gamma[ch], dgamma[ch],
                                  dbeta[ch], m, epsilon);
  }
}

__global__ void MultiplyKernel(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = a[i] * b[i];
  }
}

__global__ void ExtremumKernel(bool max, const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = activation::Extremum(max, a[i], b[i]);
  }
}

__global__ void ExtremumGradientKernel(bool max, const float* a, const float* b, const float* dy,
                                       float* da, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    da[i] = activation::ExtremumGradient(max, a[i], b[i], dy[i]);
  }
}

__device__ float LoadAs(const void* p, int dtype, int64_t i) {
  if (dtype == 1) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  if (dtype == 2) return __half2float(static_cast<const __half*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

__global__ void CastKernel(const void* x, int from, void* y, int to, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = LoadAs(x, from, i);
    if (to == 1) {
      static_cast<__nv_bfloat16*>(y)[i] = __float2bfloat16_rn(v);
    } else if (to == 2) {
      static_cast<__half*>(y)[i] = __float2half_rn(v);
    } else {
      static_cast<float*>(y)[i] = v;
    }
  }
}

__device__ void StoreAs(void* p, int dtype, int64_t i, float v) {
  if (dtype == 1) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  } else if (dtype == 2) {
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  } else {
    static_cast<float*>(p)[i] = v;
  }
}

__global__ void BiasActivationAsKernel(void* y, int dtype, const float* b, int64_t n, int64_t k,
                                       bool relu) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    StoreAs(y, dtype, i,
            math::BiasActivation(LoadAs(y, dtype, i), b == nullptr ? 0.0f : b[i % k], relu));
  }
}

__global__ void FillOnesKernel(void* y, int dtype, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    StoreAs(y, dtype, i, 1.0f);
  }
}

__global__ void ScaleKernel(const float* x, float s, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = s * x[i];
  }
}

__global__ void AddKernel(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = a[i] + b[i];
  }
}

// Every launcher starts here: an error an earlier call left unconsumed (each
// was already reported by the call that failed) must not be taken for this
// launch's. A sticky error (a dead context) comes back on the launch anyway.
void DropStaleError() { (void)cudaGetLastError(); }

unsigned U(int64_t v) { return static_cast<unsigned>(v); }

__global__ void LayerNormKernel(const float* x, const float* gamma, const float* beta, int64_t rows,
                                int64_t cols, float epsilon, float* y, float* mean, float* rstd) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{gridDim.x} * blockDim.x) {
    layer_norm::ForwardRow(x + r * cols, gamma, beta, cols, epsilon, y + r * cols, mean + r,
                           rstd + r);
  }
}

__global__ void LayerNormColumnsKernel(const float* x, const float* dy, const float* mean,
                                       const float* rstd, int64_t rows, int64_t cols, float* dgamma,
                                       float* dbeta) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < cols;
       j += int64_t{gridDim.x} * blockDim.x) {
    layer_norm::ColumnGradients(x, dy, mean, rstd, rows, cols, j, dgamma, dbeta);
  }
}

__global__ void LayerNormBackwardKernel(const float* x, const float* dy, const float* gamma,
                                        const float* mean, const float* rstd, int64_t rows,
                                        int64_t cols, float* dx) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{gridDim.x} * blockDim.x) {
    layer_norm::BackwardRow(x + r * cols, dy + r * cols, gamma, mean[r], rstd[r], cols,
                            dx + r * cols);
  }
}

__global__ void TransposeKernel(const float* x, float* y, elementwise::TransposePlan plan) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < plan.total;
       o += int64_t{gridDim.x} * blockDim.x) {
    y[o] = x[elementwise::TransposeSource(plan, o)];
  }
}

}  // namespace

cudaError_t BiasActivation(float* y, const float* b, int64_t n, int64_t k, bool relu,
                           cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (k <= 0) return cudaErrorInvalidValue;
  DropStaleError();
  BiasActivationKernel<<<Blocks(n), kThreads, 0, stream>>>(y, b, n, k, relu);
  return cudaGetLastError();
}

cudaError_t BiasActivationAs(void* y, int dtype, const float* b, int64_t n, int64_t k, bool relu,
                             cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (k <= 0) return cudaErrorInvalidValue;
  DropStaleError();
  BiasActivationAsKernel<<<Blocks(n), kThreads, 0, stream>>>(y, dtype, b, n, k, relu);
  return cudaGetLastError();
}

cudaError_t BatchedTranspose(const float* in, float* out, int64_t batch, int64_t rows, int64_t cols,
                             cudaStream_t stream) {
  if (batch <= 0 || rows <= 0 || cols <= 0) return cudaSuccess;
  const math::Grid g = math::TransposeGrid(rows, cols, batch);
  if (g.x > math::kMaxGridX) return cudaErrorInvalidValue;  // over 2^36 rows
  DropStaleError();
  for (int64_t b0 = 0; b0 < batch; b0 += g.z) {
    const int64_t chunk = std::min(g.z, batch - b0);
    const dim3 grid(U(g.x), U(g.y), U(chunk));
    TransposeKernel<<<grid, dim3(math::kTile, math::kTileRows), 0, stream>>>(
        in + b0 * rows * cols, out + b0 * rows * cols, rows, cols);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

int ColumnSumParts(int64_t rows) { return math::ColumnSumParts(rows); }

cudaError_t ColumnSums(const float* in, int64_t rows, int64_t cols, float* partial, float* out,
                       cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  if (rows <= 0) return cudaMemsetAsync(out, 0, cols * sizeof(float), stream);
  const int parts = ColumnSumParts(rows);
  const math::Grid g = math::ColumnSumGrid(rows, cols);
  DropStaleError();
  const dim3 grid(U(g.x), U(g.y));
  PartialColumnSumsKernel<<<grid, dim3(math::kTile, math::kTileRows), 0, stream>>>(in, rows, cols,
                                                                                   partial);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  SumPartsKernel<<<Blocks(cols), kThreads, 0, stream>>>(partial, parts, cols, out);
  return cudaGetLastError();
}

cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, const float* weights,
                                int64_t n, int64_t m, float scale, float smoothing, float* dlogits,
                                double* row_loss, int* row_correct, LossTotals* totals,
                                cudaStream_t stream) {
  if (n <= 0 || m <= 0) return cudaErrorInvalidValue;
  DropStaleError();
  SoftmaxRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(logits, labels, weights, n, m, scale,
                                                        smoothing, dlogits, row_loss, row_correct);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  LossTotalsKernel<<<1, kThreads, 0, stream>>>(row_loss, row_correct, n, totals);
  return cudaGetLastError();
}

cudaError_t Activate(int f, float alpha, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  ActivateKernel<<<Blocks(n), kThreads, 0, stream>>>(f, alpha, x, y, n);
  return cudaGetLastError();
}

cudaError_t ActivateBackward(int f, float alpha, const float* y, const float* dy, float* dx,
                             int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  ActivateBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(f, alpha, y, dy, dx, n);
  return cudaGetLastError();
}

cudaError_t Softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  DropStaleError();
  SoftmaxKernel<<<Blocks(rows), kThreads, 0, stream>>>(x, y, rows, cols);
  return cudaGetLastError();
}

cudaError_t SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                            cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  DropStaleError();
  SoftmaxBackwardKernel<<<Blocks(rows), kThreads, 0, stream>>>(y, dy, dx, rows, cols);
  return cudaGetLastError();
}

cudaError_t GlobalPool(const float* x, float* y, int64_t n, int64_t hw, int64_t c, bool max,
                       cudaStream_t stream) {
  if (n * c <= 0 || hw <= 0) return cudaSuccess;
  DropStaleError();
  GlobalPoolKernel<<<Blocks(n * c), kThreads, 0, stream>>>(x, y, n, hw, c, max);
  return cudaGetLastError();
}

cudaError_t GlobalPoolBackward(const float* x, const float* dy, float* dx, int64_t n, int64_t hw,
                               int64_t c, bool max, cudaStream_t stream) {
  if (n * hw * c <= 0) return cudaSuccess;
  DropStaleError();
  GlobalPoolBackwardKernel<<<Blocks(n * hw * c), kThreads, 0, stream>>>(x, dy, dx, n, hw, c, max);
  return cudaGetLastError();
}

cudaError_t EmbeddingLookup(const float* ids, const float* table, float* y, int64_t n, int64_t rows,
                            int64_t d, cudaStream_t stream) {
  if (n * d <= 0) return cudaSuccess;
  DropStaleError();
  EmbeddingLookupKernel<<<Blocks(n * d), kThreads, 0, stream>>>(ids, table, y, n, rows, d);
  return cudaGetLastError();
}

cudaError_t EmbeddingGradient(const float* ids, const float* dy, float* dtable, int64_t n,
                              int64_t rows, int64_t d, cudaStream_t stream) {
  if (rows * d <= 0) return cudaSuccess;
  cudaError_t zeroed = cudaMemsetAsync(dtable, 0, rows * d * sizeof(float), stream);
  if (zeroed != cudaSuccess || n <= 0) return zeroed;
  DropStaleError();
  EmbeddingGradientKernel<<<Blocks(d), kThreads, 0, stream>>>(ids, dy, dtable, n, rows, d);
  return cudaGetLastError();
}

cudaError_t L2Normalize(const float* x, const float* dy, float* y, int64_t vectors, int64_t m,
                        int64_t k, bool transposed, float epsilon, cudaStream_t stream) {
  if (vectors <= 0) return cudaSuccess;
  DropStaleError();
  L2NormalizeKernel<<<Blocks(vectors), kThreads, 0, stream>>>(x, dy, y, vectors, m, k, transposed,
                                                              epsilon);
  return cudaGetLastError();
}

cudaError_t MaxPool(const float* x, float* y, const math::PoolGeometry& g, cudaStream_t stream) {
  const int64_t outputs = g.n * g.oh * g.ow * g.c;
  if (outputs <= 0) return cudaSuccess;
  DropStaleError();
  MaxPoolKernel<<<Blocks(outputs), kThreads, 0, stream>>>(x, y, g, outputs);
  return cudaGetLastError();
}

cudaError_t MaxPoolBackward(const float* x, const float* dy, int32_t* argmax, float* dx,
                            const math::PoolGeometry& g, cudaStream_t stream) {
  const int64_t outputs = g.n * g.oh * g.ow * g.c, elements = g.n * g.h * g.w * g.c;
  if (elements <= 0) return cudaSuccess;
  if (outputs <= 0) return cudaMemsetAsync(dx, 0, elements * sizeof(float), stream);
  DropStaleError();
  MaxPoolArgmaxKernel<<<Blocks(outputs), kThreads, 0, stream>>>(x, argmax, g, outputs);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  MaxPoolGradientKernel<<<Blocks(elements), kThreads, 0, stream>>>(argmax, dy, dx, g, elements);
  return cudaGetLastError();
}

cudaError_t AvgPool(const float* x, float* y, const math::PoolGeometry& g, cudaStream_t stream) {
  const int64_t outputs = g.n * g.oh * g.ow * g.c;
  if (outputs <= 0) return cudaSuccess;
  DropStaleError();
  AvgPoolKernel<<<Blocks(outputs), kThreads, 0, stream>>>(x, y, g, outputs);
  return cudaGetLastError();
}

cudaError_t AvgPoolBackward(const float* dy, float* dx, const math::PoolGeometry& g,
                            cudaStream_t stream) {
  const int64_t elements = g.n * g.h * g.w * g.c;
  if (elements <= 0) return cudaSuccess;
  DropStaleError();
  AvgPoolGradientKernel<<<Blocks(elements), kThreads, 0, stream>>>(dy, dx, g, elements);
  return cudaGetLastError();
}

namespace {

template <typename T>
cudaError_t PadAs(const T* x, T* xp, const math::PadGeometry& g, cudaStream_t stream) {
  const int64_t elements = g.n * g.hp * g.wp * g.c;
  if (elements <= 0) return cudaSuccess;
  DropStaleError();
  PadKernel<T><<<Blocks(elements), kThreads, 0, stream>>>(x, xp, g, elements);
  return cudaGetLastError();
}

template <typename T>
cudaError_t CropAs(const T* xp, T* x, const math::PadGeometry& g, cudaStream_t stream) {
  const int64_t elements = g.n * g.h * g.w * g.c;
  if (elements <= 0) return cudaSuccess;
  DropStaleError();
  CropKernel<T><<<Blocks(elements), kThreads, 0, stream>>>(xp, x, g, elements);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Pad(const float* x, float* xp, const math::PadGeometry& g, cudaStream_t stream) {
  return PadAs(x, xp, g, stream);
}
cudaError_t Crop(const float* xp, float* x, const math::PadGeometry& g, cudaStream_t stream) {
  return CropAs(xp, x, g, stream);
}
cudaError_t Pad(const uint16_t* x, uint16_t* xp, const math::PadGeometry& g, cudaStream_t stream) {
  return PadAs(x, xp, g, stream);
}
cudaError_t Crop(const uint16_t* xp, uint16_t* x, const math::PadGeometry& g, cudaStream_t stream) {
  return CropAs(xp, x, g, stream);
}

size_t BatchNormScratchBytes(int64_t rows, int64_t c) {
  return static_cast<size_t>(math::ColumnSumParts(rows)) * static_cast<size_t>(c) *
         sizeof(math::BnSums);
}

namespace {

// One fixed-order column reduction of kind `kind` (math::BnReduction) into
// out (and out2).
cudaError_t BnReduce(int kind, const math::BnInputs& in, int64_t rows, int64_t c, void* scratch,
                     float* out, float* out2, cudaStream_t stream) {
  const int parts = math::ColumnSumParts(rows);
  const math::Grid g = math::ColumnSumGrid(rows, c);
  auto* partial = static_cast<math::BnSums*>(scratch);
  BnPartialSumsKernel<<<dim3(U(g.x), U(g.y)), dim3(math::kTile, math::kTileRows), 0, stream>>>(
      kind, in, rows, c, partial);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  BnFinishKernel<<<Blocks(c), kThreads, 0, stream>>>(kind, partial, parts, rows, c, out, out2);
  return cudaGetLastError();
}

}  // namespace

cudaError_t BatchNormStatistics(const float* x, int64_t rows, int64_t c, void* scratch, float* mean,
                                float* variance, cudaStream_t stream) {
  if (c <= 0) return cudaSuccess;
  if (rows <= 0) return cudaErrorInvalidValue;
  DropStaleError();
  math::BnInputs in{x, nullptr, nullptr, nullptr, 0.0f};
  if (cudaError_t e = BnReduce(math::kBnSumX, in, rows, c, scratch, mean, nullptr, stream);
      e != cudaSuccess) {
    return e;
  }
  in.mean = mean;
  return BnReduce(math::kBnSumSquaredDeviation, in, rows, c, scratch, variance, nullptr, stream);
}

cudaError_t BatchNormNormalize(const float* x, const float* gamma, const float* beta,
                               const float* mean, const float* variance, float epsilon, float* y,
                               int64_t rows, int64_t c, cudaStream_t stream) {
  const int64_t n = rows * c;
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  BnNormalizeKernel<<<Blocks(n), kThreads, 0, stream>>>(x, gamma, beta, mean, variance, epsilon, y,
                                                        n, c);
  return cudaGetLastError();
}

cudaError_t BatchNormBackward(const float* x, const float* dy, const float* gamma,
                              const float* mean, const float* variance, float epsilon, int64_t rows,
                              int64_t c, void* scratch, float* dx, float* dgamma, float* dbeta,
                              cudaStream_t stream) {
  if (c <= 0) return cudaSuccess;
  if (rows <= 0) return cudaErrorInvalidValue;
  DropStaleError();
  const math::BnInputs in{x, dy, mean, variance, epsilon};
  if (cudaError_t e = BnReduce(math::kBnSumGradients, in, rows, c, scratch, dbeta, dgamma, stream);
      e != cudaSuccess) {
    return e;
  }
  const int64_t n = rows * c;
  BnInputGradientKernel<<<Blocks(n), kThreads, 0, stream>>>(
      x, dy, gamma, mean, variance, dgamma, dbeta, static_cast<float>(rows), epsilon, dx, n, c);
  return cudaGetLastError();
}

cudaError_t Multiply(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  MultiplyKernel<<<Blocks(n), kThreads, 0, stream>>>(a, b, y, n);
  return cudaGetLastError();
}

cudaError_t Add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  AddKernel<<<Blocks(n), kThreads, 0, stream>>>(a, b, y, n);
  return cudaGetLastError();
}

cudaError_t Extremum(bool max, const float* a, const float* b, float* y, int64_t n,
                     cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  ExtremumKernel<<<Blocks(n), kThreads, 0, stream>>>(max, a, b, y, n);
  return cudaGetLastError();
}

cudaError_t ExtremumGradient(bool max, const float* a, const float* b, const float* dy, float* da,
                             int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  ExtremumGradientKernel<<<Blocks(n), kThreads, 0, stream>>>(max, a, b, dy, da, n);
  return cudaGetLastError();
}

cudaError_t Scale(const float* x, float s, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(x, s, y, n);
  return cudaGetLastError();
}

cudaError_t Cast(const void* x, int from, void* y, int to, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  CastKernel<<<Blocks(n), kThreads, 0, stream>>>(x, from, y, to, n);
  return cudaGetLastError();
}

cudaError_t FillOnes(void* y, int dtype, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  FillOnesKernel<<<Blocks(n), kThreads, 0, stream>>>(y, dtype, n);
  return cudaGetLastError();
}

cudaError_t AddInto(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  AddIntoKernel<<<Blocks(n), kThreads, 0, stream>>>(y, x, n);
  return cudaGetLastError();
}

cudaError_t LayerNorm(const float* x, const float* gamma, const float* beta, int64_t rows,
                      int64_t cols, float epsilon, float* y, float* mean, float* rstd,
                      cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  DropStaleError();
  LayerNormKernel<<<Blocks(rows), kThreads, 0, stream>>>(x, gamma, beta, rows, cols, epsilon, y,
                                                         mean, rstd);
  return cudaGetLastError();
}

cudaError_t LayerNormBackward(const float* x, const float* dy, const float* gamma,
                              const float* mean, const float* rstd, int64_t rows, int64_t cols,
                              float* dx, float* dgamma, float* dbeta, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  DropStaleError();
  if (dgamma != nullptr || dbeta != nullptr) {  // before dx, which may be dy
    LayerNormColumnsKernel<<<Blocks(cols), kThreads, 0, stream>>>(x, dy, mean, rstd, rows, cols,
                                                                  dgamma, dbeta);
  }
  if (dx != nullptr) {
    LayerNormBackwardKernel<<<Blocks(rows), kThreads, 0, stream>>>(x, dy, gamma, mean, rstd, rows,
                                                                   cols, dx);
  }
  return cudaGetLastError();
}

cudaError_t SequenceMask(const float* x, int64_t rows, int64_t cols, float value, float* m,
                         cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  DropStaleError();
  SequenceMaskKernel<<<Blocks(rows), kThreads, 0, stream>>>(x, rows, cols, value, m);
  return cudaGetLastError();
}

cudaError_t SelectRows(const float* a, const float* b, const float* m, int64_t n, int64_t cols,
                       float* y, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  SelectRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(a, b, m, n, cols, y);
  return cudaGetLastError();
}

cudaError_t MaskedMean(const float* x, const float* m, int64_t n, int64_t steps, int64_t cols,
                       float* y, cudaStream_t stream) {
  if (n * cols <= 0) return cudaSuccess;
  DropStaleError();
  MaskedMeanKernel<<<Blocks(n * cols), kThreads, 0, stream>>>(x, m, n * cols, steps, cols, y);
  return cudaGetLastError();
}

cudaError_t MaskedMeanBackward(const float* dy, const float* m, int64_t n, int64_t steps,
                               int64_t cols, float* dx, cudaStream_t stream) {
  const int64_t size = n * steps * cols;
  if (size <= 0) return cudaSuccess;
  DropStaleError();
  MaskedMeanBackwardKernel<<<Blocks(size), kThreads, 0, stream>>>(dy, m, size, steps, cols, dx);
  return cudaGetLastError();
}

cudaError_t LstmCell(const float* z, const float* c_prev, int64_t rows, int64_t units, float* h,
                     float* c, cudaStream_t stream) {
  const int64_t n = rows * units;
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  LstmCellKernel<<<Blocks(n), kThreads, 0, stream>>>(z, c_prev, n, units, h, c);
  return cudaGetLastError();
}

cudaError_t LstmCellBackward(const float* z, const float* c_prev, const float* c, const float* dh,
                             const float* dc, int64_t rows, int64_t units, float* dz,
                             float* dc_prev, cudaStream_t stream) {
  const int64_t n = rows * units;
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  LstmCellBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(z, c_prev, c, dh, dc, n, units, dz,
                                                             dc_prev);
  return cudaGetLastError();
}

cudaError_t GruCell(const float* xz, const float* hz, const float* h_prev, int64_t rows,
                    int64_t units, float* h, cudaStream_t stream) {
  const int64_t n = rows * units;
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  GruCellKernel<<<Blocks(n), kThreads, 0, stream>>>(xz, hz, h_prev, n, units, h);
  return cudaGetLastError();
}

cudaError_t GruCellBackward(const float* xz, const float* hz, const float* h_prev, const float* dh,
                            int64_t rows, int64_t units, float* dxz, float* dhz, float* dh_prev,
                            cudaStream_t stream) {
  const int64_t n = rows * units;
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  GruCellBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(xz, hz, h_prev, dh, n, units, dxz, dhz,
                                                            dh_prev);
  return cudaGetLastError();
}

cudaError_t Transpose(const float* x, float* y, const elementwise::TransposePlan& plan,
                      cudaStream_t stream) {
  if (plan.total <= 0) return cudaSuccess;
  DropStaleError();
  TransposeKernel<<<Blocks(plan.total), kThreads, 0, stream>>>(x, y, plan);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
