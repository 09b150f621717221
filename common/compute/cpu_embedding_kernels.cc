#include "common/compute/cpu_embedding_kernels.h"

#include <algorithm>
#include <cstring>

#include "common/base/status_macros.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/embedding_ops.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

absl::Status LookupKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs&, KernelOutputs out) {
  constexpr const char* kOp = embedding::kEmbeddingLookup;
  const DeviceTensor &ids = *in[0], &table = *in[1];
  DeviceTensor* y = out[0];
  int64_t n = 0, v = 0, d = 0;
  PSC_RETURN_IF_ERROR(embedding::CheckEmbedding(kOp, ids, table, *y, &n, &v, &d));
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "y", *y));
  PSC_ASSIGN_OR_RETURN(const float* idv, c.Plain(kOp, ids, ReorderSlot::kFirst));
  PSC_ASSIGN_OR_RETURN(const float* tv, c.Plain(kOp, table, ReorderSlot::kSecond));
  float* yv = Data(y);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = embedding::RowOf(idv[i], v);
    if (id < 0) return embedding::BadId(kOp, i, idv[i], v);
    std::memcpy(yv + i * d, tv + id * d, static_cast<size_t>(d) * sizeof(float));
  }
  Cpu(y).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

absl::Status GradientKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs&,
                            KernelOutputs out) {
  constexpr const char* kOp = embedding::kEmbeddingGradient;
  const DeviceTensor &ids = *in[0], &table = *in[1], &dy = *in[2];
  DeviceTensor* dtable = out[0];
  int64_t n = 0, v = 0, d = 0;
  PSC_RETURN_IF_ERROR(embedding::CheckEmbeddingGradient(ids, table, dy, *dtable, &n, &v, &d));
  PSC_ASSIGN_OR_RETURN(const float* idv, c.Plain(kOp, ids, ReorderSlot::kFirst));
  PSC_ASSIGN_OR_RETURN(const float* dyv, c.Plain(kOp, dy, ReorderSlot::kSecond));
  // Every id checked before anything is written.
  for (int64_t i = 0; i < n; ++i) {
    if (embedding::RowOf(idv[i], v) < 0) return embedding::BadId(kOp, i, idv[i], v);
  }
  float* g = Data(dtable);
  std::fill(g, g + v * d, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    float* row = g + embedding::RowOf(idv[i], v) * d;
    const float* src = dyv + i * d;
    for (int64_t k = 0; k < d; ++k) row[k] += src[k];
  }
  Cpu(dtable).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCpuEmbeddingKernels(CpuKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CpuKernelContext> kKernels[] = {
      {embedding::kEmbeddingLookup, 2, 1, LookupKernel, {}, embedding::Accepts},
      {embedding::kEmbeddingGradient, 3, 1, GradientKernel, {}, embedding::Accepts},
  };
  return RegisterKernels<CpuKernelContext>(context, kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
