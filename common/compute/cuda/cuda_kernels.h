// The CUDA backend's own kernels, for what no cuDNN or cuBLAS call fits.
// Each launcher queues its kernels on `stream` and returns the launch's
// error (cudaSuccess when queued); none synchronizes. Every result is
// deterministic: reductions run in a fixed order, with no atomics.
// Plain CUDA types and cuda_kernel_math.h's geometry structs only, so
// cuda_kernels.cu needs no Abseil headers.
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_KERNELS_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/compute/cuda/cuda_kernel_math.h"
#include "common/compute/dtype.h"
#include "common/compute/transpose_math.h"

namespace psc {
namespace compute {
namespace cuda {

// y[i] = relu?(y[i] + b[i % k]) for i in [0, n): the bias of a channels-last
// tensor, with the ReLU fused. b null: no bias (the ReLU alone, or nothing).
cudaError_t BiasActivation(float* y, const float* b, int64_t n, int64_t k, bool relu,
                           cudaStream_t stream);
// The same on y held in `dtype` (Cast's codes): computed in float32 from
// y's value, rounded once.
cudaError_t BiasActivationAs(void* y, int dtype, const float* b, int64_t n, int64_t k, bool relu,
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

// What SoftmaxCrossEntropy leaves on the device for the host to read.
struct LossTotals {
  double loss_sum;
  long long correct;
};

// For logits [n, m], labels (checked in range by the caller) and weights
// (null: 1): math::SoftmaxRow of each row (targets smoothed by `smoothing`,
// dlogits times the row's weight and `scale`); row_loss[i] and
// row_correct[i] per row in double; then *totals = their sums (one block,
// fixed order).
cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, const float* weights,
                                int64_t n, int64_t m, float scale, float smoothing, float* dlogits,
                                double* row_loss, int* row_correct, LossTotals* totals,
                                cudaStream_t stream);

// y[i] = f(x[i]) (math::Activate's f) and dx[i] = the gradient from y.
cudaError_t Activate(int f, float alpha, const float* x, float* y, int64_t n, cudaStream_t stream);
cudaError_t ActivateBackward(int f, float alpha, const float* y, const float* dy, float* dx,
                             int64_t n, cudaStream_t stream);
// Softmax over each of `rows` rows of `cols` values (math's SoftmaxRow), and
// its gradient from the output (SoftmaxRowGradient); one thread a row.
cudaError_t Softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);
cudaError_t SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                            cudaStream_t stream);
// y [n, c] = the mean or max over the hw positions of x [n, hw, c], and
// dx [n, hw, c] from dy [n, c] (math::GlobalPool*).
cudaError_t GlobalPool(const float* x, float* y, int64_t n, int64_t hw, int64_t c, bool max,
                       cudaStream_t stream);
cudaError_t GlobalPoolBackward(const float* x, const float* dy, float* dx, int64_t n, int64_t hw,
                               int64_t c, bool max, cudaStream_t stream);
// Pooling over windows (math::PoolGeometry g), one thread per output
// element forward and, gathering, one per input element backward: no
// atomics, each sum in a fixed order.
// y [n,oh,ow,c] = each window's maximum (math::MaxPoolElement).
cudaError_t MaxPool(const float* x, float* y, const math::PoolGeometry& g, cudaStream_t stream);
// dx [n,h,w,c] from dy [n,oh,ow,c]: argmax [n,oh,ow,c] (scratch) gets each
// window's first maximum, then each element of dx gathers the dy of the
// windows whose maximum it is (math::MaxPoolGradient).
cudaError_t MaxPoolBackward(const float* x, const float* dy, int32_t* argmax, float* dx,
                            const math::PoolGeometry& g, cudaStream_t stream);
// y = each window's mean over its elements inside x, and dx from dy
// (math::AvgPool*).
cudaError_t AvgPool(const float* x, float* y, const math::PoolGeometry& g, cudaStream_t stream);
cudaError_t AvgPoolBackward(const float* dy, float* dx, const math::PoolGeometry& g,
                            cudaStream_t stream);

// A convolution's explicit padding (conv_padding.h): xp [n,hp,wp,c] = x
// [n,h,w,c] at (top, left) in zeros, and x = the crop of xp there.
// The 16-bit overloads move a bfloat16's or float16's bits.
cudaError_t Pad(const float* x, float* xp, const math::PadGeometry& g, cudaStream_t stream);
cudaError_t Crop(const float* xp, float* x, const math::PadGeometry& g, cudaStream_t stream);
cudaError_t Pad(const uint16_t* x, uint16_t* xp, const math::PadGeometry& g, cudaStream_t stream);
cudaError_t Crop(const uint16_t* xp, uint16_t* x, const math::PadGeometry& g, cudaStream_t stream);

// Batch normalization over x [rows, c], channels last (math::Bn*). The
// reductions use BatchNormScratchBytes(rows, c) bytes of device scratch.
size_t BatchNormScratchBytes(int64_t rows, int64_t c);
// mean [c] and the biased variance [c] over the rows (two fixed-order
// reductions in double). rows >= 1.
cudaError_t BatchNormStatistics(const float* x, int64_t rows, int64_t c, void* scratch, float* mean,
                                float* variance, cudaStream_t stream);
// y = (x - mean) / sqrt(variance + epsilon) * gamma + beta; y may be x.
cudaError_t BatchNormNormalize(const float* x, const float* gamma, const float* beta,
                               const float* mean, const float* variance, float epsilon, float* y,
                               int64_t rows, int64_t c, cudaStream_t stream);
// dbeta [c] = sum of dy, dgamma [c] = sum of dy * xhat (one fixed-order
// reduction in double), then dx (math::BnInputGradient); dx may be dy.
// rows >= 1.
cudaError_t BatchNormBackward(const float* x, const float* dy, const float* gamma,
                              const float* mean, const float* variance, float epsilon, int64_t rows,
                              int64_t c, void* scratch, float* dx, float* dgamma, float* dbeta,
                              cudaStream_t stream);

// y[i] = a[i] * b[i].
cudaError_t Multiply(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);

// y[i] = a[i] + b[i]; y may be a or b.
cudaError_t Add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);

// y[i] = s * x[i]; y may be x.
cudaError_t Scale(const float* x, float s, float* y, int64_t n, cudaStream_t stream);
// y = x converted, n elements: each of `from` and `to` 0 (float32), 1
// (bfloat16) or 2 (float16); rounded to nearest even, beyond float16's range
// to infinity.
cudaError_t Cast(const void* x, int from, void* y, int to, int64_t n, cudaStream_t stream);
// Cast's code of a float dtype.
inline int CastCode(DType d) { return d == DType::kBFloat16 ? 1 : d == DType::kFloat16 ? 2 : 0; }

// y[0, n) = 1 in `dtype` (Cast's codes).
cudaError_t FillOnes(void* y, int dtype, int64_t n, cudaStream_t stream);

// activation_math.h's Extremum and ExtremumGradient over n elements.
cudaError_t Extremum(bool max, const float* a, const float* b, float* y, int64_t n,
                     cudaStream_t stream);
cudaError_t ExtremumGradient(bool max, const float* a, const float* b, const float* dy, float* da,
                             int64_t n, cudaStream_t stream);

// Embeddings, for n ids of a [rows, d] table: y [n, d] = the ids' rows (NaN
// for an id that names none: math::EmbeddingLookupElement); dtable [rows,
// d] = dy's rows summed into their ids' rows, zero elsewhere, one thread
// per column going through the ids in order (math::EmbeddingGradientColumn).
cudaError_t EmbeddingLookup(const float* ids, const float* table, float* y, int64_t n, int64_t rows,
                            int64_t d, cudaStream_t stream);
cudaError_t EmbeddingGradient(const float* ids, const float* dy, float* dtable, int64_t n,
                              int64_t rows, int64_t d, cudaStream_t stream);

// Dot(normalize=True)'s operands (normalize_math.h), one thread per
// vector of K: without dy, y = x's vectors normalized; with dy, y = dx.
cudaError_t L2Normalize(const float* x, const float* dy, float* y, int64_t vectors, int64_t m,
                        int64_t k, bool transposed, float epsilon, cudaStream_t stream);

// y[i] += x[i] for i in [0, n): the local reduction of mirrored replicas'
// gradients.
cudaError_t AddInto(float* y, const float* x, int64_t n, cudaStream_t stream);

// Layer normalization of `rows` rows of `cols` values (layer_norm_math.h):
// y, and each row's mean and rstd. gamma, beta: cols values or null.
cudaError_t LayerNorm(const float* x, const float* gamma, const float* beta, int64_t rows,
                      int64_t cols, float epsilon, float* y, float* mean, float* rstd,
                      cudaStream_t stream);
// Its gradients: dgamma and dbeta (each null where not wanted) summed over
// the rows, then dx (null: none), which may be dy.
cudaError_t LayerNormBackward(const float* x, const float* dy, const float* gamma,
                              const float* mean, const float* rstd, int64_t rows, int64_t cols,
                              float* dx, float* dgamma, float* dbeta, cudaStream_t stream);

// The mask ops (mask_math.h): SequenceMask's m over rows of `cols` values;
// SelectRows' y of n elements in rows of `cols` (a or b null: zeros);
// MaskedMean's y [n, cols] of x [n, steps, cols]; its gradient dx.
cudaError_t SequenceMask(const float* x, int64_t rows, int64_t cols, float value, float* m,
                         cudaStream_t stream);
cudaError_t SelectRows(const float* a, const float* b, const float* m, int64_t n, int64_t cols,
                       float* y, cudaStream_t stream);
cudaError_t MaskedMean(const float* x, const float* m, int64_t n, int64_t steps, int64_t cols,
                       float* y, cudaStream_t stream);
cudaError_t MaskedMeanBackward(const float* dy, const float* m, int64_t n, int64_t steps,
                               int64_t cols, float* dx, cudaStream_t stream);

// One LSTM step over rows x units elements (rnn_math.h): h and c from the
// gates z and c_prev (null: zeros).
cudaError_t LstmCell(const float* z, const float* c_prev, int64_t rows, int64_t units, float* h,
                     float* c, cudaStream_t stream);
// Its gradients: dz, and dc_prev (null: not wanted); c_prev, dc null: zeros.
cudaError_t LstmCellBackward(const float* z, const float* c_prev, const float* c, const float* dh,
                             const float* dc, int64_t rows, int64_t units, float* dz,
                             float* dc_prev, cudaStream_t stream);

// One GRU step (reset_after=True; rnn_math.h): h from xz, hz and h_prev
// (null: zeros).
cudaError_t GruCell(const float* xz, const float* hz, const float* h_prev, int64_t rows,
                    int64_t units, float* h, cudaStream_t stream);
// Its gradients: dxz, dhz, and dh_prev's direct part (null: not wanted).
cudaError_t GruCellBackward(const float* xz, const float* hz, const float* h_prev, const float* dh,
                            int64_t rows, int64_t units, float* dxz, float* dhz, float* dh_prev,
                            cudaStream_t stream);

// y = x transposed by `plan` (transpose_math.h); y is not x.
cudaError_t Transpose(const float* x, float* y, const elementwise::TransposePlan& plan,
                      cudaStream_t stream);

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_KERNELS_H_
