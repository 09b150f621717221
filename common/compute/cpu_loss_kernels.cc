#include "common/compute/cpu_loss_kernels.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/loss_ops.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

// On the host: the labels are checked first, then each row in double.
absl::Status SoftmaxCrossEntropyKernel(CpuKernelContext&, KernelInputs in, const OpAttrs& a,
                                       KernelOutputs out) {
  constexpr const char* kOp = loss::kSoftmaxCrossEntropy;
  const DeviceTensor &logits = *in[0], &labels_t = *in[1];
  const DeviceTensor* weights_t = in[2];
  DeviceTensor *dlogits = out[0], *loss_t = out[1], *correct_t = out[2];
  PSC_RETURN_IF_ERROR(loss::CheckSoftmaxCrossEntropy(logits, labels_t, weights_t, a, *dlogits,
                                                     *loss_t, *correct_t));
  const int64_t n = logits.shape()[0], m = logits.shape()[1];
  const auto* labels = static_cast<const int32_t*>(Cpu(labels_t).raw());
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= m) {
      return absl::InvalidArgumentError(absl::StrCat(kOp, ": label ", labels[i], " of example ", i,
                                                     " out of range [0, ", m, ")"));
    }
  }
  // Logits [N,M] and weights [N] are plain: only 4-D tensors are blocked.
  const float* z = Data(logits);
  const float* weights = weights_t == nullptr ? nullptr : Data(*weights_t);
  float* g = Data(dlogits);
  // t[j] = on where j is the label, off elsewhere.
  const double smoothing = a.label_smoothing;
  const double off = m > 0 ? smoothing / static_cast<double>(m) : 0.0;
  const double on = 1.0 - smoothing + off;
  double total = 0;
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* zi = z + i * m;
    float* gi = g + i * m;
    const double w = weights == nullptr ? 1.0 : weights[i];
    int64_t argmax = 0;
    for (int64_t j = 1; j < m; ++j) {
      if (zi[j] > zi[argmax]) argmax = j;
    }
    const float top = zi[argmax];
    double sum = 0, shifted_sum = 0;
    for (int64_t j = 0; j < m; ++j) {
      sum += std::exp(static_cast<double>(zi[j] - top));
      shifted_sum += static_cast<double>(zi[j] - top);
    }
    const double log_sum = std::log(sum);
    // -sum_j t[j] (z[j] - top - log_sum), with sum_j t[j] = 1.
    const double row =
        log_sum - (1.0 - smoothing) * static_cast<double>(zi[labels[i]] - top) - off * shifted_sum;
    total += w * row;
    const double scale = w * a.grad_scale;
    for (int64_t j = 0; j < m; ++j) {
      const double p = std::exp(static_cast<double>(zi[j] - top) - log_sum);
      gi[j] = static_cast<float>((p - (j == labels[i] ? on : off)) * scale);
    }
    right += argmax == labels[i];
  }
  Cpu(dlogits).set_layout(Layout::kPlain);
  *static_cast<double*>(Cpu(loss_t).raw()) = total;
  *static_cast<int64_t*>(Cpu(correct_t).raw()) = right;
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCpuLossKernels(CpuKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CpuKernelContext> kKernels[] = {
      {loss::kSoftmaxCrossEntropy,
       3,
       3,
       SoftmaxCrossEntropyKernel,
       {/*inputs=*/0b100, 0},
       loss::Accepts},
  };
  return RegisterKernels<CpuKernelContext>(context, kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
