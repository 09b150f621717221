#include "common/compute/cpu_layer_norm_kernels.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/layer_norm_math.h"
#include "common/compute/layer_norm_ops.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

const float* DataOrNull(const DeviceTensor* t) { return t == nullptr ? nullptr : Data(*t); }

// Everything plain: x read through a reorder where a convolution left it
// blocked.
absl::Status LayerNormKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs& a,
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
  cpu.UseThreads();
  PSC_ASSIGN_OR_RETURN(const float* xv, cpu.Plain(kOp, x, ReorderSlot::kFirst));
  const float *gamma = DataOrNull(in[1]), *beta = DataOrNull(in[2]);
  float *yv = Data(y), *mv = Data(mean), *rv = Data(rstd);
  const float eps = a.epsilon;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    layer_norm::ForwardRow(xv + r * cols, gamma, beta, cols, eps, yv + r * cols, mv + r, rv + r);
  }
  for (DeviceTensor* t : {y, mean, rstd}) Cpu(t).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

absl::Status LayerNormBackwardKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs&,
                                     KernelOutputs out) {
  constexpr const char* kOp = layer_norm::kLayerNormBackward;
  const DeviceTensor &x = *in[0], &dy = *in[1], &mean = *in[3], &rstd = *in[4];
  DeviceTensor *dx = out[0], *dgamma = out[1], *dbeta = out[2];
  int64_t rows = 0, cols = 0;
  PSC_RETURN_IF_ERROR(layer_norm::CheckLayerNorm(kOp, x, in[2], nullptr, mean, rstd, &rows, &cols));
  PSC_RETURN_IF_ERROR(layer_norm::CheckLayerNorm(kOp, x, dgamma, dbeta, mean, rstd, &rows, &cols));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, x.shape()));
  if (dx != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, x.shape()));
  cpu.UseThreads();
  PSC_ASSIGN_OR_RETURN(const float* xv, cpu.Plain(kOp, x, ReorderSlot::kFirst));
  PSC_ASSIGN_OR_RETURN(const float* dyv, cpu.Plain(kOp, dy, ReorderSlot::kSecond));
  const float *gamma = DataOrNull(in[2]), *mv = Data(mean), *rv = Data(rstd);
  if (dgamma != nullptr || dbeta != nullptr) {
    float* dg = dgamma == nullptr ? nullptr : Data(dgamma);
    float* db = dbeta == nullptr ? nullptr : Data(dbeta);
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < cols; ++j) {
      layer_norm::ColumnGradients(xv, dyv, mv, rv, rows, cols, j, dg, db);
    }
    if (dgamma != nullptr) Cpu(dgamma).set_layout(Layout::kPlain);
    if (dbeta != nullptr) Cpu(dbeta).set_layout(Layout::kPlain);
  }
  if (dx != nullptr) {  // last: dx may be dy
    float* dxv = Data(dx);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      layer_norm::BackwardRow(xv + r * cols, dyv + r * cols, gamma, mv[r], rv[r], cols,
                              dxv + r * cols);
    }
    Cpu(dx).set_layout(Layout::kPlain);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCpuLayerNormKernels(CpuKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CpuKernelContext> kKernels[] = {
      {layer_norm::kLayerNorm, 3, 3, LayerNormKernel, {/*inputs=*/0b110, 0}},
      {layer_norm::kLayerNormBackward,
       5,
       3,
       LayerNormBackwardKernel,
       {/*inputs=*/0b100, /*outputs=*/0b111}},
  };
  return RegisterKernels<CpuKernelContext>(context, kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
