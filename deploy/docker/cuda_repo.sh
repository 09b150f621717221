#!/usr/bin/env bash
# The CUDA variant of deploy/Dockerfile (build argument PSC_CUDA=ON): adds
# NVIDIA's CUDA repository for Debian 12 and, for the build stage, installs
# nvcc, cuBLAS and cuDNN. With PSC_CUDA=OFF (the default) it does nothing and
# downloads nothing.
#
# Usage: deploy/docker/cuda_repo.sh OFF|ON devel|runtime
#   devel    repository + compiler and -dev packages (CUDA_DEVEL_PACKAGES)
#   runtime  repository only: the runtime stage installs the library packages
#            that deploy/docker/runtime_packages.sh found in the build stage
# Env (from the Dockerfile's build arguments):
#   CUDA_REPO_URL        default .../compute/cuda/repos/debian12/x86_64
#   CUDA_KEYRING         default cuda-keyring_1.1-1_all.deb
#   CUDA_DEVEL_PACKAGES  default: CUDA 13.0 minimal build, cuBLAS, cuDNN 9
set -euo pipefail

mode=${1:?usage: cuda_repo.sh OFF|ON devel|runtime}
stage=${2:?usage: cuda_repo.sh OFF|ON devel|runtime}
case "$mode" in
  OFF|off|AUTO|auto) exit 0 ;;
  ON|on) ;;
  *) echo "cuda_repo.sh: PSC_CUDA must be ON or OFF, not '$mode'" >&2; exit 2 ;;
esac
case "$stage" in devel|runtime) ;; *) echo "cuda_repo.sh: unknown stage '$stage'" >&2; exit 2 ;; esac

repo=${CUDA_REPO_URL:-https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64}
keyring=${CUDA_KEYRING:-cuda-keyring_1.1-1_all.deb}
devel=${CUDA_DEVEL_PACKAGES:-cuda-minimal-build-13-0 libcublas-dev-13-0 libcudnn9-dev-cuda-13}

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends ca-certificates curl
curl -fsSL -o "/tmp/$keyring" "$repo/$keyring"
dpkg -i "/tmp/$keyring"
rm -f "/tmp/$keyring"
apt-get update -q
if [[ "$stage" == devel ]]; then
  # shellcheck disable=SC2086  # a list of package names
  apt-get install -y -q --no-install-recommends $devel
  # CMake looks for /usr/local/cuda/bin/nvcc (cmake/PscCuda.cmake).
  if [[ ! -e /usr/local/cuda/bin/nvcc ]]; then
    nvcc=$(ls -d /usr/local/cuda-*/bin/nvcc | sort -V | tail -n 1)
    ln -sfn "$(dirname "$(dirname "$nvcc")")" /usr/local/cuda
  fi
  /usr/local/cuda/bin/nvcc --version
fi
