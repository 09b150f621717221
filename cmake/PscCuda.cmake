# Optional CUDA: PSC_CUDA=AUTO (default) builds the GPU backend when nvcc is
# found at $CUDACXX or /usr/local/cuda/bin/nvcc; ON requires it; OFF skips it.
# Sets PSC_HAVE_CUDA and, when on, PSC_CUDNN_INCLUDE_DIR / PSC_CUDNN_LIBRARY and
# PSC_NCCL_INCLUDE_DIR / PSC_NCCL_LIBRARY (NCCL, for common/collective).
set(PSC_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set_property(CACHE PSC_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${PSC_CUDA}" _psc_cuda)
if(NOT _psc_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "PSC_CUDA must be AUTO, ON or OFF, not '${PSC_CUDA}'")
endif()

set(PSC_HAVE_CUDA OFF)
if(NOT _psc_cuda STREQUAL "OFF")
  set(_nvcc "")
  if(DEFINED ENV{CUDACXX} AND EXISTS "$ENV{CUDACXX}")
    set(_nvcc "$ENV{CUDACXX}")
  elseif(CMAKE_CUDA_COMPILER AND EXISTS "${CMAKE_CUDA_COMPILER}")
    set(_nvcc "${CMAKE_CUDA_COMPILER}")
  elseif(EXISTS /usr/local/cuda/bin/nvcc)
    set(_nvcc /usr/local/cuda/bin/nvcc)
  endif()
  if(_nvcc)
    set(CMAKE_CUDA_COMPILER "${_nvcc}" CACHE FILEPATH "CUDA compiler")
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual" CACHE STRING "CUDA architectures")
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    get_filename_component(_cuda_root "${CMAKE_CUDA_COMPILER}" DIRECTORY)
    get_filename_component(_cuda_root "${_cuda_root}" DIRECTORY)
    # No FindCUDNN exists: look beside the toolkit, then in the system.
    find_path(PSC_CUDNN_INCLUDE_DIR cudnn.h
      HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_cuda_root}/include)
    find_library(PSC_CUDNN_LIBRARY cudnn
      HINTS ${CUDAToolkit_LIBRARY_DIR} ${_cuda_root}/lib64 ${_cuda_root}/lib)
    if(NOT PSC_CUDNN_INCLUDE_DIR OR NOT PSC_CUDNN_LIBRARY)
      message(FATAL_ERROR "CUDA found at ${_nvcc} but cuDNN is missing "
                          "(cudnn.h: ${PSC_CUDNN_INCLUDE_DIR}, libcudnn: ${PSC_CUDNN_LIBRARY}). "
                          "Install cuDNN 9 or configure with -DPSC_CUDA=OFF.")
    endif()
    # NCCL (the collectives between GPUs) ships beside the toolkit in the
    # CUDA images, or in the system (Debian's libnccl-dev).
    find_path(PSC_NCCL_INCLUDE_DIR nccl.h
      HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_cuda_root}/include)
    find_library(PSC_NCCL_LIBRARY nccl
      HINTS ${CUDAToolkit_LIBRARY_DIR} ${_cuda_root}/lib64 ${_cuda_root}/lib)
    if(NOT PSC_NCCL_INCLUDE_DIR OR NOT PSC_NCCL_LIBRARY)
      message(FATAL_ERROR "CUDA found at ${_nvcc} but NCCL is missing "
                          "(nccl.h: ${PSC_NCCL_INCLUDE_DIR}, libnccl: ${PSC_NCCL_LIBRARY}). "
                          "Install NCCL 2 (libnccl-dev) or configure with -DPSC_CUDA=OFF.")
    endif()
    set(PSC_HAVE_CUDA ON)
    message(STATUS "pscluster: CUDA backend ON (${_nvcc}, archs ${CMAKE_CUDA_ARCHITECTURES}, "
                   "cuDNN ${PSC_CUDNN_LIBRARY}, NCCL ${PSC_NCCL_LIBRARY})")
  elseif(_psc_cuda STREQUAL "ON")
    message(FATAL_ERROR "PSC_CUDA=ON but no nvcc: set CUDACXX or install CUDA in /usr/local/cuda")
  else()
    message(STATUS "pscluster: CUDA backend OFF (no nvcc found)")
  endif()
endif()
