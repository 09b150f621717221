#!/usr/bin/env bash
# bench/fine_tune.sh: fine-tuning on a cluster. Issue 37's small ResNet
# (tests/interop/keras_models.py's resnet(): 32x32x3, three stages of two
# basic blocks, 16/32/64 filters, BatchNormalization) with its stem and
# first two stages frozen (trainable=False, as after base.trainable = False)
# under a trainable third stage and head, trained by `pscluster launch
# --ps=1 --workers=2` in sync (batch 128, SGD, one compute thread per
# worker) for two epochs of --steps steps on random data.
#
# Each build of BUILD_DIRS (space-separated; default "build") runs the job
# in turn, interleaved, --repeats rounds; a build's figures are its second
# epoch's (the first pays for primitive creation): examples/s (examples /
# that epoch's wall_s in the result file) and the workers' compute and
# communication seconds per step (the job's worker_compute_s and
# worker_comm_s over its steps). Prints one JSON object: the CPU, each
# build's runs and medians, and with several builds the last one's median
# examples/s over the first one's (speedup_last_vs_first). Keras (to save the model) comes from the
# interop tests' virtual environment (tests/interop/keras_venv.sh).
# Progress goes to stderr.
#
# Usage: BUILD_DIRS="old/build build" bash bench/fine_tune.sh [--steps=N] [--repeats=N]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIRS=${BUILD_DIRS:-build}
steps=20
repeats=3
for a in "$@"; do
  case "$a" in
    --steps=*) steps=${a#--steps=} ;;
    --repeats=*) repeats=${a#--repeats=} ;;
    *) echo "fine_tune: unknown argument $a" >&2; exit 2 ;;
  esac
done
if ! [[ $steps =~ ^[1-9][0-9]*$ && $repeats =~ ^[1-9][0-9]*$ ]]; then
  echo "fine_tune: --steps and --repeats must be positive integers" >&2
  exit 2
fi
for b in $BUILD_DIRS; do
  for bin in pscluster worker chief ps_server; do
    [[ -x $b/bin/$bin ]] || { echo "fine_tune: $b/bin/$bin is not built" >&2; exit 2; }
  done
done
out=$(mktemp -d /tmp/fine_tune.XXXXXX)
trap 'rm -rf "$out"' EXIT

# Keras 3 on JAX from the interop tests' cached virtual environment
# (created there on the first run): sets $venv.
source tests/interop/keras_venv.sh

# The model (frozen below the third stage) and the data.
"$venv/bin/python3" - "$out" "$steps" <<'PY'
import os, sys
import numpy as np
import keras
out, steps = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "interop"))
from keras_models import resnet
model, _, _ = resnet()
# Layers are in topological order: everything before the first 64-filter
# convolution is the frozen base.
third = next(i for i, l in enumerate(model.layers)
             if isinstance(l, keras.layers.Conv2D) and l.filters == 64)
for layer in model.layers[:third]:
    layer.trainable = False
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.save(os.path.join(out, "model.keras"))
rng = np.random.default_rng(0)
n = 128 * steps * 2
np.savez(os.path.join(out, "data.npz"),
         x_train=rng.normal(size=(n, 32, 32, 3)).astype(np.float32),
         y_train=rng.integers(0, 10, size=n).astype(np.int32),
         x_val=rng.normal(size=(128, 32, 32, 3)).astype(np.float32),
         y_val=rng.integers(0, 10, size=128).astype(np.int32))
frozen = sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)
print(f"fine_tune: {model.count_params()} parameters, {frozen} frozen or non-trainable",
      file=sys.stderr)
PY

run() {  # build dir -> "examples/s compute_s_per_step comm_s_per_step"
  local file="$out/result.json"
  "$1/bin/pscluster" launch --ps=1 --workers=2 -- --model="$out/model.keras" \
    --data="$out/data.npz" --nostandardize --mode=sync --batch_size=128 --epochs=2 \
    --steps_per_epoch="$steps" --optimizer=sgd --learning_rate=0.01 --intra_op_threads=1 \
    --eval_threads=1 --metrics_out="$file" > "$out/run.log" 2>&1 ||
    { tail -20 "$out/run.log" >&2; return 1; }
  python3 - "$file" "$steps" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
steps = int(sys.argv[2])
total = 2 * steps
print(round(128 * steps / r["epochs"][1]["wall_s"], 1),
      round(r["worker_compute_s"] / total, 4), round(r["worker_comm_s"] / total, 4))
PY
}

declare -A speed compute comm
for ((r = 1; r <= repeats; r++)); do
  for b in $BUILD_DIRS; do
    read -r s c m < <(run "$b")
    speed[$b]+="$s "
    compute[$b]+="$c "
    comm[$b]+="$m "
    echo "round $r, $b: $s examples/s, worker compute $c s/step, comm $m s/step" >&2
  done
done
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
args=()
for b in $BUILD_DIRS; do
  commit=$(git -C "$(dirname "$b")" rev-parse --short HEAD 2>/dev/null || echo "?")
  args+=("$b" "$commit" "${speed[$b]}" "${compute[$b]}" "${comm[$b]}")
done
python3 - "$cpu" "$steps" "$repeats" "${args[@]}" <<'PY'
import json, statistics, sys
cpu, steps, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rest = sys.argv[4:]
builds = {}
for i in range(0, len(rest), 5):
    s, c, m = ([float(v) for v in rest[i + k].split()] for k in (2, 3, 4))
    builds[rest[i]] = {"commit": rest[i + 1], "examples_per_sec": s,
                       "worker_compute_s_per_step": c, "worker_comm_s_per_step": m,
                       "median_examples_per_sec": statistics.median(s),
                       "median_compute_s_per_step": statistics.median(c),
                       "median_comm_s_per_step": statistics.median(m)}
order = [rest[i] for i in range(0, len(rest), 5)]
out = {"bench": "fine_tune", "cpu": cpu, "batch": 128, "workers": 2, "ps": 1,
       "steps_per_epoch": steps, "repeats": repeats, "builds": builds}
if len(order) > 1:  # the last build against the first, in the same run
    first, last = builds[order[0]], builds[order[-1]]
    out["speedup_last_vs_first"] = round(
        last["median_examples_per_sec"] / first["median_examples_per_sec"], 3)
print(json.dumps(out, indent=1))
PY
