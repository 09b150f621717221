#!/usr/bin/env bash
# bench/sequence_vs_keras_fit.sh: issue 40's two sequence models (item 7)
# trained by `worker --standalone` against Keras 3's own `fit` on the
# TensorFlow backend, in the same run, interleaved, at 1 and 2 threads:
#   transformer: a Transformer encoder text classifier: 20,000 tokens of
#     vocabulary, sequences of 128, d_model 128; a token Embedding(20000,
#     128) and a position Embedding(128, 128) added (int32 inputs "tokens"
#     and "positions", the positions 0..127 of each row); two encoder blocks
#     of MultiHeadAttention(num_heads=4, key_dim=32)(x, x), a residual Add,
#     LayerNormalization, Dense(512, gelu), Dense(128), Add,
#     LayerNormalization; GlobalAveragePooling1D and Dense(2) logits
#     (tests/interop/keras_models.py's transformer(), larger).
#   lstm: Embedding(20000, 64) over int32 "tokens" of length 100, LSTM(128),
#     Dense(2) logits.
#
# Both systems train the same .keras file (saved by that Keras) on the same
# random tokens (labels 0/1) with Adam (learning rate 1e-3) and sparse
# categorical cross-entropy of the logits, batch 64, for two epochs of
# --steps steps; each side's speed is its second epoch's (the first pays for
# TensorFlow's tracing and oneDNN's primitive creation): examples / that
# epoch's training seconds (pscluster: the result file's epoch wall_s,
# training alone; Keras: a callback's clock around the epoch). Keras runs
# with intra- and inter-op threads equal to pscluster's --intra_op_threads
# and compiles with jit_compile left at its default ("auto"), which the
# JSON reports as Keras resolved it (model.jit_compile after fit: False on a
# CPU-only TensorFlow). Each of --repeats rounds runs both systems on each
# model at each thread count. Prints one JSON object: the CPU, the versions,
# per model and thread count every run, the medians and the pscluster/Keras
# ratio (goal: >= 1.2 at 1 and 2 threads), and pscluster's per-op breakdown
# (the 12 largest ops of a step, ms, from bench/keras_step_breakdown: where
# a kernel of ours is slower than it should be). TensorFlow comes from the virtual
# environment at TF_VENV (default ~/.cache/pscluster-bench/tf-2.21, as
# bench/resnet_vs_keras_fit.sh), created with pip if absent. Progress goes
# to stderr.
#
# Usage: bash bench/sequence_vs_keras_fit.sh [--steps=N] [--repeats=N] [--threads="1 2"]
#          [--models="transformer lstm"]
#   (BUILD_DIR, default build; the binaries must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
TF_VENV=${TF_VENV:-$HOME/.cache/pscluster-bench/tf-2.21}
steps=10
repeats=3
threads="1 2"
models="transformer lstm"
for a in "$@"; do
  case "$a" in
    --steps=*) steps=${a#--steps=} ;;
    --repeats=*) repeats=${a#--repeats=} ;;
    --threads=*) threads=${a#--threads=} ;;
    --models=*) models=${a#--models=} ;;
    *) echo "sequence_vs_keras_fit: unknown argument $a" >&2; exit 2 ;;
  esac
done
if ! [[ $steps =~ ^[1-9][0-9]*$ && $repeats =~ ^[1-9][0-9]*$ ]]; then
  echo "sequence_vs_keras_fit: --steps and --repeats must be positive integers" >&2
  exit 2
fi
for t in $threads; do
  if ! [[ $t =~ ^[1-9][0-9]*$ ]]; then
    echo "sequence_vs_keras_fit: --threads takes positive integers, not $t" >&2
    exit 2
  fi
done
for m in $models; do
  case "$m" in
    transformer|lstm) ;;
    *) echo "sequence_vs_keras_fit: unknown model $m (transformer, lstm)" >&2; exit 2 ;;
  esac
done
if [[ -z ${threads// /} || -z ${models// /} ]]; then
  echo "sequence_vs_keras_fit: --threads and --models must name at least one" >&2
  exit 2
fi
out=$(mktemp -d /tmp/sequence_vs_keras_fit.XXXXXX)
trap 'rm -rf "$out"' EXIT

if ! "$TF_VENV/bin/python3" -c 'import tensorflow, keras' 2>/dev/null; then
  echo "sequence_vs_keras_fit: creating $TF_VENV (TensorFlow 2.21 from PyPI)..." >&2
  mkdir -p "$(dirname "$TF_VENV")"
  python3 -m venv "$TF_VENV"
  "$TF_VENV/bin/pip" install -q 'tensorflow-cpu==2.21.*' 'tf-keras==2.21.*'
fi
export KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=2

# The models and their data (batch 64 x steps examples, 2 classes): for each
# model M, $out/M.keras, $out/M.npz (x_train, or x_train/<input> for the
# Transformer's two inputs; y_train; one batch of x_val, y_val) and
# $out/M.params (its parameter count).
"$TF_VENV/bin/python3" - "$out" "$steps" $models <<'PY'
import os, sys
import numpy as np
import keras
from keras import layers
out, steps, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
VOCAB, BATCH = 20000, 64


def transformer():
    length, d = 128, 128
    tokens = keras.Input((length,), dtype="int32", name="tokens")
    positions = keras.Input((length,), dtype="int32", name="positions")
    x = layers.Add()([layers.Embedding(VOCAB, d)(tokens), layers.Embedding(length, d)(positions)])
    for _ in range(2):
        a = layers.MultiHeadAttention(num_heads=4, key_dim=32)(x, x)
        x = layers.LayerNormalization()(layers.Add()([x, a]))
        f = layers.Dense(d)(layers.Dense(512, activation="gelu")(x))
        x = layers.LayerNormalization()(layers.Add()([x, f]))
    x = layers.GlobalAveragePooling1D()(x)
    model = keras.Model([tokens, positions], layers.Dense(2)(x), name="transformer")

    def examples(rng, n):
        return {"tokens": rng.integers(0, VOCAB, size=(n, length)).astype(np.int32),
                "positions": np.tile(np.arange(length, dtype=np.int32), (n, 1))}
    return model, examples


def lstm():
    length = 100
    tokens = keras.Input((length,), dtype="int32", name="tokens")
    x = layers.LSTM(128)(layers.Embedding(VOCAB, 64)(tokens))
    model = keras.Model(tokens, layers.Dense(2)(x), name="lstm")

    def examples(rng, n):
        return rng.integers(0, VOCAB, size=(n, length)).astype(np.int32)
    return model, examples


def arrays(prefix, x):  # as tests/interop/keras_models.py's
    if isinstance(x, dict):
        return {f"{prefix}/{name}": v for name, v in x.items()}
    return {prefix: x}


for name in names:
    keras.utils.set_random_seed(0)
    model, examples = {"transformer": transformer, "lstm": lstm}[name]()
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.save(os.path.join(out, name + ".keras"))
    rng = np.random.default_rng(0)
    n = BATCH * steps
    x, y = examples(rng, n), rng.integers(0, 2, size=n).astype(np.int32)
    xv, yv = examples(rng, BATCH), rng.integers(0, 2, size=BATCH).astype(np.int32)
    np.savez(os.path.join(out, name + ".npz"), y_train=y, y_val=yv,
             **arrays("x_train", x), **arrays("x_val", xv))
    with open(os.path.join(out, name + ".params"), "w") as f:
        print(model.count_params(), file=f)
    print(f"{name}: {model.count_params()} parameters", file=sys.stderr)
PY

run_pscluster() {  # model threads -> examples/s of the second epoch
  local file="$out/ps.json"
  "$BUILD_DIR/bin/worker" --standalone --model="$out/$1.keras" --data="$out/$1.npz" \
    --nostandardize --noshuffle --batch_size=64 --epochs=2 --steps_per_epoch="$steps" \
    --optimizer=adam --learning_rate=0.001 --intra_op_threads="$2" --metrics_out="$file" \
    > "$out/ps.log" 2>&1 || { cat "$out/ps.log" >&2; return 1; }
  python3 -c "import json, sys; r = json.load(open('$file')); \
print(round(64 * $steps / r['epochs'][1]['wall_s'], 1))"
}

run_keras() {  # model threads -> "examples/s of the second epoch" "resolved jit_compile"
  "$TF_VENV/bin/python3" - "$out" "$steps" "$1" "$2" <<'PY' | tail -1
import os, sys, time
import numpy as np
import tensorflow as tf
out, steps, name, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
tf.config.threading.set_intra_op_parallelism_threads(threads)
tf.config.threading.set_inter_op_parallelism_threads(threads)
import keras
model = keras.models.load_model(os.path.join(out, name + ".keras"))
d = np.load(os.path.join(out, name + ".npz"))
prefix = "x_train/"
x = ({k[len(prefix):]: d[k] for k in d.files if k.startswith(prefix)}
     if "x_train" not in d.files else d["x_train"])
y = d["y_train"]
class Clock(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()
    def on_epoch_end(self, epoch, logs=None):
        self.seconds = time.perf_counter() - self.start
clock = Clock()
model.fit(x, y, batch_size=64, epochs=1, shuffle=False, verbose=0)  # traces
model.fit(x, y, batch_size=64, epochs=1, shuffle=False, verbose=0, callbacks=[clock])
print(round(64 * steps / clock.seconds, 1), str(model.jit_compile).lower())
PY
}

declare -A ours keras jit
for ((r = 1; r <= repeats; r++)); do
  for t in $threads; do
    for m in $models; do
      p=$(run_pscluster "$m" "$t")
      k=$(run_keras "$m" "$t")
      ours[$m:$t]+="$p "
      keras[$m:$t]+="${k%% *} "
      jit[$m]+="${k#* } "
      echo "round $r, $m, $t thread(s): pscluster $p examples/s, Keras fit (TensorFlow) ${k%% *}" \
        "(jit_compile ${k#* })" >&2
    done
  done
done
# Where pscluster's step goes, op by op (bench/keras_step_breakdown), once
# per model and thread count, after the rounds.
for m in $models; do
  for t in $threads; do
    "$BUILD_DIR/bin/keras_step_breakdown" --model="$out/$m.keras" --data="$out/$m.npz" \
      --nostandardize --batch_size=64 --optimizer=adam --learning_rate=0.001 \
      --intra_op_threads="$t" --warmup=3 --timed_steps=5 > "$out/$m.$t.breakdown" 2> /dev/null ||
      echo "sequence_vs_keras_fit: keras_step_breakdown failed for $m at $t thread(s)" >&2
  done
done
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
tf_version=$("$TF_VENV/bin/python3" -c 'import tensorflow as tf, keras; print(tf.__version__, keras.__version__)' 2>/dev/null)
args=()
for m in $models; do
  for t in $threads; do
    args+=("$m" "$(cat "$out/$m.params")" "${jit[$m]}" "$t" "${ours[$m:$t]}" "${keras[$m:$t]}")
  done
done
python3 - "$out" "$cpu" "$steps" "$repeats" "$tf_version" "${args[@]}" <<'PY'
import json, os, statistics, sys
out, cpu, steps, repeats, versions = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                      int(sys.argv[4]), sys.argv[5])
rest = sys.argv[6:]
SHAPES = {"transformer": {"vocabulary": 20000, "sequence_length": 128, "d_model": 128,
                          "blocks": 2, "heads": 4, "key_dim": 32, "feed_forward": 512},
          "lstm": {"vocabulary": 20000, "sequence_length": 100, "embedding": 64, "units": 128}}
models = {}
for i in range(0, len(rest), 6):
    name, params, jits, t = rest[i], int(rest[i + 1]), sorted(set(rest[i + 2].split())), rest[i + 3]
    ours = [float(v) for v in rest[i + 4].split()]
    keras = [float(v) for v in rest[i + 5].split()]
    mo, mk = statistics.median(ours), statistics.median(keras)
    m = models.setdefault(name, {"parameters": params, **SHAPES[name],
                                 "keras_jit_compile": (jits[0] == "true") if len(jits) == 1
                                 else jits, "threads": {}})
    m["threads"][t] = {"pscluster_examples_per_sec": ours, "keras_fit_examples_per_sec": keras,
                       "median_pscluster": mo, "median_keras_fit": mk,
                       "median_pscluster_ms_per_step": round(64e3 / mo, 1),
                       "median_keras_fit_ms_per_step": round(64e3 / mk, 1),
                       "ratio": round(mo / mk, 3), "goal": 1.2, "met": mo / mk >= 1.2}
    try:  # the 12 largest ops of a step, ms (keras_step_breakdown)
        b = json.loads(open(os.path.join(out, f"{name}.{t}.breakdown")).read().split("\n")[0])
        m["threads"][t]["breakdown_ms_per_step"] = b["ms_per_step"]
        m["threads"][t]["breakdown_ms"] = dict(list(b["breakdown_ms"].items())[:12])
    except (OSError, ValueError, KeyError):
        m["threads"][t]["breakdown_ms"] = "unavailable"
tf_v, keras_v = (versions.split() + ["?", "?"])[:2]
print(json.dumps({"bench": "sequence_vs_keras_fit", "cpu": cpu, "batch": 64,
                  "steps_per_epoch": steps, "repeats": repeats,
                  "optimizer": "adam", "learning_rate": 0.001,
                  "tensorflow": tf_v, "keras": keras_v, "models": models}, indent=1))
PY
