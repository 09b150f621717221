#!/usr/bin/env bash
# bench/resnet_vs_keras_fit.sh: the small ResNet of issue 37 (32x32x3, three
# stages of two basic blocks of 16, 32 and 64 filters, strided 1x1
# projections, BatchNormalization: tests/interop/keras_models.py's resnet())
# trained by `worker --standalone` against Keras 3's own `fit` on the
# TensorFlow backend, in the same run, interleaved, at 1 and 2 threads.
#
# Both train the same .keras file (saved by that Keras) on the same random
# data with SGD (learning rate 0.01), batch 128, for two epochs of --steps
# steps; each side's speed is its second epoch's (the first pays for
# TensorFlow's tracing and oneDNN's primitive creation): examples / that
# epoch's training seconds (pscluster: the result file's epoch wall_s,
# training alone; Keras: a callback's clock around the epoch). Keras runs
# with intra- and inter-op threads equal to pscluster's --intra_op_threads.
# Each of --repeats rounds runs both systems at each thread count. Prints
# one JSON object: the CPU, every run, the medians and pscluster/Keras
# ratios (goal: >= 1.2 at 1 and 2 threads; 1.5 in mixed_bfloat16). TensorFlow comes from the
# virtual environment at TF_VENV (default ~/.cache/pscluster-bench/tf-2.21,
# as bench/cluster_vs_tf_pss.sh), created with pip if absent. Progress goes
# to stderr. With --dtype_policy=mixed_bfloat16 the model is built under that
# Keras global policy (saved in each layer's config), so both train in it
# (issue 41); the JSON names the policy.
#
# Usage: bash bench/resnet_vs_keras_fit.sh [--steps=N] [--repeats=N] [--threads="1 2"]
#                                          [--dtype_policy=float32|mixed_bfloat16]
#   (BUILD_DIR, default build; the binaries must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
TF_VENV=${TF_VENV:-$HOME/.cache/pscluster-bench/tf-2.21}
steps=20
repeats=3
threads="1 2"
policy=float32
for a in "$@"; do
  case "$a" in
    --steps=*) steps=${a#--steps=} ;;
    --dtype_policy=*) policy=${a#--dtype_policy=} ;;
    --repeats=*) repeats=${a#--repeats=} ;;
    --threads=*) threads=${a#--threads=} ;;
    *) echo "resnet_vs_keras_fit: unknown argument $a" >&2; exit 2 ;;
  esac
done
if ! [[ $steps =~ ^[1-9][0-9]*$ && $repeats =~ ^[1-9][0-9]*$ ]]; then
  echo "resnet_vs_keras_fit: --steps and --repeats must be positive integers" >&2
  exit 2
fi
out=$(mktemp -d /tmp/resnet_vs_keras_fit.XXXXXX)
trap 'rm -rf "$out"' EXIT

if ! "$TF_VENV/bin/python3" -c 'import tensorflow, keras' 2>/dev/null; then
  echo "resnet_vs_keras_fit: creating $TF_VENV (TensorFlow 2.21 from PyPI)..." >&2
  mkdir -p "$(dirname "$TF_VENV")"
  python3 -m venv "$TF_VENV"
  "$TF_VENV/bin/pip" install -q 'tensorflow-cpu==2.21.*' 'tf-keras==2.21.*'
fi
export KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=2

# The model and the data (batch 128 x steps examples, 10 classes).
"$TF_VENV/bin/python3" - "$out" "$steps" "$policy" <<'PY'
import os, sys
import numpy as np
import keras
out, steps, policy = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "interop"))
from keras_models import resnet  # the interop test's ResNet, as issue 37 names it
keras.mixed_precision.set_global_policy(policy)  # kept in each layer's config
model, _, _ = resnet()
keras.mixed_precision.set_global_policy("float32")
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.save(os.path.join(out, "resnet.keras"))
rng = np.random.default_rng(0)
n = 128 * steps
np.savez(os.path.join(out, "data.npz"),
         x_train=rng.normal(size=(n, 32, 32, 3)).astype(np.float32),
         y_train=rng.integers(0, 10, size=n).astype(np.int32),
         x_val=rng.normal(size=(128, 32, 32, 3)).astype(np.float32),
         y_val=rng.integers(0, 10, size=128).astype(np.int32))
print(f"resnet: {model.count_params()} parameters", file=sys.stderr)
PY

run_pscluster() {  # threads -> examples/s of the second epoch
  local file="$out/ps.json"
  "$BUILD_DIR/bin/worker" --standalone --model="$out/resnet.keras" --data="$out/data.npz" \
    --nostandardize --noshuffle --batch_size=128 --epochs=2 --steps_per_epoch="$steps" \
    --optimizer=sgd --learning_rate=0.01 --intra_op_threads="$1" --metrics_out="$file" \
    > "$out/ps.log" 2>&1 || { cat "$out/ps.log" >&2; return 1; }
  python3 -c "import json, sys; r = json.load(open('$file')); \
print(round(128 * $steps / r['epochs'][1]['wall_s'], 1))"
}

run_keras() {  # threads -> examples/s of the second epoch
  "$TF_VENV/bin/python3" - "$out" "$steps" "$1" <<'PY'
import os, sys, time
import numpy as np
import tensorflow as tf
out, steps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tf.config.threading.set_intra_op_parallelism_threads(threads)
tf.config.threading.set_inter_op_parallelism_threads(threads)
import keras
model = keras.models.load_model(os.path.join(out, "resnet.keras"))
d = np.load(os.path.join(out, "data.npz"))
x, y = d["x_train"], d["y_train"]
class Clock(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()
    def on_epoch_end(self, epoch, logs=None):
        self.seconds = time.perf_counter() - self.start
clock = Clock()
model.fit(x, y, batch_size=128, epochs=1, shuffle=False, verbose=0)  # traces
model.fit(x, y, batch_size=128, epochs=1, shuffle=False, verbose=0, callbacks=[clock])
print(round(128 * steps / clock.seconds, 1))
PY
}

declare -A ours keras
for ((r = 1; r <= repeats; r++)); do
  for t in $threads; do
    p=$(run_pscluster "$t")
    k=$(run_keras "$t")
    ours[$t]+="$p "
    keras[$t]+="$k "
    echo "round $r, $t thread(s): pscluster $p examples/s, Keras fit (TensorFlow) $k" >&2
  done
done
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
tf_version=$("$TF_VENV/bin/python3" -c 'import tensorflow as tf, keras; print(tf.__version__, keras.__version__)' 2>/dev/null)
args=()
for t in $threads; do args+=("$t" "${ours[$t]}" "${keras[$t]}"); done
python3 - "$cpu" "$steps" "$repeats" "$tf_version" "$policy" "${args[@]}" <<'PY'
import json, statistics, sys
cpu, steps, repeats, versions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
policy = sys.argv[5]
goal = 1.2 if policy == "float32" else 1.5  # issue 37's; issue 41's in the same precision
rest = sys.argv[6:]
runs = {}
for i in range(0, len(rest), 3):
    ours = [float(v) for v in rest[i + 1].split()]
    keras = [float(v) for v in rest[i + 2].split()]
    mo, mk = statistics.median(ours), statistics.median(keras)
    runs[rest[i]] = {"pscluster_examples_per_sec": ours, "keras_fit_examples_per_sec": keras,
                     "median_pscluster": mo, "median_keras_fit": mk,
                     "ratio": round(mo / mk, 3), "goal": goal, "met": mo / mk >= goal}
tf_v, keras_v = (versions.split() + ["?", "?"])[:2]
print(json.dumps({"bench": "resnet_vs_keras_fit", "cpu": cpu, "batch": 128,
                  "dtype_policy": policy,
                  "steps_per_epoch": steps, "repeats": repeats,
                  "tensorflow": tf_v, "keras": keras_v, "threads": runs}, indent=1))
PY
