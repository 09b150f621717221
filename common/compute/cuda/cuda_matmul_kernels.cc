#include "common/compute/cuda/cuda_matmul_kernels.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_status.h"
#include "common/compute/matmul_ops.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

absl::Status BatchMatMulKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& attrs,
                               KernelOutputs out) {
  constexpr const char* kOp = matmul::kBatchMatMul;
  const DeviceTensor &a = *in[0], &b = *in[1];
  DeviceTensor* y = out[0];
  const OpAttrs::MatMul& mm = attrs.matmul;
  int64_t batch = 0;
  PSC_RETURN_IF_ERROR(matmul::CheckBatchMatMul(kOp, a, b, mm, *y, &batch));
  // cuBLAS counts matrices and their sides in int.
  constexpr int64_t kMaxInt = INT32_MAX;
  if (batch > kMaxInt || mm.m * mm.k > kMaxInt || mm.k * mm.n > kMaxInt || mm.m * mm.n > kMaxInt) {
    return absl::UnimplementedError(
        absl::StrCat(kOp, ": a batch or a matrix over 2^31 - 1 (cuBLAS counts in int)"));
  }
  PSC_RETURN_IF_ERROR(c.Enter());
  // Row-major y [M,N] = op(a)·op(b) is column-major yᵀ [N,M] = op(b)ᵀ·op(a)ᵀ.
  // Seen column-major, b's storage is bᵀ [N,K] (ld N), or, transposed, the
  // [K,N] whose transpose is wanted (ld K); a's is aᵀ [K,M] (ld K), or,
  // transposed, [M,K] (ld M).
  const int m = static_cast<int>(mm.m), k = static_cast<int>(mm.k), n = static_cast<int>(mm.n);
  const cublasOperation_t op_b = mm.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = mm.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ld_b = mm.transpose_b ? k : n, ld_a = mm.transpose_a ? m : k;
  const float one = 1.0f, zero = 0.0f;
  PSC_CUBLAS_RETURN_IF_ERROR(cublasSgemmStridedBatched(
      c.cublas(), op_b, op_a, n, m, k, &one, c.DataOf(b), ld_b, static_cast<long long>(k) * n,
      c.DataOf(a), ld_a, static_cast<long long>(m) * k, &zero, c.DataOf(*y), n,
      static_cast<long long>(m) * n, static_cast<int>(batch)));
  return absl::OkStatus();
}

// L2Normalize (no dy) and its gradient.
absl::Status NormalizeKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs& attrs,
                             KernelOutputs out) {
  const bool gradient = in.size() == 2;
  const char* op = gradient ? matmul::kL2NormalizeGradient : matmul::kL2Normalize;
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  int64_t batch = 0;
  PSC_RETURN_IF_ERROR(matmul::CheckL2Normalize(op, x, attrs, *y, &batch));
  PSC_RETURN_IF_ERROR(WantFloat(op, gradient ? "dx" : "y", *y));
  if (gradient) {
    PSC_RETURN_IF_ERROR(WantShape(op, "dy", *in[1], x.shape()));
    PSC_RETURN_IF_ERROR(WantFloat(op, "dy", *in[1]));
  }
  PSC_RETURN_IF_ERROR(c.Elementwise(op, x));
  const OpAttrs::MatMul& mm = attrs.matmul;
  PSC_CUDA_RETURN_IF_ERROR(cuda::L2Normalize(c.DataOf(x), gradient ? c.DataOf(*in[1]) : nullptr,
                                             c.DataOf(*y), batch * mm.m, mm.m, mm.k, mm.transpose_a,
                                             attrs.epsilon, c.stream()));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCudaMatMulKernels(CudaKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CudaKernelContext> kKernels[] = {
      {matmul::kBatchMatMul, 2, 1, BatchMatMulKernel, {}, matmul::Accepts},
      {matmul::kL2Normalize, 1, 1, NormalizeKernel, {}, matmul::AcceptsNormalize},
      {matmul::kL2NormalizeGradient, 2, 1, NormalizeKernel, {}, matmul::AcceptsNormalize},
  };
  return RegisterKernels<CudaKernelContext>(context, kKernels, registry);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
