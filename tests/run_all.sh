#!/usr/bin/env bash
# The whole test suite from a clean clone on Debian 12, as root:
# installs the dependencies, builds (GPU backend too when nvcc is found), and
# runs every ctest label: unit, integration, fault, gpu (skips without a
# GPU) and deploy; then the sanitizer stage (ASan+UBSan build and tests,
# fuzzing, TSan; tests/sanitizers/run_sanitizers.sh). CI (.ci/run) calls
# exactly this.
#
# Usage: bash tests/run_all.sh [ctest args...]   e.g.  -L unit
# Env:   BUILD_DIR (default: build), JOBS (default: nproc),
#        PSC_SANITIZERS=0 skips the sanitizer stage (local use; CI runs it),
#        CCACHE_DIR (the compiler cache; default ~/.cache/ccache; also
#        CCACHE_MAXSIZE, CCACHE_SLOPPINESS, CCACHE_DEPEND, set below unless
#        given), PSC_TEST_CACHE (the tests' cached virtual environments,
#        made during the build when no ctest arguments are given)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

# Each stage's wall time, printed at the end (and on failure).
start=$(date +%s)
stages=()
stage() { stages+=("$1 $(($(date +%s) - start)) s"); start=$(date +%s); }
venv_pid=""
venv_log=""
# A failed build leaves no download running (the venvs' process group: the
# script runs without job control, so setsid below does not fork).
on_exit() {
  if [[ -n $venv_pid ]]; then kill -- "-$venv_pid" 2>/dev/null || true; fi
  if [[ -n $venv_log ]]; then rm -f "$venv_log"; fi
  echo "run_all.sh: ${stages[*]:-}"
}
trap on_exit EXIT

bash deploy/install_deps.sh
stage "dependencies"
# The compiler cache (ccache, which the build uses when it is installed):
# outside the clone, in CCACHE_DIR (ccache's default ~/.cache/ccache), large
# enough for the main build (nvcc included), the ASan and the TSan builds.
# It serves a fresh clone at the same place as the last run's (CI's): the
# unity batches CMake writes name their sources by absolute path (and a
# CCACHE_BASEDIR would turn __FILE__, which the flags' --help shows,
# into ../../ paths), so a clone elsewhere compiles again.
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-12G}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
# pch_defines,time_macros: what ccache needs to cache the compiles that use
# the tests' precompiled header (cmake/PscTestPch.cmake).
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-include_file_mtime,include_file_ctime,pch_defines,time_macros}
# Depend mode: a miss hashes the compiler's own -MD list of headers instead
# of running the preprocessor first (one cold batch: 11.1 s -> 9.5 s).
export CCACHE_DEPEND=${CCACHE_DEPEND:-1}
# The checks' Python environments (Keras, TensorFlow, TensorBoard, the
# Prometheus parser; about 1 GB from PyPI on a machine that has none) are
# made while the build compiles, when the whole suite runs (no ctest
# arguments): downloading overlaps compiling instead of holding a test slot.
# A check that finds one missing makes it itself.
if (($# == 0)); then
  venv_log=$(mktemp /tmp/run_all_venvs.XXXXXX)
  setsid bash tests/interop/make_venvs.sh >"$venv_log" 2>&1 &
  venv_pid=$!
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$JOBS"
stage "| build"
if [[ -n $venv_pid ]]; then
  if ! wait "$venv_pid"; then
    echo "run_all.sh: making the checks' Python environments failed (their checks try again):" >&2
  fi
  venv_pid=""
  cat "$venv_log"
  stage "| venvs"
fi
# ctest prints its closing summary ("100% tests passed, 0 tests failed out of N")
# and the time per label.
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS" "$@")
stage "| ctest"
# The sanitizer stage: ASan+UBSan build and tests, fuzzing, TSan on the
# cores (tests/sanitizers/run_sanitizers.sh). PSC_SANITIZERS=0 skips it.
if [[ "${PSC_SANITIZERS:-1}" != 0 ]]; then
  bash tests/sanitizers/run_sanitizers.sh
  stage "| sanitizers"
fi
