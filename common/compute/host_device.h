// PSC_HOST_DEVICE: __host__ __device__ under nvcc, nothing elsewhere, for
// the math the CPU loops and the CUDA kernels share (activation_math.h,
// embedding_math.h, cuda/cuda_kernel_math.h). No CUDA headers.
#ifndef PSC_COMMON_COMPUTE_HOST_DEVICE_H_
#define PSC_COMMON_COMPUTE_HOST_DEVICE_H_

#ifndef PSC_HOST_DEVICE
#ifdef __CUDACC__
#define PSC_HOST_DEVICE __host__ __device__
#else
#define PSC_HOST_DEVICE
#endif
#endif

#endif  // PSC_COMMON_COMPUTE_HOST_DEVICE_H_
