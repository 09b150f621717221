#!/usr/bin/env bash
# Runs every libFuzzer target of a -DPSC_FUZZ=ON build for a while and prints
# what each did: executions, executions per second, corpus size, findings.
# Exits 1 if any target found a crash, a leak, a timeout or an allocation
# over the limit (its input is kept under <build>/fuzz/findings/; copy it to
# tests/fuzz/corpus/<target>/ as a regression input once fixed).
#
# Each target's corpus (what it found that reaches new code) is kept between
# runs in PSC_FUZZ_CORPUS (default $PSC_TEST_CACHE/fuzz-corpus, beside the
# tests' virtual environments; ~/.cache/pscluster-tests without it), so short
# runs build on the ones before instead of starting from the seeds again. A
# kept corpus past MERGE_ABOVE files (default 4000) is first cut down to the
# inputs that keep its coverage (libFuzzer's -merge=1), so its replay at the
# start of each run stays short.
#
# Usage: tests/fuzz/run_fuzzers.sh <build_dir> [seconds_per_target] [parallel]
#   CI runs 20 s each (tests/sanitizers/run_sanitizers.sh); bench/fuzz.sh longer.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: run_fuzzers.sh <build_dir> [seconds] [parallel]}
SECONDS_EACH=${2:-20}
PARALLEL=${3:-$(nproc)}
shopt -s nullglob
targets=("$BUILD"/bin/*_fuzz)
if [[ ${#targets[@]} -eq 0 ]]; then
  echo "run_fuzzers.sh: no *_fuzz binaries in $BUILD/bin (configure with -DPSC_FUZZ=ON)" >&2
  exit 2
fi
out="$BUILD/fuzz"
kept=${PSC_FUZZ_CORPUS:-${PSC_TEST_CACHE:-$HOME/.cache/pscluster-tests}/fuzz-corpus}
mkdir -p "$out/findings" "$kept"
# The seeds make_fuzz_seeds makes but the repository does not keep (the
# bombs): read as a third corpus.
rm -rf "$out/seeds"
if [[ -x "$BUILD/bin/make_fuzz_seeds" ]]; then
  "$BUILD/bin/make_fuzz_seeds" "$out/seeds" >/dev/null || { echo "run_fuzzers.sh: make_fuzz_seeds failed" >&2; exit 1; }
fi

MERGE_ABOVE=${MERGE_ABOVE:-4000}
# One allocation over 64 MiB is a finding: no input here (at most 64 KiB)
# may make a reader reserve that much.
limits=(-max_len=65536 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=64)

run_one() {
  local bin=$1 name
  name=$(basename "$bin")
  local corpus="$kept/$name" log="$out/$name.log"
  mkdir -p "$corpus"
  if (($(find "$corpus" -type f | wc -l) > MERGE_ABOVE)); then
    rm -rf "$corpus.merging" && mkdir -p "$corpus.merging"
    if "$bin" -merge=1 "${limits[@]}" "$corpus.merging" "$corpus" >"$out/$name.merge.log" 2>&1; then
      rm -rf "$corpus" && mv "$corpus.merging" "$corpus"
    else
      rm -rf "$corpus.merging"  # kept whole; the run below reports what failed
    fi
  fi
  local seeds=()
  [[ -d "$out/seeds/$name" ]] && seeds=("$out/seeds/$name")
  "$bin" -max_total_time="$SECONDS_EACH" "${limits[@]}" \
    -print_final_stats=1 -artifact_prefix="$out/findings/$name-" \
    "$corpus" "tests/fuzz/corpus/$name" ${seeds[@]+"${seeds[@]}"} >"$log" 2>&1
  echo $? >"$out/$name.rc"
}

running=0
for bin in "${targets[@]}"; do
  run_one "$bin" &
  running=$((running + 1))
  if [[ $running -ge $PARALLEL ]]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=0
printf '%-26s %12s %10s %8s %s\n' target executions exec/s corpus result
for bin in "${targets[@]}"; do
  name=$(basename "$bin")
  log="$out/$name.log"
  rc=$(cat "$out/$name.rc")
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  corpus=$(find "$kept/$name" -type f | wc -l)
  result="no findings"
  if [[ $rc -ne 0 ]]; then
    result="FINDING (exit $rc): $(ls "$out"/findings/"$name"-* 2>/dev/null | head -1)"
    failed=1
  fi
  printf '%-26s %12s %10s %8s %s\n' "$name" "${execs:-?}" "${rate:-?}" "$corpus" "$result"
done
if [[ $failed -ne 0 ]]; then
  for bin in "${targets[@]}"; do
    name=$(basename "$bin")
    if [[ $(cat "$out/$name.rc") -ne 0 ]]; then
      echo "---- $name (last 40 lines of $out/$name.log)"
      tail -40 "$out/$name.log"
    fi
  done
fi
exit $failed
