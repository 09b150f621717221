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

// bfloat16 and float16 (dense_ops.h: the dtype of the main output) on the
// tensor cores: cublasGemmEx with 16-bit operands, float32 accumulation
// (CUBLAS_COMPUTE_32F). The float32 kernel is rounded into the scratch
// first, as Keras casts it in the layer; the weight and bias gradients come
// out in float32. Taken when the activations share one dtype (TakesDense16,
// TakesDenseBackwardWeights16); otherwise ComputeBackend::Run gives float32
// copies.
cudaDataType_t CublasType(DType d) {
  return d == DType::kBFloat16 ? CUDA_R_16BF : d == DType::kFloat16 ? CUDA_R_16F : CUDA_R_32F;
}

// The float32 kernel w rounded to `dtype` at the start of the context's
// scratch (w16), and `extra` bytes of it after that for the caller.
struct DenseScratch {
  void* w16 = nullptr;
  void* extra = nullptr;
};
absl::StatusOr<DenseScratch> Rounded(CudaKernelContext& c, const DeviceTensor& w, DType dtype,
                                     size_t extra = 0) {
  const size_t w_bytes = (static_cast<size_t>(w.size()) * 2 + 255) / 256 * 256;
  PSC_ASSIGN_OR_RETURN(void* scratch, c.KernelScratch(w_bytes + extra));
  PSC_CUDA_RETURN_IF_ERROR(
      cuda::Cast(c.DataOf(w), 0, scratch, CastCode(dtype), w.size(), c.stream()));
  return DenseScratch{scratch, static_cast<char*>(scratch) + w_bytes};
}

absl::Status GemmEx(CudaKernelContext& c, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                    int64_t n, int64_t k, const void* a, DType at, int64_t lda, const void* b,
                    DType bt, int64_t ldb, void* out, DType ct, int64_t ldc) {
  const float one = 1.0f, zero = 0.0f;
  PSC_CUBLAS_RETURN_IF_ERROR(cublasGemmEx(
      c.cublas(), ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &one, a,
      CublasType(at), static_cast<int>(lda), b, CublasType(bt), static_cast<int>(ldb), &zero, out,
      CublasType(ct), static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

// The two activations of the op in one dtype (Dense's x and y, the data
// gradient's dy and dx, the weight gradient's x and dy): what the 16-bit
// paths take. A first layer's float32 input with a 16-bit output goes
// through float32 copies instead.
bool TakesDense16(KernelInputs in, const OpAttrs&, KernelOutputs out) {
  return SameDtype(in[0], out[0]);
}
bool TakesDenseBackwardWeights16(KernelInputs in, const OpAttrs&, KernelOutputs) {
  return SameDtype(in[0], in[1]);
}

absl::Status Dense16(CudaKernelContext& c, const DeviceTensor& x, const DeviceTensor& w,
                     const DeviceTensor* b, bool relu, DeviceTensor* y, int64_t n, int64_t k,
                     int64_t m) {
  const DType t = y->dtype();
  if (x.dtype() != t) {
    return absl::InvalidArgumentError(absl::StrCat(dense::kDense, ": x ", DTypeName(x.dtype()),
                                                   " and y ", DTypeName(t), " differ"));
  }
  PSC_RETURN_IF_ERROR(c.Enter());
  // The product in float32 beside the rounded kernel, the bias and relu on
  // it, then one rounding into y (as the CPU's oneDNN kernel rounds once).
  PSC_ASSIGN_OR_RETURN(const DenseScratch s,
                       Rounded(c, w, t, static_cast<size_t>(y->size()) * sizeof(float)));
  float* y32 = static_cast<float*>(s.extra);
  PSC_RETURN_IF_ERROR(GemmEx(c, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, s.w16, t, m, c.MemoryOf(x), t, k,
                             y32, DType::kFloat32, m));
  if (b != nullptr || relu) {
    PSC_CUDA_RETURN_IF_ERROR(cuda::BiasActivation(y32, b == nullptr ? nullptr : c.DataOf(*b),
                                                  y->size(), m, relu, c.stream()));
  }
  PSC_CUDA_RETURN_IF_ERROR(cuda::Cast(y32, 0, c.MemoryOf(*y), CastCode(t), y->size(), c.stream()));
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
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "w", &w));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "b", b));
  if (y->size() == 0) return absl::OkStatus();
  if (IsLowPrecision(y->dtype())) return Dense16(c, x, w, b, a.relu, y, n, k, m);
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
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "w", &w));
  if (dx->size() == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(c.Enter());
  if (const DType t = dx->dtype(); IsLowPrecision(t)) {
    if (dy.dtype() != t) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": dy ", DTypeName(dy.dtype()), " and dx ", DTypeName(t), " differ"));
    }
    PSC_ASSIGN_OR_RETURN(const DenseScratch s, Rounded(c, w, t));
    return GemmEx(c, CUBLAS_OP_T, CUBLAS_OP_N, k, n, m, s.w16, t, m, c.MemoryOf(dy), t, m,
                  c.MemoryOf(*dx), t, k);
  }
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
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "dw", dw));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "db", db));
  if (m == 0) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(c.Enter());
  if (const DType t = dy.dtype(); IsLowPrecision(t) && n > 0) {
    if (x.dtype() != t) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": x ", DTypeName(x.dtype()), " and dy ", DTypeName(t), " differ"));
    }
    // dw [k,m] = xᵀ · dy in float32 from 16-bit operands; db = dyᵀ · ones.
    if (dw->size() > 0) {
      PSC_RETURN_IF_ERROR(GemmEx(c, CUBLAS_OP_N, CUBLAS_OP_T, m, k, n, c.MemoryOf(dy), t, m,
                                 c.MemoryOf(x), t, k, c.DataOf(*dw), DType::kFloat32, m));
    }
    if (db == nullptr) return absl::OkStatus();
    PSC_ASSIGN_OR_RETURN(void* ones, c.KernelScratch(static_cast<size_t>(n) * 2));
    PSC_CUDA_RETURN_IF_ERROR(cuda::FillOnes(ones, CastCode(t), n, c.stream()));
    return GemmEx(c, CUBLAS_OP_N, CUBLAS_OP_N, m, 1, n, c.MemoryOf(dy), t, m, ones, t, n,
                  c.DataOf(*db), DType::kFloat32, m);
  }
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
      {dense::kDense,
       3,
       1,
       DenseKernel,
       {/*inputs=*/0b100, 0},
       nullptr,
       KernelDtypes::kAny,
       TakesDense16},
      {dense::kDenseBackwardData,
       2,
       1,
       DenseBackwardDataKernel,
       {},
       nullptr,
       KernelDtypes::kAny,
       TakesDense16},
      {dense::kDenseBackwardWeights,
       2,
       2,
       DenseBackwardWeightsKernel,
       {0, /*outputs=*/0b10},
       nullptr,
       KernelDtypes::kAny,
       TakesDenseBackwardWeights16},
  };
  return RegisterKernels<CudaKernelContext>(context, kKernels, registry);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
