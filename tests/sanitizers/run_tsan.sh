#!/usr/bin/env bash
# TSan on the transport-free cores' unit tests (ps_core, chief_core,
# ps_client, data_channel, worker_core, launcher, base), where it is
# meaningful: they share memory only through our own code and absl's locks,
# which absl_mutex_tsan.cc makes visible to TSan in this build. The daemons
# and the gRPC tests are not run here: gRPC and protobuf are not
# instrumented and synchronize in ways TSan cannot see.
#
# First the control (tsan_control): a run with no race must give no report,
# and one with a race must be reported, so this stage can fail.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${TSAN_BUILD_DIR:-build-tsan}
JOBS=${JOBS:-$(nproc)}
tests=(ps_core_test chief_core_test ps_client_test data_channel_test worker_core_test
       launcher_unit_test shutdown_test backoff_test checked_size_test)
# -O1 with line tables only, as the ASan build (reports keep file:line
# stacks; the build is most of this stage's time), test code too (not -O0
# as in the ASan build: cmake/PscTestPch.cmake says why).
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DPSC_CUDA=OFF -DPSC_SANITIZE=thread >/dev/null
t0=$(date +%s)
cmake --build "$BUILD" -j "$JOBS" --target tsan_control "${tests[@]}"
echo "run_tsan.sh: built in $(($(date +%s) - t0)) s"
export TSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/tsan.supp halt_on_error=1 second_deadlock_stack=1"
export TSAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer

"$BUILD/bin/tsan_control" locked
if "$BUILD/bin/tsan_control" race >"$BUILD/tsan_control_race.log" 2>&1; then
  echo "run_tsan.sh: the control race was not reported; TSan is not working. Its output:" >&2
  cat "$BUILD/tsan_control_race.log" >&2
  exit 1
fi
if ! grep -q "WARNING: ThreadSanitizer: data race" "$BUILD/tsan_control_race.log"; then
  echo "run_tsan.sh: the control race failed without a data-race report. Its output:" >&2
  cat "$BUILD/tsan_control_race.log" >&2
  exit 1
fi
echo "run_tsan.sh: control ok (no report without a race, a report with one)"

failed=0
for t in "${tests[@]}"; do
  t0=$(date +%s)
  if "$BUILD/bin/$t" >"$BUILD/$t.tsan.log" 2>&1; then
    echo "run_tsan.sh: $t: $(grep -Eo '[0-9]+ tests? from [0-9]+ test suites? ran' "$BUILD/$t.tsan.log"), no report ($(($(date +%s) - t0)) s)"
  else
    echo "run_tsan.sh: $t FAILED (TSan report or test failure):" >&2
    grep -A30 "WARNING: ThreadSanitizer\|FAILED" "$BUILD/$t.tsan.log" | head -60 >&2
    failed=1
  fi
done
exit $failed
