#include "common/compute/cuda/cuda_mask_kernels.h"

#include "common/base/status_macros.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_status.h"
#include "common/compute/mask_ops.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

const float* MaskData(CudaKernelContext& c, const DeviceTensor* t) {
  return t == nullptr ? nullptr : c.DataOf(*t);
}

absl::Status SequenceMaskKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                                KernelOutputs out) {
  int64_t rows = 0;
  PSC_RETURN_IF_ERROR(mask::CheckSequenceMask(*in[0], a.row_size, *out[0], &rows));
  PSC_RETURN_IF_ERROR(c.Enter());
  PSC_CUDA_RETURN_IF_ERROR(cuda::SequenceMask(c.DataOf(*in[0]), rows, a.row_size, a.scalar,
                                              c.DataOf(*out[0]), c.stream()));
  return absl::OkStatus();
}

absl::Status SelectRowsKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                              KernelOutputs out) {
  int64_t cols = 0;
  PSC_RETURN_IF_ERROR(mask::CheckSelectRows(in[1], in[2], *in[0], *out[0], &cols));
  PSC_RETURN_IF_ERROR(c.Enter());
  PSC_CUDA_RETURN_IF_ERROR(cuda::SelectRows(MaskData(c, in[1]), MaskData(c, in[2]),
                                            c.DataOf(*in[0]), out[0]->size(), cols,
                                            c.DataOf(*out[0]), c.stream()));
  return absl::OkStatus();
}

absl::Status MaskedMeanKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                              KernelOutputs out) {
  int64_t n = 0, steps = 0, cols = 0;
  PSC_RETURN_IF_ERROR(
      mask::CheckMaskedMean(mask::kMaskedMean, *in[0], *in[1], *out[0], &n, &steps, &cols));
  PSC_RETURN_IF_ERROR(c.Enter());
  PSC_CUDA_RETURN_IF_ERROR(cuda::MaskedMean(c.DataOf(*in[0]), c.DataOf(*in[1]), n, steps, cols,
                                            c.DataOf(*out[0]), c.stream()));
  return absl::OkStatus();
}

absl::Status MaskedMeanBackwardKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                                      KernelOutputs out) {
  int64_t n = 0, steps = 0, cols = 0;
  PSC_RETURN_IF_ERROR(
      mask::CheckMaskedMean(mask::kMaskedMeanBackward, *out[0], *in[1], *in[0], &n, &steps, &cols));
  PSC_RETURN_IF_ERROR(c.Enter());
  PSC_CUDA_RETURN_IF_ERROR(cuda::MaskedMeanBackward(c.DataOf(*in[0]), c.DataOf(*in[1]), n, steps,
                                                    cols, c.DataOf(*out[0]), c.stream()));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCudaMaskKernels(CudaKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CudaKernelContext> kKernels[] = {
      {mask::kSequenceMask, 1, 1, SequenceMaskKernel, {}},
      {mask::kSelectRows, 3, 1, SelectRowsKernel, {/*inputs=*/0b110, 0}},
      {mask::kMaskedMean, 2, 1, MaskedMeanKernel, {}},
      {mask::kMaskedMeanBackward, 2, 1, MaskedMeanBackwardKernel, {}},
  };
  return RegisterKernels<CudaKernelContext>(context, kKernels, registry);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
