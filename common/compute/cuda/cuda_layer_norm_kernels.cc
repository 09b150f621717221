#include "common/compute/cuda/cuda_layer_norm_kernels.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_status.h"
#include "common/compute/layer_norm_ops.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

const float* DataOrNull(CudaKernelContext& c, const DeviceTensor* t) {
  return t == nullptr ? nullptr : c.DataOf(*t);
}
float* DataOrNull(CudaKernelContext& c, DeviceTensor* t) {
  return t == nullptr ? nullptr : c.DataOf(*t);
}

absl::Status LayerNormKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                             KernelOutputs out) {
  constexpr const char* kOp = layer_norm::kLayerNorm;
  const DeviceTensor& x = *in[0];
  DeviceTensor *y = out[0], *mean = out[1], *rstd = out[2];
  int64_t rows = 0, cols = 0;
  PSC_RETURN_IF_ERROR(layer_norm::CheckLayerNorm(kOp, x, in[1], in[2], *mean, *rstd, &rows, &cols));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "y", *y, x.shape()));
  if (!(a.epsilon > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": epsilon ", a.epsilon, " is not > 0"));
  }
  PSC_RETURN_IF_ERROR(c.Enter());
  PSC_CUDA_RETURN_IF_ERROR(cuda::LayerNorm(c.DataOf(x), DataOrNull(c, in[1]), DataOrNull(c, in[2]),
                                           rows, cols, a.epsilon, c.DataOf(*y), c.DataOf(*mean),
                                           c.DataOf(*rstd), c.stream()));
  return absl::OkStatus();
}

absl::Status LayerNormBackwardKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                                     KernelOutputs out) {
  constexpr const char* kOp = layer_norm::kLayerNormBackward;
  const DeviceTensor &x = *in[0], &dy = *in[1], &mean = *in[3], &rstd = *in[4];
  DeviceTensor *dx = out[0], *dgamma = out[1], *dbeta = out[2];
  int64_t rows = 0, cols = 0;
  PSC_RETURN_IF_ERROR(layer_norm::CheckLayerNorm(kOp, x, in[2], nullptr, mean, rstd, &rows, &cols));
  PSC_RETURN_IF_ERROR(layer_norm::CheckLayerNorm(kOp, x, dgamma, dbeta, mean, rstd, &rows, &cols));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, x.shape()));
  if (dx != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, x.shape()));
  PSC_RETURN_IF_ERROR(c.Enter());
  PSC_CUDA_RETURN_IF_ERROR(cuda::LayerNormBackward(
      c.DataOf(x), c.DataOf(dy), DataOrNull(c, in[2]), c.DataOf(mean), c.DataOf(rstd), rows, cols,
      DataOrNull(c, dx), DataOrNull(c, dgamma), DataOrNull(c, dbeta), c.stream()));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCudaLayerNormKernels(CudaKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CudaKernelContext> kKernels[] = {
      {layer_norm::kLayerNorm, 3, 3, LayerNormKernel, {/*inputs=*/0b110, 0}},
      {layer_norm::kLayerNormBackward,
       5,
       3,
       LayerNormBackwardKernel,
       {/*inputs=*/0b100, /*outputs=*/0b111}},
  };
  return RegisterKernels<CudaKernelContext>(context, kKernels, registry);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
