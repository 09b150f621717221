#!/usr/bin/env bash
# The main job on one machine, as root on Debian 12: installs the
# dependencies, builds, and trains the reference job (seed_cnn on
# Fashion-MNIST, DESIGN.md) on a local cluster of 1 ps, 2 workers and the
# chief, in sync mode, for 2 epochs; the result file is result.json.
#
# Usage: bash deploy/run_local.sh [launch flags] [-- chief flags]
#   e.g. bash deploy/run_local.sh --workers=2 --ps=2 -- --mode=async --epochs=5
# Only the chief flags given here are passed, plus --epochs=2 and
# --metrics_out=result.json when they are not given: a model file's
# compiled optimizer and learning rate run unless a flag is given.
# Env: BUILD_DIR (default: build); PSC_SKIP_BUILD=1 runs the binaries in
# BUILD_DIR as they are (no install, no build).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
if [[ "${PSC_SKIP_BUILD:-0}" != 1 ]]; then
  bash deploy/install_deps.sh
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target ps_server worker chief evaluator pscluster
fi

launch_flags=()
while [[ $# -gt 0 && "$1" != "--" ]]; do launch_flags+=("$1"); shift; done
[[ "${1:-}" == "--" ]] && shift
chief_flags=("$@")
given() {  # whether the caller gave the chief flag --$1
  local a
  for a in "${chief_flags[@]}"; do [[ "$a" == "--$1" || "$a" == "--$1="* ]] && return 0; done
  return 1
}
given epochs || chief_flags+=(--epochs=2)
given metrics_out || chief_flags+=(--metrics_out=result.json)
# The launcher shares this machine's cores among the workers
# (--intra_op_threads=cores/workers) unless a chief flag sets it.
exec "$BUILD_DIR/bin/pscluster" launch --ps=1 --workers=2 "${launch_flags[@]}" -- \
  "${chief_flags[@]}"
