// CUDA, cuDNN and cuBLAS return codes as absl::Status naming the call:
//   PSC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, n, stream));
// fails with INTERNAL "cudaMemsetAsync(p, 0, n, stream): cudaErrorInvalidValue:
// invalid argument". The codes map by what the caller can do about them:
//   RESOURCE_EXHAUSTED   out of memory (device or host)
//   FAILED_PRECONDITION  no usable GPU: no driver or device, a driver too old
//                        for the runtime, a binary or cuDNN not built for this
//                        GPU, a broken cuDNN install; the message starts
//                        "no usable GPU: "
//   UNIMPLEMENTED        this shape or algorithm is not supported (another
//                        algorithm may be)
//   INTERNAL             anything else
// A failed runtime call's error is consumed (cudaGetLastError), so a later
// launch check does not report it again. Only the CUDA backend's sources
// include this (it includes the CUDA headers).
#ifndef PSC_COMMON_COMPUTE_CUDA_CUDA_STATUS_H_
#define PSC_COMMON_COMPUTE_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "absl/status/status.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace cuda {

absl::Status CudaStatus(cudaError_t e, const char* call);
absl::Status CudnnStatus(cudnnStatus_t s, const char* call);
absl::Status CublasStatus(cublasStatus_t s, const char* call);

// The status code each library code maps to (the tables above).
absl::StatusCode CudaStatusCode(cudaError_t e);
absl::StatusCode CudnnStatusCode(cudnnStatus_t s);
absl::StatusCode CublasStatusCode(cublasStatus_t s);

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#define PSC_CUDA_RETURN_IF_ERROR(call) \
  PSC_RETURN_IF_ERROR(::psc::compute::cuda::CudaStatus((call), #call))
#define PSC_CUDNN_RETURN_IF_ERROR(call) \
  PSC_RETURN_IF_ERROR(::psc::compute::cuda::CudnnStatus((call), #call))
#define PSC_CUBLAS_RETURN_IF_ERROR(call) \
  PSC_RETURN_IF_ERROR(::psc::compute::cuda::CublasStatus((call), #call))

#endif  // PSC_COMMON_COMPUTE_CUDA_CUDA_STATUS_H_
