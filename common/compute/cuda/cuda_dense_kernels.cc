#include "common/compute/cuda/cuda_dense_kernels.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_status.h"
#include "common/compute/dense_ops.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

constexpr int64_t kMaxDimension = (int64_t{1} << 31) - 1;  // cuBLAS counts in int

// CheckDense, and dimensions cuBLAS can count.
absl::Status DenseDims(const char* op, const DeviceTensor& x, const DeviceTensor& w,
                       const DeviceTensor& y, int64_t* n, int64_t* k, int64_t* m) {
  PSC_RETURN_IF_ERROR(CheckDense(op, x, w, y, n, k, m));
  if (*n > kMaxDimension || *k > kMaxDimension || *m > kMaxDimension) {
    return absl::UnimplementedError(absl::StrCat(op, ": dimensions over 2^31"));
  }
  return absl::OkStatus();
}

absl::Status DenseKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& a,
                         KernelOutputs out) {
  constexpr const char* kOp = dense::kDense;
  const DeviceTensor &x = *in[0], &w = *in[1];
  const DeviceTensor* b = in[2];
  DeviceTensor* y = out[0];
  int64_t n = 0, k = 0, m = 0;
  PSC_RETURN_IF_ERROR(DenseDims(kOp, x, w, *y, &n, &k, &m));
  if (b != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "b", *b, {m}));
  if (y->size() == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(c.Enter());
  // Row-major y [n,m] = x [n,k] · w [k,m] is column-major yᵀ = wᵀ · xᵀ.
  const float one = 1.0f, zero = 0.0f;
  PSC_CUBLAS_RETURN_IF_ERROR(cublasSgemm(c.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one,
                                         c.DataOf(w), m, c.DataOf(x), k, &zero, c.DataOf(*y), m));
  if (b == nullptr && !a.relu) return absl::OkStatus();
  PSC_CUDA_RETURN_IF_ERROR(cuda::BiasActivation(c.DataOf(*y), b == nullptr ? nullptr : c.DataOf(*b),
                                                y->size(), m, a.relu, c.stream()));
  return absl::OkStatus();
}

absl::Status DenseBackwardDataKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                                     KernelOutputs out) {
  constexpr const char* kOp = dense::kDenseBackwardData;
  const DeviceTensor &dy = *in[0], &w = *in[1];
  DeviceTensor* dx = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dy", dy));
  int64_t n = 0, k = 0, m = 0;
  PSC_RETURN_IF_ERROR(DenseDims(kOp, *dx, w, dy, &n, &k, &m));
  if (dx->size() == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(c.Enter());
  // dx [n,k] = dy [n,m] · wᵀ: column-major dxᵀ = op_T(w) · dyᵀ.
  const float one = 1.0f, zero = 0.0f;
  PSC_CUBLAS_RETURN_IF_ERROR(cublasSgemm(c.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, k, n, m, &one,
                                         c.DataOf(w), m, c.DataOf(dy), m, &zero, c.DataOf(*dx), k));
  return absl::OkStatus();
}

absl::Status DenseBackwardWeightsKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                                        KernelOutputs out) {
  constexpr const char* kOp = dense::kDenseBackwardWeights;
  const DeviceTensor &x = *in[0], &dy = *in[1];
  DeviceTensor *dw = out[0], *db = out[1];
  int64_t n = 0, k = 0, m = 0;
  PSC_RETURN_IF_ERROR(DenseDims(kOp, x, *dw, dy, &n, &k, &m));
  if (db != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "db", *db, {m}));
  if (m == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(c.Enter());
  if (dw->size() > 0 && n == 0) {  // no examples: no gradient
    PSC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(c.DataOf(*dw), 0, dw->size() * sizeof(float), c.stream()));
  } else if (dw->size() > 0) {
    // dw [k,m] = xᵀ · dy: column-major dwᵀ = dyᵀ · op_T(xᵀ).
    const float one = 1.0f, zero = 0.0f;
    PSC_CUBLAS_RETURN_IF_ERROR(cublasSgemm(c.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, m, k, n, &one,
                                           c.DataOf(dy), m, c.DataOf(x), k, &zero, c.DataOf(*dw),
                                           m));
  }
  if (db == nullptr) return absl::OkStatus();
  return c.ColumnSums(c.DataOf(dy), n, m, c.DataOf(*db));
}

}  // namespace

absl::Status RegisterCudaDenseKernels(CudaKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CudaKernelContext> kKernels[] = {
      {dense::kDense, 3, 1, DenseKernel, {/*inputs=*/0b100, 0}},
      {dense::kDenseBackwardData, 2, 1, DenseBackwardDataKernel},
      {dense::kDenseBackwardWeights, 2, 2, DenseBackwardWeightsKernel, {0, /*outputs=*/0b10}},
  };
  return RegisterKernels<CudaKernelContext>(context, kKernels, registry);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
