// CUDA, cuDNN and cuBLAS return codes as absl::Status naming the call:
//   PSC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, n, stream));
// fails with INTERNAL "cudaMemsetAsync(p, 0, n, stream): cudaErrorInvalidValue:
// invalid argument". Out-of-memory codes become RESOURCE_EXHAUSTED and
// cuDNN's NOT_SUPPORTED becomes UNIMPLEMENTED. Only the CUDA backend's
// sources include this (it includes the CUDA headers).
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
