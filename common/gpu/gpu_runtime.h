// The narrow boundary between pscluster and the CUDA runtime, cuBLAS and
// cuDNN: plain C++ types only, so gpu_runtime.cu needs no Abseil headers;
// built only into the GPU plugin. Use gpu_info.h.
#ifndef PSC_COMMON_GPU_GPU_RUNTIME_H_
#define PSC_COMMON_GPU_GPU_RUNTIME_H_

#include <string>

namespace psc {
namespace gpu {
namespace runtime {

struct Device {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  long long total_memory = 0;
  long long free_memory = 0;
};

// The number of devices, or -1 with *error set when the runtime fails
// (no driver, cudaErrorInsufficientDriver, no device node...).
int DeviceCount(std::string* error);
// False with *error set on failure.
bool GetDevice(int ordinal, Device* out, std::string* error);
// Runtime, driver, cuDNN and cuBLAS versions and the files they were loaded
// from, e.g. "CUDA runtime 13.0 (/usr/local/cuda/lib64/libcudart.so.13), ...".
std::string Versions();
// Runs y = a*x + y in a kernel, a cuBLAS dot product and a cuDNN ReLU on
// `ordinal` and compares them with the same arithmetic on the host. Returns
// "" on success, else what failed; *max_abs_error gets the largest deviation.
std::string SelfTest(int ordinal, double* max_abs_error);

}  // namespace runtime
}  // namespace gpu
}  // namespace psc

#endif  // PSC_COMMON_GPU_GPU_RUNTIME_H_
