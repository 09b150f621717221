#!/usr/bin/env bash
# bench/fuzz.sh: every libFuzzer target for longer than CI's 20 s (default
# 10 minutes each, two at a time), from the seed corpora plus what earlier
# runs on this machine found, the test suite's included when it ran with the
# same PSC_TEST_CACHE (kept in $PSC_TEST_CACHE/fuzz-corpus; see
# tests/fuzz/run_fuzzers.sh). Builds the ASan + UBSan +
# libFuzzer tree first if it is not there. Prints each target's executions,
# rate, corpus and findings (tests/fuzz/run_fuzzers.sh); exits 1 on a
# finding, whose input is kept under <build>/fuzz/findings/.
#
# Usage: bash bench/fuzz.sh [seconds_per_target]   (SAN_BUILD_DIR, default build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SAN_BUILD_DIR:-build-asan}
seconds=${1:-600}
if ! ls "$BUILD"/bin/*_fuzz >/dev/null 2>&1; then
  cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPSC_CUDA=OFF -DPSC_SANITIZE=address,undefined -DPSC_FUZZ=ON
  cmake --build "$BUILD" -j "$(nproc)"
fi
export ASAN_OPTIONS=detect_leaks=1
export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
exec bash tests/fuzz/run_fuzzers.sh "$BUILD" "$seconds" "$(nproc)"
