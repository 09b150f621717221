// The CUDA, cuDNN and cuBLAS status tables (cuda_status.h). Runs without a
// GPU (label unit): the mapping and the messages need only the libraries.
#include "common/compute/cuda/cuda_status.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Code = absl::StatusCode;

TEST(CudaStatusTest, RuntimeCodes) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "cudaFree(p)").ok());
  EXPECT_EQ(CudaStatusCode(cudaErrorMemoryAllocation), Code::kResourceExhausted);
  for (cudaError_t e : {cudaErrorNoDevice, cudaErrorInvalidDevice, cudaErrorInsufficientDriver,
                        cudaErrorCallRequiresNewerDriver, cudaErrorNoKernelImageForDevice,
                        cudaErrorUnsupportedPtxVersion, cudaErrorSystemDriverMismatch,
                        cudaErrorCompatNotSupportedOnDevice, cudaErrorStubLibrary}) {
    EXPECT_EQ(CudaStatusCode(e), Code::kFailedPrecondition) << cudaGetErrorName(e);
  }
  EXPECT_EQ(CudaStatusCode(cudaErrorInvalidValue), Code::kInternal);
  EXPECT_EQ(CudaStatusCode(cudaErrorIllegalAddress), Code::kInternal);
  const absl::Status s = CudaStatus(cudaErrorInsufficientDriver, "cudaGetDeviceCount(&n)");
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), StartsWith("no usable GPU: cudaGetDeviceCount(&n): "
                                                   "cudaErrorInsufficientDriver"));
  EXPECT_THAT(CudaStatus(cudaErrorInvalidValue, "cudaMemsetAsync(p)").message(),
              HasSubstr("cudaMemsetAsync(p): cudaErrorInvalidValue: invalid argument"));
}

TEST(CudaStatusTest, CudnnCodes) {
  EXPECT_TRUE(CudnnStatus(CUDNN_STATUS_SUCCESS, "cudnnCreate(&h)").ok());
  // "Incompatible driver / cudart / arch" mean no usable GPU, not a shape
  // that another algorithm might take.
  for (cudnnStatus_t s :
       {CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER,
        CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART, CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH,
        CUDNN_STATUS_NOT_INITIALIZED, CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH,
        CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED}) {
    EXPECT_EQ(CudnnStatusCode(s), Code::kFailedPrecondition) << static_cast<int>(s);
  }
  for (cudnnStatus_t s :
       {CUDNN_STATUS_NOT_SUPPORTED, CUDNN_STATUS_NOT_SUPPORTED_SHAPE,
        CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT}) {
    EXPECT_EQ(CudnnStatusCode(s), Code::kUnimplemented) << static_cast<int>(s);
  }
  EXPECT_EQ(CudnnStatusCode(static_cast<cudnnStatus_t>(3099)), Code::kUnimplemented);  // newer
  EXPECT_EQ(CudnnStatusCode(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED),
            Code::kResourceExhausted);
  EXPECT_EQ(CudnnStatusCode(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED),
            Code::kResourceExhausted);
  EXPECT_EQ(CudnnStatusCode(CUDNN_STATUS_BAD_PARAM), Code::kInternal);
  EXPECT_EQ(CudnnStatusCode(CUDNN_STATUS_EXECUTION_FAILED), Code::kInternal);
  const absl::Status s = CudnnStatus(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH, "cudnnCreate(&h)");
  EXPECT_THAT(std::string(s.message()), StartsWith("no usable GPU: cudnnCreate(&h): "));
  EXPECT_THAT(s.message(), HasSubstr("(3007)"));
}

TEST(CudaStatusTest, CublasCodes) {
  EXPECT_TRUE(CublasStatus(CUBLAS_STATUS_SUCCESS, "cublasCreate(&h)").ok());
  EXPECT_EQ(CublasStatusCode(CUBLAS_STATUS_ALLOC_FAILED), Code::kResourceExhausted);
  EXPECT_EQ(CublasStatusCode(CUBLAS_STATUS_NOT_INITIALIZED), Code::kFailedPrecondition);
  EXPECT_EQ(CublasStatusCode(CUBLAS_STATUS_ARCH_MISMATCH), Code::kFailedPrecondition);
  EXPECT_EQ(CublasStatusCode(CUBLAS_STATUS_NOT_SUPPORTED), Code::kUnimplemented);
  EXPECT_EQ(CublasStatusCode(CUBLAS_STATUS_EXECUTION_FAILED), Code::kInternal);
  EXPECT_THAT(
      std::string(CublasStatus(CUBLAS_STATUS_NOT_INITIALIZED, "cublasCreate(&h)").message()),
      StartsWith("no usable GPU: cublasCreate(&h): "));
}

}  // namespace
}  // namespace cuda
}  // namespace compute
}  // namespace psc
