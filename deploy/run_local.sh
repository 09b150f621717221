#!/usr/bin/env bash
# The main job on one machine, as root on Debian 12: installs the
# dependencies, builds, and starts a local cluster (1 ps, 2 workers, the
# chief) with `pscluster launch`.
#
# Usage: bash deploy/run_local.sh [--ps=N] [--workers=N] [-- chief flags...]
# Env:   BUILD_DIR (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
bash deploy/install_deps.sh
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$(nproc)" --target ps_server worker chief pscluster

launch_flags=()
while [[ $# -gt 0 && "$1" != "--" ]]; do launch_flags+=("$1"); shift; done
[[ "${1:-}" == "--" ]] && shift
exec "$BUILD_DIR/bin/pscluster" launch "${launch_flags[@]}" -- "$@"
