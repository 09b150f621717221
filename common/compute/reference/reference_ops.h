// A plain C++ reference for every op of backend.h: double precision, simple
// loops over host vectors, in the same logical layouts (activations NHWC,
// conv kernels HWIO [KH,KW,C,K], dense kernels (in, out) [K,M], biases [K]).
// Every backend's conformance test (backend_conformance.h) checks its float32
// results against these, so they depend on no backend and no device library.
//
// Each tensor argument is followed by the dimensions it introduces: Conv2D
// takes x with n, h, w, c and then the kernel with the kout it adds. A vector
// whose size does not match its dimensions is a bug in the caller: the
// function prints what it expected and aborts.
//
// Also here, for the tests: reproducible random inputs and central
// differences.
#ifndef PSC_COMMON_COMPUTE_REFERENCE_REFERENCE_OPS_H_
#define PSC_COMMON_COMPUTE_REFERENCE_REFERENCE_OPS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "absl/status/statusor.h"

namespace psc {
namespace compute {
namespace reference {

// Kernel and bias gradients.
struct WeightGrads {
  std::vector<double> dw;
  std::vector<double> db;
};

// A 2-D window (a convolution's kernel or a pooling window): kh x kw,
// strides sh, sw, and Keras's padding ("same": true, "valid": false); a
// convolution's dilation (tap i reads position i * dil, the window
// spanning (k - 1) * dil + 1 positions) and groups (output channel o of K
// sees input channels [g * C/groups, (g + 1) * C/groups), g = o / (K/groups)).
struct Window2D {
  int kh = 3, kw = 3;
  int sh = 1, sw = 1;
  bool same = true;
  int dil_h = 1, dil_w = 1;
  int groups = 1;
};

// Along one input extent `in`: the output extent and the padding before it,
// as Keras (TensorFlow, JAX) pads: valid, out = (in - size) / stride + 1
// (0 if in < size), no padding; same, out = ceil(in / stride) and
// max((out - 1) * stride + size - in, 0) padding, its lower half before.
// Output o reads input positions [o * stride - before, ... + size).
void Extent(int in, int size, int stride, bool same, int* out, int* before);

// y [n,oh,ow,kout] = relu?(conv(x, k) + b), zero padding. x [n,h,w,c],
// k [kh,kw,c/groups,kout] (HWIO), b [kout] or empty for no bias.
std::vector<double> Conv2D(const std::vector<double>& x, int n, int h, int w, int c,
                           const std::vector<double>& k, const std::vector<double>& b, int kout,
                           const Window2D& win, bool relu);

// dx [n,h,w,c] = the gradient w.r.t. x of sum(conv(x, k) * dy), for
// dy [n,oh,ow,kout] and k [kh,kw,c/groups,kout].
std::vector<double> Conv2DBackwardData(const std::vector<double>& dy, int n, int h, int w, int kout,
                                       const std::vector<double>& k, int c, const Window2D& win);

// dw [kh,kw,c/groups,kout] and db [kout], the gradients of sum((conv(x, k) + b) * dy),
// for x [n,h,w,c] and dy [n,oh,ow,kout].
WeightGrads Conv2DBackwardWeights(const std::vector<double>& x, int n, int h, int w, int c,
                                  const std::vector<double>& dy, int kout, const Window2D& win);

// f(x) elementwise: relu, sigmoid 1 / (1 + e^-x), tanh, leaky_relu
// (x > 0 ? x : alpha * x), elu (alpha (e^x - 1) below 0), selu, softplus
// log(1 + e^x), softsign x / (1 + |x|), hard_sigmoid (Keras 3: relu6(x + 3)
// / 6; Keras 2: clip(0.2 x + 0.5, 0, 1)), relu clipped at alpha, e^x, gelu
// x (1 + erf(x / sqrt 2)) / 2, silu x / (1 + e^-x); `f` as
// compute::Activation numbers them (0..13).
std::vector<double> Activate(int f, double alpha, const std::vector<double>& x);
// dy * f'(x), from y = f(x): relu 1 or 0 and leaky_relu 1 or alpha where
// y > 0 or not; sigmoid y (1 - y); tanh 1 - y²; elu 1 or y + alpha; selu
// scale or y + scale alpha; softplus 1 - e^-y; softsign (1 - |y|)²; the
// clips 0 where saturated; exp y; and from the INPUT x (y holds it) for
// gelu Phi(x) + x phi(x) and silu s (1 + x (1 - s)), s = sigmoid(x).
std::vector<double> ActivateBackward(int f, double alpha, const std::vector<double>& y,
                                     const std::vector<double>& dy);
// Softmax over each row of `cols` elements of x: e^(x - max) / sum.
std::vector<double> Softmax(const std::vector<double>& x, int64_t cols);
// Its gradient from the output y: dy - sum(dy y) times y, per row.
std::vector<double> SoftmaxBackward(const std::vector<double>& y, const std::vector<double>& dy,
                                    int64_t cols);
// y [n,c] = mean (max: false) or max (max: true) over H and W of x [n,h,w,c].
std::vector<double> GlobalPool(bool max, const std::vector<double>& x, int n, int h, int w, int c);
// dx [n,h,w,c] for dy [n,c]: average dy / (h w) everywhere; max dy at each
// channel's first maximum in row-major order, 0 elsewhere.
std::vector<double> GlobalPoolBackward(bool max, const std::vector<double>& x, int n, int h, int w,
                                       int c, const std::vector<double>& dy);

// max(x, 0), elementwise.
std::vector<double> Relu(const std::vector<double>& x);

// dx = dy where y > 0, else 0 (y is the ReLU's output; same sizes).
std::vector<double> ReluBackward(const std::vector<double>& y, const std::vector<double>& dy);

// y [n,oh,ow,c] = the maximum over each window of x [n,h,w,c] (padding
// never wins).
std::vector<double> MaxPool(const std::vector<double>& x, int n, int h, int w, int c,
                            const Window2D& win);

// dx [n,h,w,c]: each window's dy [n,oh,ow,c] goes to the window's maximum,
// the first in row-major window order on ties, summed over overlapping
// windows; elements no window takes get 0.
std::vector<double> MaxPoolBackward(const std::vector<double>& x, int n, int h, int w, int c,
                                    const std::vector<double>& dy, const Window2D& win);

// y [n,oh,ow,c] = the mean of the window's elements inside x (padding not
// counted), and its gradient dx [n,h,w,c] for dy [n,oh,ow,c].
std::vector<double> AvgPool(const std::vector<double>& x, int n, int h, int w, int c,
                            const Window2D& win);
std::vector<double> AvgPoolBackward(int n, int h, int w, int c, const std::vector<double>& dy,
                                    const Window2D& win);

// Batch normalization over the last axis of x, seen as [rows, c] (an
// [n,h,w,c] activation has rows = n*h*w): per channel the mean and the
// biased variance, and y = (x - mean) / sqrt(variance + epsilon) * gamma + beta.
struct BatchNormResult {
  std::vector<double> y, mean, variance;
};
BatchNormResult BatchNorm(const std::vector<double>& x, int64_t rows, int c,
                          const std::vector<double>& gamma, const std::vector<double>& beta,
                          double epsilon);
// The same with given statistics.
std::vector<double> BatchNormInference(const std::vector<double>& x, int64_t rows, int c,
                                       const std::vector<double>& gamma,
                                       const std::vector<double>& beta,
                                       const std::vector<double>& mean,
                                       const std::vector<double>& variance, double epsilon);
// BatchNorm's gradients for dy [rows, c], through the batch statistics.
struct BatchNormGrads {
  std::vector<double> dx, dgamma, dbeta;
};
BatchNormGrads BatchNormBackward(const std::vector<double>& x, int64_t rows, int c,
                                 const std::vector<double>& dy, const std::vector<double>& gamma,
                                 double epsilon);

// Layer normalization of each of `rows` rows of `cols` values (Keras's
// LayerNormalization over the trailing axes that hold them): the row's
// mean and biased variance, rstd = 1 / sqrt(variance + epsilon), and y =
// (x - mean) x rstd x gamma + beta, gamma and beta [cols] or empty (1 and
// 0).
struct LayerNormResult {
  std::vector<double> y, mean, rstd;
};
LayerNormResult LayerNorm(const std::vector<double>& x, int64_t rows, int64_t cols,
                          const std::vector<double>& gamma, const std::vector<double>& beta,
                          double epsilon);
// LayerNorm's gradients for dy, through each row's statistics (computed
// again from x): dx, and dgamma and dbeta summed over the rows.
struct LayerNormGrads {
  std::vector<double> dx, dgamma, dbeta;
};
LayerNormGrads LayerNormBackward(const std::vector<double>& x, int64_t rows, int64_t cols,
                                 const std::vector<double>& dy, const std::vector<double>& gamma,
                                 double epsilon);

// One LSTM step of `rows` rows of `units` (Keras's LSTMCell, gates i, f, c,
// o along z's [rows, 4 units]): c = f c_prev + i g, h = o tanh(c); c_prev
// empty: zeros.
struct LstmResult {
  std::vector<double> h, c;
};
LstmResult LstmCell(const std::vector<double>& z, const std::vector<double>& c_prev, int64_t rows,
                    int64_t units);
// Its gradients for dh and dc (the gradient reaching c from the next step;
// empty: none): dz and dc_prev.
struct LstmGrads {
  std::vector<double> dz, dc_prev;
};
LstmGrads LstmCellBackward(const std::vector<double>& z, const std::vector<double>& c_prev,
                           const std::vector<double>& dh, const std::vector<double>& dc,
                           int64_t rows, int64_t units);

// One GRU step (Keras's GRUCell, reset_after=True, gates z, r, h of xz = x
// W + b_in and hz = h_prev U + b_rec, [rows, 3 units] each): h; h_prev
// empty: zeros.
std::vector<double> GruCell(const std::vector<double>& xz, const std::vector<double>& hz,
                            const std::vector<double>& h_prev, int64_t rows, int64_t units);
// Its gradients for dh: dxz, dhz and dh_prev's part that does not go
// through hz (dh z).
struct GruGrads {
  std::vector<double> dxz, dhz, dh_prev;
};
GruGrads GruCellBackward(const std::vector<double>& xz, const std::vector<double>& hz,
                         const std::vector<double>& h_prev, const std::vector<double>& dh,
                         int64_t rows, int64_t units);

// x of `shape` with its axes permuted: output axis i is input axis perm[i].
std::vector<double> Transpose(const std::vector<double>& x, const std::vector<int64_t>& shape,
                              const std::vector<int>& perm);

// y [n,m] = relu?(x·wk + b), for x [n,k] (an [n,h,w,c] activation flattened
// in HWC order is the same vector), wk [k,m] (in, out), b [m] or empty.
std::vector<double> Dense(const std::vector<double>& x, int n, int k, const std::vector<double>& wk,
                          const std::vector<double>& b, int m, bool relu);

// dx [n,k] = dy·wkᵀ, for dy [n,m] and wk [k,m].
std::vector<double> DenseBackwardData(const std::vector<double>& dy, int n, int m,
                                      const std::vector<double>& wk, int k);

// dw [k,m] = xᵀ·dy and db [m] = sum over the batch of dy, for x [n,k] and
// dy [n,m].
WeightGrads DenseBackwardWeights(const std::vector<double>& x, int n, int k,
                                 const std::vector<double>& dy, int m);

struct SoftmaxCrossEntropyResult {
  double loss_sum = 0;          // sum over the batch of w * -sum_j t[j] log softmax(logits)[j]
  int64_t correct = 0;          // rows whose argmax (the first on ties) is the label
  std::vector<double> dlogits;  // [n,m] = (softmax(logits) - t) * w * grad_scale
};

// The fused softmax cross-entropy of logits [n,m] with sparse labels [n],
// targets t = (1 - label_smoothing) * onehot(label) + label_smoothing / m
// and row weights w (`weights`, one per row; empty: 1): Keras's
// CategoricalCrossentropy with label_smoothing, times sample_weight. It
// subtracts each row's maximum first, so large logits stay finite.
// INVALID_ARGUMENT for a label outside [0, m) or weights of another length.
absl::StatusOr<SoftmaxCrossEntropyResult> SoftmaxCrossEntropy(
    const std::vector<double>& logits, int n, int m, const std::vector<int32_t>& labels,
    double grad_scale, double label_smoothing = 0, const std::vector<double>& weights = {});

// ---- Test support ----

// `count` values uniform in [lo, hi), each from one raw 32-bit draw of `rng`
// (its top 24 bits), so a seed gives the same values with every standard
// library (std::uniform_real_distribution is implementation-defined). Every
// value is rounded to float, so a float32 backend sees exactly these values.
std::vector<double> RandomUniform(std::mt19937* rng, size_t count, double lo, double hi);

// `count` distinct values, evenly spaced over [lo, hi] and shuffled with the
// raw draws of `rng` (Fisher-Yates; std::shuffle is implementation-defined),
// each rounded to float. Neighbours are (hi - lo) / (count - 1) apart.
std::vector<double> RandomDistinct(std::mt19937* rng, size_t count, double lo, double hi);

// The central-difference gradient of f at x: (f(x + eps e_i) - f(x - eps e_i)) / 2eps.
std::vector<double> NumericalGradient(const std::function<double(const std::vector<double>&)>& f,
                                      const std::vector<double>& x, double eps);

// A whole LSTM layer (rnn_ops.h's LstmLayer): y [n, T, U] from x [n, T,
// C], w [C, 4U], r [U, 4U], b [4U] (empty: zeros), the steps taken last to
// first with `reverse`; and its gradients for dy [n, T, U] (through time).
std::vector<double> LstmLayer(const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>& r, const std::vector<double>& b, int64_t n,
                              int64_t steps, int64_t c, int64_t units, bool reverse);
struct LstmLayerGrads {
  std::vector<double> dx, dw, dr, db;
};
LstmLayerGrads LstmLayerBackward(const std::vector<double>& x, const std::vector<double>& w,
                                 const std::vector<double>& r, const std::vector<double>& b,
                                 const std::vector<double>& dy, int64_t n, int64_t steps, int64_t c,
                                 int64_t units, bool reverse);

// The mask ops (mask_ops.h). SequenceMask: 1 per row of `cols` where any
// value differs from `value`. SelectRows: a's row where m is not 0, else
// b's (empty a or b: zeros), in rows of a.size() / m.size() (b's when a is
// empty). MaskedMean: y [n, cols], the mean of x [n, steps, cols] over the
// steps m keeps; MaskedMeanBackward its gradient dx for dy.
std::vector<double> SequenceMask(const std::vector<double>& x, int64_t cols, double value);
std::vector<double> SelectRows(const std::vector<double>& a, const std::vector<double>& b,
                               const std::vector<double>& m);
std::vector<double> MaskedMean(const std::vector<double>& x, const std::vector<double>& m,
                               int64_t n, int64_t steps, int64_t cols);
std::vector<double> MaskedMeanBackward(const std::vector<double>& dy, const std::vector<double>& m,
                                       int64_t n, int64_t steps, int64_t cols);

// sum(a * b) over equal-sized vectors.
double Dot(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace reference
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_REFERENCE_REFERENCE_OPS_H_
