// The softmax cross-entropy loss: a registered kernel (kernel_registry.h)
// on every backend, called through ComputeBackend::Run, as
// elementwise_ops.h. Its labels and weights come from the host and its
// totals go back to it: the executor uploads them into tensors (int32
// labels, float32 weights) and reads the totals (a float64 loss sum, an
// int64 count) back once. Its reference and cases:
// common/ops/loss_op_defs.cc. (binary_crossentropy and the regression
// losses are computed on the host: binary_cross_entropy.h,
// regression_loss.h.)
#ifndef PSC_COMMON_COMPUTE_LOSS_OPS_H_
#define PSC_COMMON_COMPUTE_LOSS_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace loss {

inline constexpr char kSoftmaxCrossEntropy[] = "SoftmaxCrossEntropy";

// For logits [N,M], labels [N] (int32) and weights [N] (null: 1; input 2
// is optional): p = softmax(logits), targets t = (1 - s) * onehot(label) +
// s / M (s = label_smoothing); loss_sum [1] (float64) = sum over n of
// w[n] * -sum_j t[n,j] log p[n,j]; correct [1] (int64) = the rows whose
// argmax (the first on ties) is the label (unweighted, as Keras's compiled
// metrics); dlogits [N,M] = (p[n] - t[n]) * w[n] * grad_scale.
// INVALID_ARGUMENT for a tensor of another shape or dtype or a smoothing
// outside [0, 1]. A label outside [0, M) is INVALID_ARGUMENT where the
// kernel reads the labels on the host (the CPU); a kernel that would have
// to wait for its device to see them (CUDA) gives that row a NaN loss,
// reading nothing outside it. The executor checks the labels on the host
// before it uploads them (CheckLabels). Attributes: grad_scale,
// label_smoothing.
inline absl::Status SoftmaxCrossEntropy(ComputeBackend* be, const DeviceTensor& logits,
                                        const DeviceTensor& labels, const DeviceTensor* weights,
                                        float grad_scale, float label_smoothing,
                                        DeviceTensor* dlogits, DeviceTensor* loss_sum,
                                        DeviceTensor* correct) {
  OpAttrs a;
  a.grad_scale = grad_scale;
  a.label_smoothing = label_smoothing;
  const DeviceTensor* in[] = {&logits, &labels, weights};
  DeviceTensor* out[] = {dlogits, loss_sum, correct};
  return be->Run(kSoftmaxCrossEntropy, in, a, out);
}

// The checks every backend's kernels make of the tensors and attributes
// above (not of the labels' values): INVALID_ARGUMENT naming the tensor.
absl::Status CheckSoftmaxCrossEntropy(const DeviceTensor& logits, const DeviceTensor& labels,
                                      const DeviceTensor* weights, const OpAttrs& a,
                                      const DeviceTensor& dlogits, const DeviceTensor& loss_sum,
                                      const DeviceTensor& correct);

// The host's check of a batch's labels and weights for logits [n, m]:
// one label per example, each in [0, m), weights empty or one per example.
// INVALID_ARGUMENT naming the first that is not.
absl::Status CheckLabels(absl::Span<const int32_t> labels, absl::Span<const float> weights,
                         int64_t n, int64_t m);

// The capability queries the kernels accept: logits of rank 2.
inline bool Accepts(const OpSpec& s) { return s.input.size() == 2; }

}  // namespace loss
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_LOSS_OPS_H_
