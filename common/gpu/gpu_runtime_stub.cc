// gpu_runtime.h for builds without CUDA (PSC_CUDA=OFF or no nvcc).
#include "common/gpu/gpu_runtime.h"

namespace psc {
namespace gpu {
namespace runtime {

bool BuiltWithCuda() { return false; }

int DeviceCount(std::string* error) {
  *error = "pscluster was built without CUDA";
  return -1;
}

bool GetDevice(int ordinal, Device* out, std::string* error) {
  *error = "pscluster was built without CUDA";
  return false;
}

std::string Versions() { return "built without CUDA"; }

std::string SelfTest(int ordinal, double* max_abs_error) {
  *max_abs_error = 0;
  return "pscluster was built without CUDA";
}

}  // namespace runtime
}  // namespace gpu
}  // namespace psc
