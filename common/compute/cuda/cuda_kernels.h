// The CUDA backend's own kernels, for what no cuDNN or cuBLAS call fits.
// Each launcher queues its kernels on `stream` and returns the launch's
// error (cudaSuccess when queued); none synchronizes. Every result is
// deterministic: reductions run in a fixed order, with no atomics.
// Plain CUDA types only, so cuda_kernels.cu needs no Abseil headers.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_KERNELS_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psc {
namespace compute {
namespace cuda {

// y[i] = relu?(y[i] + b[i % k]) for i in [0, n): the bias of a channels-last
// tensor, with the ReLU fused.
cudaError_t BiasActivation(float* y, const float* b, int64_t n, int64_t k, bool relu,
                           cudaStream_t stream);

// out[b][c][r] = in[b][r][c]: `batch` row-major [rows, cols] matrices
// transposed (HWIO <-> KRSC filters with batch 1; NHWC <-> NCHW with batch N).
cudaError_t BatchedTranspose(const float* in, float* out, int64_t batch, int64_t rows, int64_t cols,
                             cudaStream_t stream);

// How many partial sums ColumnSums uses for `rows` rows; `partial` holds
// ColumnSumParts(rows) * cols floats.
int ColumnSumParts(int64_t rows);
// out[c] = sum over r of in[r * cols + c]: the bias gradient of a
// channels-last tensor. Two passes over fixed row ranges.
cudaError_t ColumnSums(const float* in, int64_t rows, int64_t cols, float* partial, float* out,
                       cudaStream_t stream);

// dx [n,h,w,c] = 0, then each 2x2 window's dy goes to its maximum in x (the
// first in row-major window order on ties).
cudaError_t MaxPool2x2Backward(const float* x, const float* dy, float* dx, int64_t n, int64_t h,
                               int64_t w, int64_t c, cudaStream_t stream);

// What SoftmaxCrossEntropy leaves on the device for the host to read.
struct LossTotals {
  double loss_sum;
  long long correct;
};

// For logits [n, m] and labels (checked in range by the caller):
// dlogits = (softmax - onehot) * scale; row_loss[i] and row_correct[i] per
// row in double; then *totals = their sums (one block, fixed order).
cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t n, int64_t m,
                                float scale, float* dlogits, double* row_loss, int* row_correct,
                                LossTotals* totals, cudaStream_t stream);

// y[i] = f(x[i]) (math::Activate's f) and dx[i] = the gradient from y.
cudaError_t Activate(int f, float alpha, const float* x, float* y, int64_t n, cudaStream_t stream);
cudaError_t ActivateBackward(int f, float alpha, const float* y, const float* dy, float* dx,
                             int64_t n, cudaStream_t stream);
// y [n, c] = the mean or max over the hw positions of x [n, hw, c], and
// dx [n, hw, c] from dy [n, c] (math::GlobalPool*).
cudaError_t GlobalPool(const float* x, float* y, int64_t n, int64_t hw, int64_t c, bool max,
                       cudaStream_t stream);
cudaError_t GlobalPoolBackward(const float* x, const float* dy, float* dx, int64_t n, int64_t hw,
                               int64_t c, bool max, cudaStream_t stream);
// y [n,h/2,w/2,c] = the 2x2 average pool of x [n,h,w,c], and its dx
// (math::AvgPool*).
cudaError_t AvgPool2x2(const float* x, float* y, int64_t n, int64_t h, int64_t w, int64_t c,
                       cudaStream_t stream);
cudaError_t AvgPool2x2Backward(const float* dy, float* dx, int64_t n, int64_t h, int64_t w,
                               int64_t c, cudaStream_t stream);

// y[i] = a[i] * b[i].
cudaError_t Multiply(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);

// y[i] += x[i] for i in [0, n): the local reduction of mirrored replicas'
// gradients.
cudaError_t AddInto(float* y, const float* x, int64_t n, cudaStream_t stream);

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_KERNELS_H_
