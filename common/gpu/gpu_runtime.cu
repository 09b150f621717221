// CUDA side of gpu_runtime.h. Every CUDA, cuBLAS and cuDNN return code is
// checked and reported with the name of the call that failed.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "common/gpu/gpu_runtime.h"

namespace psc {
namespace gpu {
namespace runtime {
namespace {

#define PSC_CUDA_OR_RETURN(call)                                                    \
  do {                                                                              \
    cudaError_t e_ = (call);                                                        \
    if (e_ != cudaSuccess) return std::string(#call ": ") + cudaGetErrorString(e_); \
  } while (0)

#define PSC_CUBLAS_OR_RETURN(call)                                                               \
  do {                                                                                           \
    cublasStatus_t s_ = (call);                                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) return std::string(#call ": ") + cublasGetStatusString(s_); \
  } while (0)

#define PSC_CUDNN_OR_RETURN(call)                                                             \
  do {                                                                                        \
    cudnnStatus_t s_ = (call);                                                                \
    if (s_ != CUDNN_STATUS_SUCCESS) return std::string(#call ": ") + cudnnGetErrorString(s_); \
  } while (0)

__global__ void Saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Device memory owned for the length of a scope.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  cudaError_t Allocate(size_t bytes) { return cudaMalloc(&ptr_, bytes); }
  float* get() const { return static_cast<float*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

struct CublasHandle {
  cublasHandle_t h = nullptr;
  ~CublasHandle() {
    if (h != nullptr) cublasDestroy(h);
  }
};
struct CudnnHandle {
  cudnnHandle_t h = nullptr;
  ~CudnnHandle() {
    if (h != nullptr) cudnnDestroy(h);
  }
};
struct CudnnTensor {
  cudnnTensorDescriptor_t d = nullptr;
  ~CudnnTensor() {
    if (d != nullptr) cudnnDestroyTensorDescriptor(d);
  }
};
struct CudnnActivation {
  cudnnActivationDescriptor_t d = nullptr;
  ~CudnnActivation() {
    if (d != nullptr) cudnnDestroyActivationDescriptor(d);
  }
};

std::string RunSelfTest(int ordinal, double* max_abs_error) {
  constexpr int n = 4096;
  constexpr float a = 0.5f;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>((i % 37) - 18) / 7.0f;
    y[i] = static_cast<float>((i % 11) - 5) / 3.0f;
  }
  PSC_CUDA_OR_RETURN(cudaSetDevice(ordinal));
  DeviceBuffer dx, dy, dz;
  PSC_CUDA_OR_RETURN(dx.Allocate(n * sizeof(float)));
  PSC_CUDA_OR_RETURN(dy.Allocate(n * sizeof(float)));
  PSC_CUDA_OR_RETURN(dz.Allocate(n * sizeof(float)));
  PSC_CUDA_OR_RETURN(cudaMemcpy(dx.get(), x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  PSC_CUDA_OR_RETURN(cudaMemcpy(dy.get(), y.data(), n * sizeof(float), cudaMemcpyHostToDevice));

  Saxpy<<<(n + 255) / 256, 256>>>(n, a, dx.get(), dy.get());
  PSC_CUDA_OR_RETURN(cudaGetLastError());

  CublasHandle cublas;
  PSC_CUBLAS_OR_RETURN(cublasCreate(&cublas.h));
  float dot = 0;
  PSC_CUBLAS_OR_RETURN(cublasSdot(cublas.h, n, dx.get(), 1, dy.get(), 1, &dot));

  CudnnHandle cudnn;
  PSC_CUDNN_OR_RETURN(cudnnCreate(&cudnn.h));
  CudnnTensor desc;
  PSC_CUDNN_OR_RETURN(cudnnCreateTensorDescriptor(&desc.d));
  PSC_CUDNN_OR_RETURN(
      cudnnSetTensor4dDescriptor(desc.d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, n));
  CudnnActivation relu;
  PSC_CUDNN_OR_RETURN(cudnnCreateActivationDescriptor(&relu.d));
  PSC_CUDNN_OR_RETURN(
      cudnnSetActivationDescriptor(relu.d, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  const float one = 1.0f, zero = 0.0f;
  PSC_CUDNN_OR_RETURN(
      cudnnActivationForward(cudnn.h, relu.d, &one, desc.d, dy.get(), &zero, desc.d, dz.get()));

  std::vector<float> gy(n), gz(n);
  PSC_CUDA_OR_RETURN(cudaMemcpy(gy.data(), dy.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  PSC_CUDA_OR_RETURN(cudaMemcpy(gz.data(), dz.get(), n * sizeof(float), cudaMemcpyDeviceToHost));

  double worst = 0, ref_dot = 0;
  for (int i = 0; i < n; ++i) {
    const double ref_y = static_cast<double>(a) * x[i] + y[i];
    ref_dot += static_cast<double>(x[i]) * ref_y;
    worst = std::fmax(worst, std::fabs(gy[i] - ref_y));
    worst = std::fmax(worst, std::fabs(gz[i] - std::fmax(ref_y, 0.0)));
  }
  const double dot_error = std::fabs(dot - ref_dot) / std::fmax(1.0, std::fabs(ref_dot));
  worst = std::fmax(worst, dot_error);
  *max_abs_error = worst;
  if (worst > 1e-4) return "GPU results differ from the host reference by " + std::to_string(worst);
  return "";
}

}  // namespace

int DeviceCount(std::string* error) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *error =
        std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return -1;
  }
  return count;
}

bool GetDevice(int ordinal, Device* out, std::string* error) {
  cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties(&prop, ordinal);
  if (e != cudaSuccess) {
    *error = std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e);
    return false;
  }
  out->ordinal = ordinal;
  out->name = prop.name;
  out->cc_major = prop.major;
  out->cc_minor = prop.minor;
  out->total_memory = static_cast<long long>(prop.totalGlobalMem);
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaSetDevice(ordinal) == cudaSuccess &&
      cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    out->free_memory = static_cast<long long>(free_bytes);
  }
  return true;
}

// The path of the first mapped file whose name contains `name` (as
// /proc/self/maps lists what the loader mapped), or "not loaded".
std::string LoadedFile(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash != std::string::npos && line.find(name, slash) != std::string::npos) {
      return line.substr(slash);
    }
  }
  return "not loaded";
}

std::string Versions() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::string s = "CUDA runtime " + std::to_string(runtime / 1000) + "." +
                  std::to_string((runtime % 1000) / 10) + " (" + LoadedFile("libcudart.so") + ")";
  s += ", driver " +
       (driver == 0 ? std::string("none")
                    : std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10));
  // cuDNN 9 numbers its versions major * 10000 + minor * 100 + patch.
  const size_t cudnn = cudnnGetVersion();
  s += ", cuDNN " + std::to_string(cudnn / 10000) + "." + std::to_string((cudnn % 10000) / 100) +
       "." + std::to_string(cudnn % 100) + " (" + LoadedFile("libcudnn.so") + ")";
  int cublas_version = 0;
  if (cublasGetProperty(MAJOR_VERSION, &cublas_version) == CUBLAS_STATUS_SUCCESS) {
    int minor = 0;
    cublasGetProperty(MINOR_VERSION, &minor);
    s += ", cuBLAS " + std::to_string(cublas_version) + "." + std::to_string(minor) + " (" +
         LoadedFile("libcublas.so") + ")";
  }
  (void)cudaGetLastError();  // a failed query (no driver) is not a later call's error
  return s;
}

std::string SelfTest(int ordinal, double* max_abs_error) {
  *max_abs_error = 0;
  return RunSelfTest(ordinal, max_abs_error);
}

}  // namespace runtime
}  // namespace gpu
}  // namespace psc
