// Workspace sizes the CUDA backend gives its libraries, as plain C++.
#ifndef PSC_COMMON_COMPUTE_CUDA_WORKSPACE_SIZES_H_
#define PSC_COMMON_COMPUTE_CUDA_WORKSPACE_SIZES_H_

#include <cstddef>

namespace psc {
namespace compute {
namespace cuda {

// cuBLAS's workspace (cublasSetWorkspace) for a GPU of compute capability
// `cc_major`: 32 MiB on Hopper (9.x) and later, 4 MiB before, as the cuBLAS
// guide recommends; less limits which GEMM kernels cuBLAS may pick.
inline size_t CublasWorkspaceBytes(int cc_major) {
  return cc_major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CUDA_WORKSPACE_SIZES_H_
