#!/usr/bin/env bash
# bench/stream_10gb.sh: issue 42's streamed run. GB gigabytes of TFRecord
# shards, one epoch over all of them on a local cluster (1 ps, 2 workers,
# sync) with a model small enough that reading bounds the step.
#
# Data: 1,000,000 Fashion-MNIST-shaped records (784 random bytes; the
# label is the first byte's tenth, so there is something to learn) in an
# .npz made with NumPy, written as 8 TFRecord shards by `pscluster data
# convert` (C++), then copied under other names until the files hold GB
# gigabytes (the copies are the same bytes: a file is read as it is, the
# page cache aside).
# Job: the built-in mlp (784 -> 128 -> 10), batch 512, --read=stream with
# the default shuffle buffer (10,000 records per slot),
# validation_split=0.001 (the chief reads that tail), one epoch.
# Measured: the job's check (`chief --check_job`, as `launch` runs it
# first: the counting pass over every file, the first 100,000 records and
# the validation tail), the launch's wall time, records/s trained, each
# worker's VmHWM (polled from /proc every 0.5 s while it runs: the peak),
# and the share of the workers' time spent waiting for batches (data_wait_s
# over it and the steps' own time). Prints one JSON object; the goal is
# every worker's VmHWM under 500 MiB.
#
# Usage: bash bench/stream_10gb.sh [--gb=10] [--dir=DIR] [--keep]
#   (BUILD_DIR, default build; TF_VENV, default ~/.cache/pscluster-bench/tf-2.21, for NumPy:
#    bench/record_read.sh makes it)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
bin=$(cd "$BUILD_DIR/bin" && pwd)
TF_VENV=${TF_VENV:-$HOME/.cache/pscluster-bench/tf-2.21}
gb=10
dir=${TMPDIR:-/tmp}/psc-stream-bench
keep=0
for a in "$@"; do
  case "$a" in
    --gb=*) gb=${a#--gb=} ;;
    --dir=*) dir=${a#--dir=} ;;
    --keep) keep=1 ;;
    *) echo "stream_10gb: unknown argument $a" >&2; exit 2 ;;
  esac
done
[[ "$gb" =~ ^[1-9][0-9]*$ ]] || { echo "stream_10gb: --gb must be a count >= 1" >&2; exit 2; }
[[ -x "$TF_VENV/bin/python" ]] || { echo "stream_10gb: no NumPy: make $TF_VENV (bench/record_read.sh)" >&2; exit 77; }
mkdir -p "$dir"
data="$dir/data"  # the script's own: removed at the end unless --keep
launcher=
cleanup() {
  [[ -n "$launcher" ]] && kill "$launcher" 2> /dev/null || true
  ((keep)) || rm -rf "$data" "$dir/launch.log" "$dir/check.log" "$dir/result.json"
}
trap cleanup EXIT
# Kept data of another --gb is made again.
if [[ ! -f "$data/spec.json" || "$(cat "$data/gb" 2> /dev/null)" != "$gb" ]]; then
  rm -rf "$data" "$dir/src"
  mkdir -p "$dir/src"
  "$TF_VENV/bin/python" - "$dir/src/records.npz" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(42)
x = rng.integers(0, 256, size=(1_000_000, 28, 28), dtype=np.uint8)
y = (x[:, 0, 0] // 26).astype(np.uint8)
np.savez(sys.argv[1], x_train=x, y_train=y)
PY
  "$bin/pscluster" data convert "$dir/src/records.npz" "$data" --shards=8 >&2
  rm -rf "$dir/src"
  echo "$gb" > "$data/gb"
  one=$(du -cb "$data"/train-* | tail -1 | cut -f1)
  copies=$(( (gb * 1000000000 + one - 1) / one ))
  for ((c = 1; c < copies; ++c)); do
    for f in "$data"/train-*; do
      cp "$f" "$data/copy$c-$(basename "$f")"
    done
  done
fi
bytes=$(du -cb "$data"/*train-* | tail -1 | cut -f1)
files=$(ls "$data"/*train-* | wc -l)
log="$dir/launch.log"
result="$dir/result.json"
rm -f "$result" "$data/spec.json.counts"
job=("--data=tfrecord:train=$data/*train-*,spec=$data/spec.json,validation_split=0.001,read=stream"
  --model=mlp --mode=sync --epochs=1 --batch_size=512 --intra_op_threads=1 --eval_threads=1)
# The job's check, as `launch` makes it first: the counting pass (the counts
# file then serves the chief), the first 100,000 records (standardization's
# fit) and the validation tail.
t0=$(date +%s%N)
"$bin/chief" --check_job "${job[@]}" > "$dir/check.log" 2>&1 || { cat "$dir/check.log" >&2; exit 1; }
check_ns=$(($(date +%s%N) - t0))
start=$(date +%s%N)
"$bin/pscluster" launch --ps=1 --workers=2 -- "${job[@]}" --metrics_out="$result" > "$log" 2>&1 &
launcher=$!
declare -A hwm
while kill -0 "$launcher" 2> /dev/null; do
  for w in 0 1; do
    pid=$(grep -o "started worker:$w (pid [0-9]*" "$log" 2> /dev/null | grep -o '[0-9]*$' || true)
    [[ -n "$pid" && -r "/proc/$pid/status" ]] || continue
    kib=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2> /dev/null || true)
    [[ -n "$kib" ]] && hwm[$w]=$kib
  done
  sleep 0.5
done
wait "$launcher" || { tail -30 "$log" >&2; echo "stream_10gb: the job failed (log: $log)" >&2; exit 1; }
wall_ns=$(($(date +%s%N) - start))
launcher=
cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
"$TF_VENV/bin/python" - "$result" "$wall_ns" "$bytes" "$files" "${hwm[0]:-0}" "${hwm[1]:-0}" "$cpu" "$check_ns" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
wall, nbytes, files = int(sys.argv[2]) / 1e9, int(sys.argv[3]), int(sys.argv[4])
hwm = [int(sys.argv[5]) / 1024, int(sys.argv[6]) / 1024]
records = r["steps"] * 512
workers = r["workers"]
step_s = [w["step_s"] * w["steps"] for w in workers]  # the steps themselves, the wait not in
wait = [w["data_wait_s"] for w in workers]
out = {
    "cpu": sys.argv[7],
    "bytes": nbytes, "files": files,
    "train_records": r["data"]["train_examples"], "records_trained": records,
    "wall_s": round(wall, 1), "train_s": r["train_s"],
    "records_per_s": round(records / r["train_s"]),
    "check_s": round(int(sys.argv[8]) / 1e9, 1), "chief_read_s": round(r["data"]["read_seconds"], 2),
    "worker_vmhwm_mib": [round(h, 1) for h in hwm],
    "data_wait_s": [round(w, 1) for w in wait],
    "data_wait_fraction": [round(w / max(w + u, 1e-9), 3) for w, u in zip(wait, step_s)],
    "goal_vmhwm_under_500mib": all(0 < h < 500 for h in hwm),
    "test_accuracy": r.get("test_accuracy"),
}
print(json.dumps(out))
PY
