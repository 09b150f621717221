#include "common/compute/cpu_mask_kernels.h"

#include "common/base/status_macros.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/mask_math.h"
#include "common/compute/mask_ops.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

absl::Status SequenceMaskKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs& a,
                                KernelOutputs out) {
  int64_t rows = 0;
  PSC_RETURN_IF_ERROR(mask::CheckSequenceMask(*in[0], a.row_size, *out[0], &rows));
  cpu.UseThreads();
  PSC_ASSIGN_OR_RETURN(const float* x, cpu.Plain(mask::kSequenceMask, *in[0], ReorderSlot::kFirst));
  float* m = Data(out[0]);
  const int64_t cols = a.row_size;
  const float value = a.scalar;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) m[r] = mask::RowMask(x, cols, value, r);
  Cpu(out[0]).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

absl::Status SelectRowsKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs&,
                              KernelOutputs out) {
  int64_t cols = 0;
  PSC_RETURN_IF_ERROR(mask::CheckSelectRows(in[1], in[2], *in[0], *out[0], &cols));
  cpu.UseThreads();
  const float *a = nullptr, *b = nullptr;
  if (in[1] != nullptr) {
    PSC_ASSIGN_OR_RETURN(a, cpu.Plain(mask::kSelectRows, *in[1], ReorderSlot::kFirst));
  }
  if (in[2] != nullptr) {
    PSC_ASSIGN_OR_RETURN(b, cpu.Plain(mask::kSelectRows, *in[2], ReorderSlot::kSecond));
  }
  const float* m = Data(*in[0]);
  float* y = Data(out[0]);
  const int64_t n = out[0]->size();
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < n; ++e) y[e] = mask::SelectRow(a, b, m, cols, e);
  Cpu(out[0]).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

absl::Status MaskedMeanKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs&,
                              KernelOutputs out) {
  int64_t n = 0, steps = 0, cols = 0;
  PSC_RETURN_IF_ERROR(
      mask::CheckMaskedMean(mask::kMaskedMean, *in[0], *in[1], *out[0], &n, &steps, &cols));
  cpu.UseThreads();
  PSC_ASSIGN_OR_RETURN(const float* x, cpu.Plain(mask::kMaskedMean, *in[0], ReorderSlot::kFirst));
  const float* m = Data(*in[1]);
  float* y = Data(out[0]);
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < n * cols; ++e) y[e] = mask::MaskedMean(x, m, steps, cols, e);
  Cpu(out[0]).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

absl::Status MaskedMeanBackwardKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs&,
                                      KernelOutputs out) {
  int64_t n = 0, steps = 0, cols = 0;
  PSC_RETURN_IF_ERROR(
      mask::CheckMaskedMean(mask::kMaskedMeanBackward, *out[0], *in[1], *in[0], &n, &steps, &cols));
  cpu.UseThreads();
  PSC_ASSIGN_OR_RETURN(const float* dy,
                       cpu.Plain(mask::kMaskedMeanBackward, *in[0], ReorderSlot::kFirst));
  const float* m = Data(*in[1]);
  float* dx = Data(out[0]);
  const int64_t per = steps * cols;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < n; ++k) {
    const float count = mask::KeptSteps(m, steps, k);
    for (int64_t e = k * per; e < (k + 1) * per; ++e) {
      dx[e] = mask::MaskedMeanGradient(dy, m, steps, cols, count, e);
    }
  }
  Cpu(out[0]).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCpuMaskKernels(CpuKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CpuKernelContext> kKernels[] = {
      {mask::kSequenceMask, 1, 1, SequenceMaskKernel, {}},
      {mask::kSelectRows, 3, 1, SelectRowsKernel, {/*inputs=*/0b110, 0}},
      {mask::kMaskedMean, 2, 1, MaskedMeanKernel, {}},
      {mask::kMaskedMeanBackward, 2, 1, MaskedMeanBackwardKernel, {}},
  };
  return RegisterKernels<CpuKernelContext>(context, kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
