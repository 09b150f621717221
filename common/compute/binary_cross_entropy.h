// Keras 3's binary_crossentropy of a one-unit output, with its gradient,
// computed on the host in double for every backend: the output is one
// float per example, so the executor copies it out and the gradient back
// (two transfers of N floats) instead of each backend carrying a kernel.
//
// As keras.losses.binary_crossentropy on the JAX backend (the form the
// interop tests compare with): a smoothed label t = y (1 - s) + s / 2; on
// logits z, t softplus(-z) + (1 - t) softplus(z), gradient sigmoid(z) - t;
// on probabilities p (a sigmoid output), p clipped to [1e-7, 1 - 1e-7]
// (Keras's epsilon, in float32) and -(t log p + (1 - t) log(1 - p)), whose
// gradient is 0 where the clip cut (half of it where p sits on a bound, as
// JAX's maximum and minimum split a tie). TensorFlow's backend instead
// takes the loss of the logits under a sigmoid; the two differ only where
// p is within 1e-7 of 0 or 1. The per-example loss times its weight is
// summed, and the gradient scaled by weight * grad_scale, as
// SoftmaxCrossEntropy does. `correct` counts Keras's binary accuracy:
// output > 0.5 (on logits too, as Keras compares whatever the model
// outputs) agrees with the label.
#ifndef PSC_COMMON_COMPUTE_BINARY_CROSS_ENTROPY_H_
#define PSC_COMMON_COMPUTE_BINARY_CROSS_ENTROPY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/compute/backend.h"

namespace psc {
namespace compute {

// outputs: one per example (an [N, 1] tensor's values); labels: N, each 0
// or 1; doutputs: N (written). INVALID_ARGUMENT naming the example for a
// label other than 0 or 1, and for sizes or options that do not agree
// (the rules of the softmax cross-entropy: loss_ops.h).
absl::Status BinaryCrossEntropy(absl::Span<const float> outputs, absl::Span<const int32_t> labels,
                                bool from_logits, const LossOptions& options,
                                absl::Span<float> doutputs, double* loss_sum, int64_t* correct);

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_BINARY_CROSS_ENTROPY_H_
