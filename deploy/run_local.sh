#!/usr/bin/env bash
# The main job on one machine, as root on Debian 12: installs the
# dependencies, builds, and trains the reference job (seed_cnn on
# Fashion-MNIST, DESIGN.md) on a local cluster of 1 ps, 2 workers and the
# chief, in sync mode, for 2 epochs; the result file is result.json.
#
# Usage: bash deploy/run_local.sh [launch flags] [-- chief flags]
#   e.g. bash deploy/run_local.sh --workers=2 --ps=2 -- --mode=async --epochs=5
# Chief flags given here override the defaults below (the last one wins).
# Env: BUILD_DIR (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
bash deploy/install_deps.sh
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$(nproc)" --target ps_server worker chief evaluator pscluster

launch_flags=()
while [[ $# -gt 0 && "$1" != "--" ]]; do launch_flags+=("$1"); shift; done
[[ "${1:-}" == "--" ]] && shift
# The launcher shares this machine's cores among the workers
# (--intra_op_threads=cores/workers) unless a chief flag sets it.
defaults=(--mode=sync --epochs=2 --metrics_out=result.json)
exec "$BUILD_DIR/bin/pscluster" launch --ps=1 --workers=2 "${launch_flags[@]}" -- \
  "${defaults[@]}" "$@"
