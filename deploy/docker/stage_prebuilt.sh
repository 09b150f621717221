#!/usr/bin/env bash
# Makes the build context of deploy/Dockerfile.prebuilt from a host build:
# OUT_DIR/bin/ with ps_server, worker, chief, evaluator and pscluster
# (stripped; none links a CUDA library: the GPU backend is a plugin,
# libpsc_cuda_plugin.so, which this CPU image does not carry), OUT_DIR/runtime-packages (the Debian
# packages that own their libraries: runtime_packages.sh, on this host,
# which must be Debian 12 like the image) and the setup scripts.
#
# Usage: deploy/docker/stage_prebuilt.sh BIN_DIR OUT_DIR
# Exits 1 naming a missing binary, a binary that loads a CUDA library, or a
# library no Debian package owns.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 BIN_DIR OUT_DIR" >&2; exit 2; }
bin=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$out/bin"
for b in ps_server worker chief evaluator pscluster; do
  src=$bin/$b
  [[ -x $src ]] || { echo "stage_prebuilt.sh: no $src (build it first)" >&2; exit 1; }
  if ldd "$src" | grep -Eq 'libcuda|libcudart|libcublas|libcudnn|libnccl'; then
    echo "stage_prebuilt.sh: $src loads CUDA libraries; no binary may (the GPU backend is" \
      "the plugin libpsc_cuda_plugin.so)" >&2
    exit 1
  fi
  install -m 0755 -s "$src" "$out/bin/$b"
done
bash "$here/runtime_packages.sh" "$out"/bin/* >"$out/runtime-packages"
cp "$here/cuda_repo.sh" "$here/runtime_setup.sh" "$out/"
echo "stage_prebuilt.sh: $out: $(ls "$out/bin" | tr '\n' ' ')($(wc -l <"$out/runtime-packages") packages)"
