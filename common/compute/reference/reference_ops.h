// A plain C++ reference for every op of backend.h: double precision, simple
// loops over host vectors, in the same logical layouts (activations NHWC,
// conv kernels HWIO [3,3,C,K], dense kernels (in, out) [K,M], biases [K]).
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

// y [n,h,w,kout] = relu?(conv3x3_same(x, k) + b): stride 1, zero padding 1.
// x [n,h,w,c], k [3,3,c,kout] (HWIO), b [kout].
std::vector<double> Conv2D(const std::vector<double>& x, int n, int h, int w, int c,
                           const std::vector<double>& k, const std::vector<double>& b, int kout,
                           bool relu);

// dx [n,h,w,c] = the gradient w.r.t. x of sum(conv3x3_same(x, k) * dy), for
// dy [n,h,w,kout] and k [3,3,c,kout].
std::vector<double> Conv2DBackwardData(const std::vector<double>& dy, int n, int h, int w, int kout,
                                       const std::vector<double>& k, int c);

// dw [3,3,c,kout] and db [kout], the gradients of
// sum((conv3x3_same(x, k) + b) * dy),
// for x [n,h,w,c] and dy [n,h,w,kout].
WeightGrads Conv2DBackwardWeights(const std::vector<double>& x, int n, int h, int w, int c,
                                  const std::vector<double>& dy, int kout);

// f(x) elementwise: relu, sigmoid 1 / (1 + e^-x), tanh, leaky_relu
// (x > 0 ? x : alpha * x); `f` as compute::Activation numbers them (0..3).
std::vector<double> Activate(int f, double alpha, const std::vector<double>& x);
// dy * f'(x), from y = f(x): relu 1 or 0 and leaky_relu 1 or alpha where
// y > 0 or not; sigmoid y (1 - y); tanh 1 - y².
std::vector<double> ActivateBackward(int f, double alpha, const std::vector<double>& y,
                                     const std::vector<double>& dy);
// y [n,c] = mean (max: false) or max (max: true) over H and W of x [n,h,w,c].
std::vector<double> GlobalPool(bool max, const std::vector<double>& x, int n, int h, int w, int c);
// dx [n,h,w,c] for dy [n,c]: average dy / (h w) everywhere; max dy at each
// channel's first maximum in row-major order, 0 elsewhere.
std::vector<double> GlobalPoolBackward(bool max, const std::vector<double>& x, int n, int h, int w,
                                       int c, const std::vector<double>& dy);

// y [n,h/2,w/2,c] (floor) = the mean of each 2x2 window of x [n,h,w,c], and
// dx [n,h,w,c]: each window's dy / 4 on its elements, 0 where the floor cuts.
std::vector<double> AvgPool2x2(const std::vector<double>& x, int n, int h, int w, int c);
std::vector<double> AvgPool2x2Backward(int n, int h, int w, int c, const std::vector<double>& dy);

// max(x, 0), elementwise.
std::vector<double> Relu(const std::vector<double>& x);

// dx = dy where y > 0, else 0 (y is the ReLU's output; same sizes).
std::vector<double> ReluBackward(const std::vector<double>& y, const std::vector<double>& dy);

// y [n,h/2,w/2,c] (floor) = max over each 2x2 window (stride 2) of x [n,h,w,c].
std::vector<double> MaxPool2x2(const std::vector<double>& x, int n, int h, int w, int c);

// dx [n,h,w,c]: each window's dy [n,h/2,w/2,c] goes to the window's maximum,
// the first in row-major window order ((0,0), (0,1), (1,0), (1,1)) on ties;
// every other element, and the rows and columns the floor cuts off, get 0.
std::vector<double> MaxPool2x2Backward(const std::vector<double>& x, int n, int h, int w, int c,
                                       const std::vector<double>& dy);

// y [n,m] = relu?(x·wk + b), for x [n,k] (an [n,h,w,c] activation flattened
// in HWC order is the same vector), wk [k,m] (in, out), b [m].
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
  double loss_sum = 0;          // sum over the batch of -log softmax(logits)[label]
  int64_t correct = 0;          // rows whose argmax (the first on ties) is the label
  std::vector<double> dlogits;  // [n,m] = (softmax(logits) - onehot(label)) * grad_scale
};

// The fused softmax cross-entropy of logits [n,m] with sparse labels [n]; it
// subtracts each row's maximum first, so large logits stay finite.
// INVALID_ARGUMENT for a label outside [0, m).
absl::StatusOr<SoftmaxCrossEntropyResult> SoftmaxCrossEntropy(const std::vector<double>& logits,
                                                              int n, int m,
                                                              const std::vector<int32_t>& labels,
                                                              double grad_scale);

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

// sum(a * b) over equal-sized vectors.
double Dot(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace reference
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_REFERENCE_REFERENCE_OPS_H_
