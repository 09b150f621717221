#!/usr/bin/env bash
# The seed CNN built in (--model=seed_cnn) against the same network loaded
# from a .keras file that Keras saved (--model=FILE.keras), in the same run:
# worker --standalone on Fashion-MNIST, ROUNDS alternating runs of STEPS
# steps each; prints one JSON object: the CPU, each run's examples/s, the
# medians and their ratio (goal: the file's at least 0.97x the built-in's).
# Progress goes to stderr.
# Usage: bench/keras_model_speed.sh [BIN_DIR] [ROUNDS] [STEPS]
# Uses the interop test's Keras venv to save the file when it exists
# (tests/interop/keras_interop_test.sh creates it); else pscluster writes it.
set -euo pipefail
bin=${1:-build/bin}
rounds=${2:-3}
steps=${3:-60}
venv=${PSC_TEST_CACHE:-$HOME/.cache/pscluster-tests}/keras-jax-3.15
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
file=$work/seed_cnn.keras
if KERAS_BACKEND=jax "$venv/bin/python3" -c 'import keras' 2>/dev/null; then
  KERAS_BACKEND=jax JAX_PLATFORMS=cpu "$venv/bin/python3" - "$file" <<'PY'
import sys
import keras
from keras import layers
m = keras.Sequential([keras.Input((28, 28, 1))])
for i, f in enumerate([32, 32, 64, 64, 128, 128]):
    m.add(layers.Conv2D(f, 3, padding="same", activation="relu"))
    if i % 2 == 1:
        m.add(layers.MaxPooling2D())
m.add(layers.Flatten())
m.add(layers.Dense(128, activation="relu"))
m.add(layers.Dense(10))
m.save(sys.argv[1])
PY
  source="saved by Keras"
else
  "$bin/worker" --standalone --epochs=1 --steps_per_epoch=1 --max_train_examples=128 \
      --export="$file" > /dev/null
  source="written by pscluster (no Keras venv)"
fi
run() {  # $1 = --model value; prints examples/s
  "$bin/worker" --standalone --model="$1" --epochs=1 --steps_per_epoch="$steps" \
      --metrics_out="$work/r.json" > /dev/null 2>&1
  python3 -c "import json; print(round(json.load(open('$work/r.json'))['examples_per_sec'], 1))"
}
a=() b=()
for ((i = 1; i <= rounds; i++)); do
  a+=("$(run seed_cnn)")
  b+=("$(run "$file")")
  echo "round $i: built-in ${a[-1]} examples/s, .keras ${b[-1]} examples/s" >&2
done
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
model=$(lscpu | sed -n 's/^Model: *//p' | head -1)
python3 - "${a[*]}" "${b[*]}" "$cpu" "$model" "$steps" "$source" <<'PY'
import json, statistics, sys
a = [float(v) for v in sys.argv[1].split()]
b = [float(v) for v in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(json.dumps({
    "bench": "keras_model_speed",
    "cpu": f"{sys.argv[3]} (model {sys.argv[4]})",
    "steps_per_run": int(sys.argv[5]),
    "keras_file": sys.argv[6],
    "builtin_examples_per_sec": a,
    "keras_examples_per_sec": b,
    "builtin_median": ma,
    "keras_median": mb,
    "ratio": round(mb / ma, 4),
    "goal": 0.97,
    "meets_goal": mb / ma >= 0.97,
}))
PY
