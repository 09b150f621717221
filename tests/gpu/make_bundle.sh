#!/usr/bin/env bash
# Builds the GPU binaries here (sm_90, for the H200 machine) and packs them,
# with every shared library they load that is not CUDA's, glibc's or the C++
# runtime's (libstdc++, libgcc_s: the device host's own must serve, since
# Debian 12's need glibc 2.36), the Fashion-MNIST files and
# run_on_device.sh, into one compressed archive the device tool can carry
# (64 MiB in all):
#   .gpu_bundle/pscluster-gpu.tar.xz   (git-ignored; carry ".gpu_bundle")
# On the GPU machine: bash tests/gpu/run_on_device.sh
#
# Env: BUILD_DIR (default: build-gpu), BUILD_TYPE (default: Release; the
#      binaries are stripped either way), DATA_DIR (default:
#      /usr/share/datasets/fashion-mnist), JOBS (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD_DIR=${BUILD_DIR:-build-gpu}
BUILD_TYPE=${BUILD_TYPE:-Release}
DATA_DIR=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
JOBS=${JOBS:-$(nproc)}
OUT_DIR=.gpu_bundle
LIMIT_MIB=60  # the device tool carries 64 MiB with the working tree
# GPU tests, the GPU benchmark, the daemons and the launcher.
TESTS=(gpu_plugin_test cuda_backend_test cuda_kernel_math_test cuda_backend_rules_test cuda_status_test
       device_allocator_test nccl_collective_test mirrored_replicas_gpu_test)
TARGETS=("${TESTS[@]}" compute_gpu ps_server worker chief pscluster)
# Built with them and carried beside them in bin/: the GPU plugin the worker,
# the benchmark and the gpu tests load, and the loader test's fake plugins.
PLUGIN=libpsc_cuda_plugin.so
DATA_FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz
            t10k-labels-idx1-ubyte.gz)

command -v /usr/local/cuda/bin/nvcc >/dev/null || { echo "make_bundle.sh: no nvcc in /usr/local/cuda" >&2; exit 1; }
for f in "${DATA_FILES[@]}"; do
  [[ -f "$DATA_DIR/$f" ]] || { echo "make_bundle.sh: $DATA_DIR/$f missing" >&2; exit 1; }
done
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DPSC_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${TARGETS[@]}" psc_cuda_plugin \
  psc_fake_gpu_plugin_abi psc_fake_gpu_plugin_hash psc_fake_gpu_plugin_nogpu

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/pscluster/bin" "$stage/pscluster/lib" "$stage/pscluster/data"
for t in "${TARGETS[@]}" "$PLUGIN"; do
  cp "$BUILD_DIR/bin/$t" "$stage/pscluster/bin/"
  strip --strip-unneeded "$stage/pscluster/bin/$t"
done
cp -r "$BUILD_DIR/bin/fake_gpu_plugins" "$stage/pscluster/bin/"
# Libraries: everything ldd resolves, except the loader, glibc, the C++
# runtime and CUDA's own (the device machine brings its driver, CUDA runtime,
# cuBLAS and cuDNN, and its own libstdc++/libgcc_s). NCCL is CUDA's too: its
# libnccl.so.2 (over 200 MiB, every architecture) could never fit the
# bundle; run_on_device.sh finds the device machine's (the toolkit's, or
# PyTorch's nvidia-nccl wheel) and fails the "libraries" check without one.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc|libnvJitLink)'
for t in "${TARGETS[@]}" "$PLUGIN"; do
  ldd "$BUILD_DIR/bin/$t" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $skip ]]; then continue; fi
  cp -L "$path" "$stage/pscluster/lib/$name"
done

# The newest symbol version of `prefix` (GLIBC or GLIBCXX) that the files
# need, from their ELF version references (what the loader checks).
newest_needed() {  # prefix files...
  local prefix=$1; shift
  for f in "$@"; do
    objdump -p "$f" | awk -v p="^${prefix}_[0-9.]+$" '/^Version References/{r=1; next} r && $4 ~ p {print $4}'
  done | sort -uV | tail -1
}
version_gt() { [[ "$1" != "$2" && "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" == "$1" ]]; }
# Nothing bundled may need a newer glibc or libstdc++ than the binaries do:
# the device host must satisfy the binaries anyway, and one library that
# needs more makes nothing load there.
bins=("$stage"/pscluster/bin/*)
need_glibc=$(newest_needed GLIBC "${bins[@]}")
need_glibcxx=$(newest_needed GLIBCXX "${bins[@]}")
too_new=0
for lib in "$stage"/pscluster/lib/*; do
  for pair in "GLIBC $need_glibc" "GLIBCXX $need_glibcxx"; do
    read -r prefix limit <<<"$pair"
    got=$(newest_needed "$prefix" "$lib")
    if [[ -n "$got" ]] && version_gt "$got" "$limit"; then
      echo "make_bundle.sh: $(basename "$lib") needs $got, newer than the binaries' $limit" >&2
      too_new=1
    fi
  done
done
(( too_new == 0 )) || { echo "make_bundle.sh: the bundle would not load where the binaries do" >&2; exit 1; }
# run_on_device.sh checks the device host against these before it runs anything.
printf '%s %s\n' "$need_glibc" "$need_glibcxx" >"$stage/pscluster/needs.txt"
for f in "${DATA_FILES[@]}"; do cp "$DATA_DIR/$f" "$stage/pscluster/data/"; done
printf '%s\n' "${TESTS[@]}" >"$stage/pscluster/gpu_tests.txt"
cp tests/gpu/run_on_device.sh "$stage/pscluster/"
mkdir -p "$OUT_DIR"
XZ_OPT=-9 tar -C "$stage" -cJf "$OUT_DIR/pscluster-gpu.tar.xz" pscluster
size=$(stat -c %s "$OUT_DIR/pscluster-gpu.tar.xz")
echo "make_bundle.sh: $OUT_DIR/pscluster-gpu.tar.xz, $((size / 1024 / 1024)) MiB ($size bytes)," \
     "$(ls "$stage/pscluster/lib" | wc -l) libraries, ${#TARGETS[@]} binaries, Fashion-MNIST;" \
     "the device host needs $need_glibc and $need_glibcxx"
if (( size > LIMIT_MIB * 1024 * 1024 )); then
  echo "make_bundle.sh: bundle over $LIMIT_MIB MiB; the device tool carries 64 MiB in all" >&2
  exit 1
fi
