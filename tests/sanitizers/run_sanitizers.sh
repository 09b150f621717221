#!/usr/bin/env bash
# The sanitizer stage of the test suite; tests/run_all.sh runs it after the
# main build's tests (set PSC_SANITIZERS=0 to skip it locally).
#
#  1. An ASan + UBSan build with clang of what steps 2-3 run: the test
#     binaries of the unit and integration labels, the daemons they start
#     and the libFuzzer targets (PSC_SANITIZE=address,undefined,
#     PSC_FUZZ=ON; no CUDA: nvcc is not a clang, and the GPU tests skip here
#     anyway). The fault, deploy and GPU tests and the benchmarks run in the
#     main stage only.
#  2. Its unit and integration tests but a few long numeric runs (named
#     below): the daemons the integration tests start are the sanitized ones. Every UBSan report is fatal, leaks are
#     reported (LeakSanitizer), so a finding fails its test.
#  3. Every fuzz target for FUZZ_SECONDS (default 20) each, from the corpus
#     the runs before kept (tests/fuzz/run_fuzzers.sh); a finding fails the
#     stage.
#  4. TSan on the transport-free cores' unit tests (run_tsan.sh).
#
# Debian's gRPC, protobuf, Abseil and oneDNN are not instrumented: ASan and
# UBSan check our code and what it hands them.
#
# Env: SAN_BUILD_DIR (default build-asan), TSAN_BUILD_DIR (build-tsan),
#      JOBS (nproc), FUZZ_SECONDS (20).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${SAN_BUILD_DIR:-build-asan}
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
start=$(date +%s)

# -O1 with line tables only (what clang's ASan documentation suggests): the
# build is the stage's largest part, and reports keep file:line stacks. A
# test's own code compiles at -O0 (cmake/PscTestPch.cmake).
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DPSC_CUDA=OFF -DPSC_SANITIZE=address,undefined -DPSC_FUZZ=ON
# Only what this stage runs: the test binaries of its labels
# (psc_sanitizer_tests, cmake/PscHelpers.cmake; the tests depend on the
# daemons they start) and the fuzzers; not the fault, deploy and GPU tests
# or the benchmarks and their test (bench_test), which run in the main stage
# only.
mapfile -t fuzzers < <(cmake --build "$BUILD" --target help | sed -n 's/^\.\.\. \([a-z_]*_fuzz\)$/\1/p')
targets=(psc_sanitizer_tests ps_server worker chief evaluator pscluster make_fuzz_seeds
         "${fuzzers[@]}")
if ((${#fuzzers[@]} == 0)); then
  echo "run_sanitizers.sh: no fuzz targets in $BUILD (PSC_FUZZ=ON expected)" >&2
  exit 1
fi
echo "run_sanitizers.sh: building ${targets[*]}"
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}"
built=$(date +%s)

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
# Not under ASan: the GPU tests (they skip), the benchmarks' test, and the
# long numeric runs and one RSS bound, which take half of this stage's time for code that
# shorter tests here run too (they all run in the main stage):
#   OpDefTest.GradientReferencesMatchCentralDifferences (163 s here; every
#     op's gradient also in OpDefTest's other tests and the conformance test),
#   the low-precision conformance sweep (2 x 25 s; RegisteredKernelsMatch-
#     TheirReferences runs each kernel),
#   ClusterSemanticsTest.SyncWithTwoWorkersMatchesStandalone,
#   PushesInPartsTrainBitForBitAsWholePushes (82, 49 s; TrainingTest's
#     end-to-end sync, async and parts tests),
#   CollectiveSemanticsTest.OneStepMatchesTheParameterServerSyncStep (45 s;
#     OneEpochReachesThePsSyncAccuracy),
#   StandaloneTrainerTest.TheLossFallsAndValidationBeatsChance (45 s; the
#     trainer's other tests),
#   NumpyDataTest.AWorkerOnATwoGigabyteNpzStays... (29 s; an RSS bound that
#     ASan's shadow memory and quarantine do not keep anyway).
long_numeric='OpDefTest.GradientReferencesMatchCentralDifferences|InLowPrecision'
long_numeric+='|SyncWithTwoWorkersMatchesStandalone|PushesInPartsTrainBitForBitAsWholePushes'
long_numeric+='|OneStepMatchesTheParameterServerSyncStep'
long_numeric+='|TheLossFallsAndValidationBeatsChance|AWorkerOnATwoGigabyteNpz'
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS" -L 'unit|integration' \
  -E "Cuda|BenchTest|$long_numeric")
tested=$(date +%s)

bash tests/fuzz/run_fuzzers.sh "$BUILD" "$FUZZ_SECONDS" "$JOBS"
fuzzed=$(date +%s)

TSAN_BUILD_DIR=${TSAN_BUILD_DIR:-build-tsan} bash tests/sanitizers/run_tsan.sh
done_at=$(date +%s)
echo "sanitizers: ASan+UBSan build $((built - start)) s, tests $((tested - built)) s," \
  "fuzzing $((fuzzed - tested)) s, TSan $((done_at - fuzzed)) s"
