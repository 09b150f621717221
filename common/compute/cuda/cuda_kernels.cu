// The kernels of cuda_kernels.h.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/compute/cuda/cuda_kernel_math.h"
#include "common/compute/cuda/cuda_kernels.h"

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
    y[i] = math::BiasActivation(y[i], b[i % k], relu);
  }
}

// Row tile blockIdx.x of matrix blockIdx.z, every gridDim.y-th column tile.
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

__global__ void MaxPoolBackwardKernel(const float* x, const float* dy, float* dx, int64_t total,
                                      int64_t h, int64_t w, int64_t c) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < total;
       o += int64_t{gridDim.x} * blockDim.x) {
    math::MaxPoolBackwardElement(x, dy, dx, h, w, c, o);
  }
}

__global__ void SoftmaxRowsKernel(const float* logits, const int32_t* labels, int64_t n, int64_t m,
                                  float scale, float* dlogits, double* row_loss, int* row_correct) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    math::SoftmaxRow(logits, labels, m, scale, i, dlogits, row_loss, row_correct);
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

__global__ void AvgPoolKernel(const float* x, float* y, int64_t outputs, int64_t h, int64_t w,
                              int64_t c) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < outputs;
       o += int64_t{gridDim.x} * blockDim.x) {
    y[o] = math::AvgPoolElement(x, h, w, c, o);
  }
}

__global__ void AvgPoolBackwardKernel(const float* dy, float* dx, int64_t elements, int64_t h,
                                      int64_t w, int64_t c) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < elements;
       e += int64_t{gridDim.x} * blockDim.x) {
    dx[e] = math::AvgPoolGradient(dy, h, w, c, e);
  }
}

__global__ void MultiplyKernel(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = a[i] * b[i];
  }
}

// Every launcher starts here: an error an earlier call left unconsumed (each
// was already reported by the call that failed) must not be taken for this
// launch's. A sticky error (a dead context) comes back on the launch anyway.
void DropStaleError() { (void)cudaGetLastError(); }

unsigned U(int64_t v) { return static_cast<unsigned>(v); }

}  // namespace

cudaError_t BiasActivation(float* y, const float* b, int64_t n, int64_t k, bool relu,
                           cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (k <= 0) return cudaErrorInvalidValue;
  DropStaleError();
  BiasActivationKernel<<<Blocks(n), kThreads, 0, stream>>>(y, b, n, k, relu);
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

cudaError_t MaxPool2x2Backward(const float* x, const float* dy, float* dx, int64_t n, int64_t h,
                               int64_t w, int64_t c, cudaStream_t stream) {
  if (cudaError_t e = cudaMemsetAsync(dx, 0, n * h * w * c * sizeof(float), stream);
      e != cudaSuccess) {
    return e;
  }
  const int64_t outputs = n * (h / 2) * (w / 2) * c;
  if (outputs <= 0) return cudaSuccess;
  DropStaleError();
  MaxPoolBackwardKernel<<<Blocks(outputs), kThreads, 0, stream>>>(x, dy, dx, outputs, h, w, c);
  return cudaGetLastError();
}

cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t n, int64_t m,
                                float scale, float* dlogits, double* row_loss, int* row_correct,
                                LossTotals* totals, cudaStream_t stream) {
  if (n <= 0 || m <= 0) return cudaErrorInvalidValue;
  DropStaleError();
  SoftmaxRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(logits, labels, n, m, scale, dlogits,
                                                        row_loss, row_correct);
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

cudaError_t AvgPool2x2(const float* x, float* y, int64_t n, int64_t h, int64_t w, int64_t c,
                       cudaStream_t stream) {
  const int64_t outputs = n * (h / 2) * (w / 2) * c;
  if (outputs <= 0) return cudaSuccess;
  DropStaleError();
  AvgPoolKernel<<<Blocks(outputs), kThreads, 0, stream>>>(x, y, outputs, h, w, c);
  return cudaGetLastError();
}

cudaError_t AvgPool2x2Backward(const float* dy, float* dx, int64_t n, int64_t h, int64_t w,
                               int64_t c, cudaStream_t stream) {
  const int64_t elements = n * h * w * c;
  if (elements <= 0) return cudaSuccess;
  DropStaleError();
  AvgPoolBackwardKernel<<<Blocks(elements), kThreads, 0, stream>>>(dy, dx, elements, h, w, c);
  return cudaGetLastError();
}

cudaError_t Multiply(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  MultiplyKernel<<<Blocks(n), kThreads, 0, stream>>>(a, b, y, n);
  return cudaGetLastError();
}

cudaError_t AddInto(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropStaleError();
  AddIntoKernel<<<Blocks(n), kThreads, 0, stream>>>(y, x, n);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
