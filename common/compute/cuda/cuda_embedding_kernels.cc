#include "common/compute/cuda/cuda_embedding_kernels.h"

#include <cstdint>

#include "common/base/status_macros.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_status.h"
#include "common/compute/embedding_ops.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

absl::Status LookupKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                          KernelOutputs out) {
  constexpr const char* kOp = embedding::kEmbeddingLookup;
  const DeviceTensor &ids = *in[0], &table = *in[1];
  DeviceTensor* y = out[0];
  int64_t n = 0, v = 0, d = 0;
  PSC_RETURN_IF_ERROR(embedding::CheckEmbedding(kOp, ids, table, *y, &n, &v, &d));
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "y", *y));
  PSC_RETURN_IF_ERROR(c.Elementwise(kOp, ids));
  PSC_RETURN_IF_ERROR(c.Elementwise(kOp, table));
  PSC_CUDA_RETURN_IF_ERROR(
      cuda::EmbeddingLookup(c.DataOf(ids), c.DataOf(table), c.DataOf(*y), n, v, d, c.stream()));
  return absl::OkStatus();
}

absl::Status GradientKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                            KernelOutputs out) {
  constexpr const char* kOp = embedding::kEmbeddingGradient;
  const DeviceTensor &ids = *in[0], &table = *in[1], &dy = *in[2];
  DeviceTensor* dtable = out[0];
  int64_t n = 0, v = 0, d = 0;
  PSC_RETURN_IF_ERROR(embedding::CheckEmbeddingGradient(ids, table, dy, *dtable, &n, &v, &d));
  PSC_RETURN_IF_ERROR(c.Elementwise(kOp, ids));
  PSC_RETURN_IF_ERROR(c.Elementwise(kOp, dy));
  PSC_CUDA_RETURN_IF_ERROR(
      cuda::EmbeddingGradient(c.DataOf(ids), c.DataOf(dy), c.DataOf(*dtable), n, v, d, c.stream()));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCudaEmbeddingKernels(CudaKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CudaKernelContext> kKernels[] = {
      {embedding::kEmbeddingLookup, 2, 1, LookupKernel, {}, embedding::Accepts},
      {embedding::kEmbeddingGradient, 3, 1, GradientKernel, {}, embedding::Accepts},
  };
  return RegisterKernels<CudaKernelContext>(context, kKernels, registry);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
