#include "common/compute/cuda/cuda_batch_norm_kernels.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/batch_norm_ops.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_status.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

constexpr int64_t kMaxElements = (int64_t{1} << 31) - 1;  // our kernels count in int

// x [rows, C] seen through its last axis: rank 2 or 4, within our kernels'
// element count.
absl::Status BatchNormDims(const char* op, const DeviceTensor& x, int64_t* rows, int64_t* c) {
  PSC_RETURN_IF_ERROR(WantFloat(op, "x", x));
  if (x.shape().size() != 2 && x.shape().size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x has shape ", ShapeText(x.shape()), ", want rank 2 or 4"));
  }
  if (x.size() > kMaxElements) {
    return absl::UnimplementedError(
        absl::StrCat(op, ": ", ShapeText(x.shape()), " has over 2^31 elements"));
  }
  *c = x.shape().back();
  *rows = *c == 0 ? 0 : x.size() / *c;
  return absl::OkStatus();
}

absl::Status Zero(CudaKernelContext& c, DeviceTensor* t) {
  PSC_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(c.DataOf(*t), 0, static_cast<size_t>(t->size()) * sizeof(float), c.stream()));
  return absl::OkStatus();
}

absl::Status BatchNormKernel(CudaKernelContext& k, KernelInputs in, const OpAttrs& a,
                             KernelOutputs out) {
  constexpr const char* kOp = batch_norm::kBatchNorm;
  const DeviceTensor &x = *in[0], &gamma = *in[1], &beta = *in[2];
  DeviceTensor *y = out[0], *mean = out[1], *variance = out[2];
  int64_t rows = 0, c = 0;
  PSC_RETURN_IF_ERROR(BatchNormDims(kOp, x, &rows, &c));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "gamma", gamma, {c}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "beta", beta, {c}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "y", *y, x.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "mean", *mean, {c}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "variance", *variance, {c}));
  // (The kernels would manage in place; the contract, as on the CPU, does not.)
  if (y == &x) return absl::InvalidArgumentError("BatchNorm: y may not be x");
  if (c == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(k.Elementwise(kOp, x));
  if (rows == 0) {  // no values: statistics 0, nothing to normalize
    PSC_RETURN_IF_ERROR(Zero(k, mean));
    return Zero(k, variance);
  }
  PSC_ASSIGN_OR_RETURN(void* scratch, k.KernelScratch(cuda::BatchNormScratchBytes(rows, c)));
  PSC_CUDA_RETURN_IF_ERROR(cuda::BatchNormStatistics(k.DataOf(x), rows, c, scratch, k.DataOf(*mean),
                                                     k.DataOf(*variance), k.stream()));
  PSC_CUDA_RETURN_IF_ERROR(cuda::BatchNormNormalize(k.DataOf(x), k.DataOf(gamma), k.DataOf(beta),
                                                    k.DataOf(*mean), k.DataOf(*variance), a.epsilon,
                                                    k.DataOf(*y), rows, c, k.stream()));
  return absl::OkStatus();
}

absl::Status BatchNormInferenceKernel(CudaKernelContext& k, KernelInputs in, const OpAttrs& a,
                                      KernelOutputs out) {
  constexpr const char* kOp = batch_norm::kBatchNormInference;
  const DeviceTensor &x = *in[0], &gamma = *in[1], &beta = *in[2], &mean = *in[3],
                     &variance = *in[4];
  DeviceTensor* y = out[0];
  int64_t rows = 0, c = 0;
  PSC_RETURN_IF_ERROR(BatchNormDims(kOp, x, &rows, &c));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "gamma", gamma, {c}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "beta", beta, {c}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "mean", mean, {c}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "variance", variance, {c}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "y", *y, x.shape()));
  if (x.size() == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(k.Elementwise(kOp, x));
  PSC_CUDA_RETURN_IF_ERROR(cuda::BatchNormNormalize(k.DataOf(x), k.DataOf(gamma), k.DataOf(beta),
                                                    k.DataOf(mean), k.DataOf(variance), a.epsilon,
                                                    k.DataOf(*y), rows, c, k.stream()));
  return absl::OkStatus();
}

absl::Status BatchNormBackwardKernel(CudaKernelContext& k, KernelInputs in, const OpAttrs& a,
                                     KernelOutputs out) {
  constexpr const char* kOp = batch_norm::kBatchNormBackward;
  const DeviceTensor &x = *in[0], &dy = *in[1], &gamma = *in[2], &mean = *in[3], &variance = *in[4];
  DeviceTensor *dx = out[0], *dgamma = out[1], *dbeta = out[2];
  int64_t rows = 0, c = 0;
  PSC_RETURN_IF_ERROR(BatchNormDims(kOp, x, &rows, &c));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, x.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "gamma", gamma, {c}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "mean", mean, {c}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "variance", variance, {c}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, x.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dgamma", *dgamma, {c}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dbeta", *dbeta, {c}));
  if (c == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(k.Elementwise(kOp, x));
  if (rows == 0) {  // no values: no gradient
    PSC_RETURN_IF_ERROR(Zero(k, dgamma));
    return Zero(k, dbeta);
  }
  PSC_ASSIGN_OR_RETURN(void* scratch, k.KernelScratch(cuda::BatchNormScratchBytes(rows, c)));
  PSC_CUDA_RETURN_IF_ERROR(cuda::BatchNormBackward(
      k.DataOf(x), k.DataOf(dy), k.DataOf(gamma), k.DataOf(mean), k.DataOf(variance), a.epsilon,
      rows, c, scratch, k.DataOf(*dx), k.DataOf(*dgamma), k.DataOf(*dbeta), k.stream()));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCudaBatchNormKernels(CudaKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CudaKernelContext> kKernels[] = {
      {batch_norm::kBatchNorm, 3, 3, BatchNormKernel, {}, batch_norm::Accepts},
      {batch_norm::kBatchNormInference, 5, 1, BatchNormInferenceKernel, {}, batch_norm::Accepts},
      {batch_norm::kBatchNormBackward, 5, 3, BatchNormBackwardKernel, {}, batch_norm::Accepts},
  };
  return RegisterKernels<CudaKernelContext>(context, kKernels, registry);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
