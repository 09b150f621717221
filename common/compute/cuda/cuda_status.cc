#include "common/compute/cuda/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

absl::Status Make(absl::StatusCode code, const std::string& message) {
  if (code == absl::StatusCode::kFailedPrecondition) {
    return absl::Status(code, absl::StrCat("no usable GPU: ", message));
  }
  return absl::Status(code, message);
}

}  // namespace

absl::StatusCode CudaStatusCode(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return absl::StatusCode::kOk;
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady:
    case cudaErrorStubLibrary:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode CudnnStatusCode(cudnnStatus_t s) {
  // cuDNN 9 codes are a category (thousands) plus a detail; compare numbers
  // so that a newer library's details map by their category.
  const int code = static_cast<int>(s);
  switch (code) {
    case 0:
      return absl::StatusCode::kOk;
    case 4003:  // INTERNAL_ERROR_HOST_ALLOCATION_FAILED
    case 4004:  // INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
      return absl::StatusCode::kResourceExhausted;
    case 1001:  // NOT_INITIALIZED: cudnnCreate without a usable device
    case 1002:  // SUBLIBRARY_VERSION_MISMATCH
    case 1008:  // SUBLIBRARY_LOADING_FAILED
    case 3005:  // NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER
    case 3006:  // NOT_SUPPORTED_INCOMPATIBLE_CUDART
    case 3007:  // NOT_SUPPORTED_ARCH_MISMATCH
      return absl::StatusCode::kFailedPrecondition;
    default:
      break;
  }
  if (code / 1000 == 3) return absl::StatusCode::kUnimplemented;  // not supported: try another
  return absl::StatusCode::kInternal;
}

absl::StatusCode CublasStatusCode(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return absl::StatusCode::kOk;
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::StatusCode::kResourceExhausted;
    case CUBLAS_STATUS_NOT_INITIALIZED:  // cublasCreate without a usable device
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return absl::StatusCode::kFailedPrecondition;
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::StatusCode::kUnimplemented;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status CudaStatus(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return absl::OkStatus();
  (void)cudaGetLastError();  // reported here: a later launch check must not see it again
  return Make(CudaStatusCode(e),
              absl::StrCat(call, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e)));
}

absl::Status CudnnStatus(cudnnStatus_t s, const char* call) {
  if (s == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return Make(CudnnStatusCode(s),
              absl::StrCat(call, ": ", cudnnGetErrorString(s), " (", static_cast<int>(s), ")"));
}

absl::Status CublasStatus(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return Make(CublasStatusCode(s), absl::StrCat(call, ": ", cublasGetStatusString(s)));
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
