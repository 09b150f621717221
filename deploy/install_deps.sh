#!/usr/bin/env bash
# Installs every Debian 12 package pscluster needs to build, test and run.
#
# Idempotent: when every package is already installed it returns at once,
# without touching the network. Otherwise it runs `apt-get update` once and
# installs what is missing. Must run as root (or through sudo).
#
# Usage: deploy/install_deps.sh [--build-only] [--with-torch] [--with-docker]
#   --build-only   only what building the daemons needs (cmake
#                  -DPSC_BUILD_TESTING=OFF): no test, benchmark, sanitizer or
#                  Python packages. deploy/Dockerfile's build stage uses it.
#   --with-torch   also installs Debian's python3-torch, the PyTorch peer that
#                  bench/compute_cpu and bench/ps_dataplane compare against.
#   --with-docker  also installs the Docker engine, docker-compose and
#                  debootstrap, for deploy/test_compose.sh.
set -euo pipefail

# What building the daemons needs.
packages=(
  build-essential cmake pkg-config git ca-certificates openssl
  lld  # the linker (CMakeLists.txt: PSC_LLD), about 4x as fast as ld.bfd here
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libssl-dev
  libdnnl-dev ocl-icd-opencl-dev  # Debian's oneDNN CMake config requires OpenCL
  nlohmann-json3-dev
  zlib1g-dev
  libisal-dev  # common/tfrecord: gzip and zlib TFRecord files inflated by ISA-L's igzip
  libminizip-dev  # common/data: .npz archives (minizip gives a stored member's offset, to map it)
  libhdf5-dev  # common/keras: model.weights.h5 in .keras archives, and .weights.h5 exports
  prometheus-cpp-dev
  libmicrohttpd-dev  # common/metrics: the /metrics HTTP endpoint
  libgloo-dev  # common/collective: multi_worker_mirrored's all-reduce (Gloo over TCP)
)
# What the tests, benchmarks and tools need besides.
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev
  ccache  # tests/run_all.sh: every compiler of the suite, nvcc included, through the cache
  dataset-fashion-mnist
  python3 python3-yaml  # tests/k8s_manifest_test reads the manifests
  python3-venv  # the interop tests' cached checker environments (Keras, TensorBoard, Prometheus)
  procps  # pgrep: tests/launcher_test looks for tasks left behind
  iproute2  # ip netns, tc: tests/netsim/testbed.sh (the multi-host test)
  python3-matplotlib  # pscluster plot (python/pscluster/plot.py) and bench/modes_study.sh
  # tests/sanitizers: clang's ASan/UBSan/TSan/libFuzzer runtimes and the
  # symbolizer for their reports.
  clang libclang-rt-14-dev llvm-14
)
build_only=0
extra=()
for arg in "$@"; do
  case "$arg" in
    --build-only) build_only=1 ;;
    --with-torch) extra+=(python3-torch) ;;
    --with-docker) extra+=(docker.io docker-compose debootstrap) ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "install_deps.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
[[ $build_only -eq 1 ]] || packages+=("${test_packages[@]}")
packages+=(${extra[@]+"${extra[@]}"})

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps.sh: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install_deps.sh: must run as root (missing: ${missing[*]})" >&2; exit 1; }
  SUDO=sudo
fi
echo "install_deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
