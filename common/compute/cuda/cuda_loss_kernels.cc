#include "common/compute/cuda/cuda_loss_kernels.h"

#include <cstdint>

#include "common/base/status_macros.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_status.h"
#include "common/compute/loss_ops.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

static_assert(sizeof(LossTotals::correct) == sizeof(int64_t), "the count is an int64 tensor's");

// The rows and their totals into the kernel scratch ([totals][row losses]
// [row counts]), then the totals into the two output tensors: nothing
// waits (the executor's copy of the totals to the host does). A label out
// of range makes its row's loss NaN (math::SoftmaxRow).
absl::Status SoftmaxCrossEntropyKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                                       KernelOutputs out) {
  const DeviceTensor &logits = *in[0], &labels = *in[1];
  const DeviceTensor* weights = in[2];
  DeviceTensor *dlogits = out[0], *loss_sum = out[1], *correct = out[2];
  PSC_RETURN_IF_ERROR(
      loss::CheckSoftmaxCrossEntropy(logits, labels, weights, a, *dlogits, *loss_sum, *correct));
  PSC_RETURN_IF_ERROR(c.Elementwise(loss::kSoftmaxCrossEntropy, logits));
  const int64_t n = logits.shape()[0], m = logits.shape()[1];
  void* total_loss = c.MemoryOf(*loss_sum);
  void* total_correct = c.MemoryOf(*correct);
  if (n == 0 || m == 0) {
    PSC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(total_loss, 0, sizeof(double), c.stream()));
    PSC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(total_correct, 0, sizeof(int64_t), c.stream()));
    return absl::OkStatus();
  }
  // Each part 8-byte aligned: 16 bytes of totals, n doubles, n ints.
  const size_t bytes = sizeof(LossTotals) + static_cast<size_t>(n) * (sizeof(double) + sizeof(int));
  PSC_ASSIGN_OR_RETURN(void* scratch, c.KernelScratch(bytes));
  auto* totals = static_cast<LossTotals*>(scratch);
  auto* row_loss = reinterpret_cast<double*>(totals + 1);
  auto* row_correct = reinterpret_cast<int*>(row_loss + n);
  PSC_CUDA_RETURN_IF_ERROR(SoftmaxCrossEntropy(
      c.DataOf(logits), static_cast<const int32_t*>(c.MemoryOf(labels)),
      weights == nullptr ? nullptr : c.DataOf(*weights), n, m, a.grad_scale, a.label_smoothing,
      c.DataOf(*dlogits), row_loss, row_correct, totals, c.stream()));
  PSC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(total_loss, &totals->loss_sum, sizeof(double),
                                           cudaMemcpyDeviceToDevice, c.stream()));
  PSC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(total_correct, &totals->correct, sizeof(int64_t),
                                           cudaMemcpyDeviceToDevice, c.stream()));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCudaLossKernels(CudaKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CudaKernelContext> kKernels[] = {
      {loss::kSoftmaxCrossEntropy,
       3,
       3,
       SoftmaxCrossEntropyKernel,
       {/*inputs=*/0b100, 0},
       loss::Accepts},
  };
  return RegisterKernels<CudaKernelContext>(context, kKernels, registry);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
