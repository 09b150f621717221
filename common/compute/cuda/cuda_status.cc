#include "common/compute/cuda/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace compute {
namespace cuda {

absl::Status CudaStatus(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(call, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so the next call starts clean
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

absl::Status CudnnStatus(cudnnStatus_t s, const char* call) {
  if (s == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = absl::StrCat(call, ": ", cudnnGetErrorString(s));
  // cuDNN 9 codes are a category (thousands) plus a detail; compare numbers
  // so that a newer library's details map too.
  const int code = static_cast<int>(s);
  if (code == 4003 || code == 4004) return absl::ResourceExhaustedError(message);  // allocation
  if (code / 1000 == 3) return absl::UnimplementedError(message);                  // not supported
  return absl::InternalError(message);
}

absl::Status CublasStatus(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = absl::StrCat(call, ": ", cublasGetStatusString(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) return absl::UnimplementedError(message);
  return absl::InternalError(message);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
