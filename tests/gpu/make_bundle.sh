#!/usr/bin/env bash
# Builds the GPU binaries here (sm_90, for the H200 machine) and packs them,
# with every shared library they load that is neither CUDA's nor glibc's,
# into one compressed archive the device tool can carry:
#   .gpu_bundle/pscluster-gpu.tar.xz   (git-ignored; carry ".gpu_bundle")
# On the GPU machine: bash tests/gpu/run_on_device.sh
#
# Env: BUILD_DIR (default: build-gpu)
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD_DIR=${BUILD_DIR:-build-gpu}
OUT_DIR=.gpu_bundle
# The binaries the device run needs: GPU tests, the daemons and the launcher.
TARGETS=(gpu_info_test ps_server worker chief pscluster)

command -v /usr/local/cuda/bin/nvcc >/dev/null || { echo "make_bundle.sh: no nvcc in /usr/local/cuda" >&2; exit 1; }
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPSC_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${TARGETS[@]}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/pscluster/bin" "$stage/pscluster/lib"
for t in "${TARGETS[@]}"; do
  cp "$BUILD_DIR/bin/$t" "$stage/pscluster/bin/"
done
# Libraries: everything ldd resolves, except the loader, glibc and CUDA's own
# (the device machine brings its driver, CUDA runtime, cuBLAS and cuDNN).
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libcuda\.so|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc|libnvJitLink)'
for t in "${TARGETS[@]}"; do
  ldd "$BUILD_DIR/bin/$t" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $skip ]]; then continue; fi
  cp -L "$path" "$stage/pscluster/lib/$name"
done
cp tests/gpu/run_on_device.sh "$stage/pscluster/"
mkdir -p "$OUT_DIR"
tar -C "$stage" -cJf "$OUT_DIR/pscluster-gpu.tar.xz" pscluster
size=$(stat -c %s "$OUT_DIR/pscluster-gpu.tar.xz")
echo "make_bundle.sh: $OUT_DIR/pscluster-gpu.tar.xz, $((size / 1024 / 1024)) MiB," \
     "$(ls "$stage/pscluster/lib" | wc -l) libraries"
if (( size > 60 * 1024 * 1024 )); then
  echo "make_bundle.sh: bundle over 60 MiB; the device tool carries 64 MiB in all" >&2
  exit 1
fi
