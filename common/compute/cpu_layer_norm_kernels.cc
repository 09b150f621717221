#include "common/compute/cpu_layer_norm_kernels.h"

#include <cmath>
#include <vector>

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

// layer_norm_math.h's rows with their sums vectorized (summed in another
// order than the CUDA kernels' one by one: within the conformance bounds).
void ForwardRowSimd(const float* x, const float* gamma, const float* beta, int64_t cols,
                    float epsilon, float* y, float* mean, float* rstd) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < cols; ++j) sum += x[j];
  const float m = sum / static_cast<float>(cols);
  float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < cols; ++j) squares += (x[j] - m) * (x[j] - m);
  const float r = 1.0f / std::sqrt(squares / static_cast<float>(cols) + epsilon);
#pragma omp simd
  for (int64_t j = 0; j < cols; ++j) {
    const float inv = gamma == nullptr ? r : r * gamma[j];
    const float res = (beta == nullptr ? 0.0f : beta[j]) - m * inv;
    y[j] = x[j] * inv + res;
  }
  *mean = m;
  *rstd = r;
}

void BackwardRowSimd(const float* x, const float* dy, const float* gamma, float mean, float rstd,
                     int64_t cols, float* dx) {
  float g_sum = 0.0f, gx_sum = 0.0f;
#pragma omp simd reduction(+ : g_sum, gx_sum)
  for (int64_t j = 0; j < cols; ++j) {
    const float g = gamma == nullptr ? dy[j] : dy[j] * gamma[j];
    g_sum += g;
    gx_sum += g * (x[j] - mean) * rstd;
  }
  const float n = static_cast<float>(cols);
#pragma omp simd
  for (int64_t j = 0; j < cols; ++j) {
    const float g = gamma == nullptr ? dy[j] : dy[j] * gamma[j];
    dx[j] = rstd * (g - g_sum / n - (x[j] - mean) * rstd * gx_sum / n);
  }
}

// dgamma and dbeta: each column summed over the rows in double, in the rows'
// order (layer_norm::ColumnGradients's sums), row by row so the columns
// are read in memory order.
void ColumnGradientsByRow(const float* x, const float* dy, const float* mean, const float* rstd,
                          int64_t rows, int64_t cols, float* dgamma, float* dbeta) {
  std::vector<double> dg(static_cast<size_t>(cols), 0.0), db(static_cast<size_t>(cols), 0.0);
  double* g = dg.data();
  double* b = db.data();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* d = dy + r * cols;
    const float m = mean[r], rs = rstd[r];
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      g[j] += static_cast<double>(d[j] * ((xr[j] - m) * rs));
      b[j] += static_cast<double>(d[j]);
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    if (dgamma != nullptr) dgamma[j] = static_cast<float>(g[j]);
    if (dbeta != nullptr) dbeta[j] = static_cast<float>(b[j]);
  }
}

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
    ForwardRowSimd(xv + r * cols, gamma, beta, cols, eps, yv + r * cols, mv + r, rv + r);
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
    ColumnGradientsByRow(xv, dyv, mv, rv, rows, cols, dg, db);
    if (dgamma != nullptr) Cpu(dgamma).set_layout(Layout::kPlain);
    if (dbeta != nullptr) Cpu(dbeta).set_layout(Layout::kPlain);
  }
  if (dx != nullptr) {  // last: dx may be dy
    float* dxv = Data(dx);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      BackwardRowSimd(xv + r * cols, dyv + r * cols, gamma, mv[r], rv[r], cols, dxv + r * cols);
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
