#!/usr/bin/env bash
# bench/mixed_precision.sh: pscluster in mixed_bfloat16 against TensorFlow in
# mixed_bfloat16, and against pscluster in float32, on the reference job's
# seed CNN, in the same run, interleaved (issue 41).
#
# Each of --repeats rounds runs, one after another:
#   one process, --threads compute threads, batch 128, --steps steps:
#     pscluster float32, pscluster mixed_bfloat16 (`worker --standalone`),
#     Keras 3 fit on TensorFlow 2.21 under mixed_bfloat16
#     (../shared/anchors/tf_pss.py --fit with the global policy set);
#   1 ps + 2 workers, one compute thread each, 128 per worker per step:
#     pscluster async float32, pscluster async mixed_bfloat16 (the wire
#     bfloat16, its default there), TF PSS under mixed_bfloat16 (tf_keras's
#     global policy set in the coordinator, which builds the model).
# Reports the medians over the rounds, their ratios, each run, the CPU and
# its bfloat16 flags, and the oneDNN kernels pscluster's bfloat16 step ran
# (ONEDNN_VERBOSE's implementation names, e.g. jit_bf16:avx512_core_bf16).
# TensorFlow comes from TF_VENV (default ~/.cache/pscluster-bench/tf-2.21),
# created with pip if absent. Prints one JSON object.
#
# Usage: bash bench/mixed_precision.sh [--steps=N] [--repeats=N] [--threads=N] [--no_cluster]
#   (BUILD_DIR, default build; the binaries must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
TF_VENV=${TF_VENV:-$HOME/.cache/pscluster-bench/tf-2.21}
steps=60
repeats=3
threads=1
cluster=1
for a in "$@"; do
  case "$a" in
    --steps=*) steps=${a#--steps=} ;;
    --repeats=*) repeats=${a#--repeats=} ;;
    --threads=*) threads=${a#--threads=} ;;
    --no_cluster) cluster=0 ;;
    *) echo "mixed_precision: unknown argument $a" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/mixed_precision.XXXXXX)
trap 'rm -rf "$out"' EXIT
if ! "$TF_VENV/bin/python3" -c 'import tensorflow' 2>/dev/null; then
  echo "mixed_precision: creating $TF_VENV (TensorFlow 2.21 from PyPI)..." >&2
  mkdir -p "$(dirname "$TF_VENV")"
  python3 -m venv "$TF_VENV"
  "$TF_VENV/bin/pip" install -q 'tensorflow-cpu==2.21.*' 'tf-keras==2.21.*'
fi
anchor=$(cd ../shared/anchors && pwd)/tf_pss.py

standalone() {  # policy repeat
  "$BUILD_DIR/bin/worker" --standalone --model=seed_cnn --dtype_policy="$1" --batch_size=128 \
    --epochs=1 --steps_per_epoch="$steps" --intra_op_threads="$threads" \
    --metrics_out="$out/one-$1-$2.json" > "$out/one-$1-$2.log" 2>&1 || {
    echo "mixed_precision: worker $1 failed:" >&2; tail -20 "$out/one-$1-$2.log" >&2; exit 1
  }
}
cluster() {  # policy repeat
  "$BUILD_DIR/bin/pscluster" launch --ps=1 --workers=2 -- --model=seed_cnn --dtype_policy="$1" \
    --mode=async --batch_size=256 --epochs=1 --steps_per_epoch="$steps" --intra_op_threads=1 \
    --metrics_out="$out/ps-$1-$2.json" > "$out/ps-$1-$2.log" 2>&1 || {
    echo "mixed_precision: pscluster $1 failed:" >&2; tail -20 "$out/ps-$1-$2.log" >&2; exit 1
  }
}
# tf_pss.py run under mixed_bfloat16: the global policy set before it builds
# the model (Keras 3 for --fit, tf_keras for PSS).
tf_mixed() {  # out args...
  local file=$1
  shift
  "$TF_VENV/bin/python3" - "$anchor" "$file" "$@" <<'PY' > "$file.log" 2>&1
import os, runpy, sys
anchor, out, args = sys.argv[1], sys.argv[2], sys.argv[3:]
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
if "--fit" in args:
    import keras
else:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tf_keras as keras
keras.mixed_precision.set_global_policy("mixed_bfloat16")
sys.argv = [anchor] + args + ["--out", out]
runpy.run_path(anchor, run_name="__main__")
PY
}
one_tf() {  # repeat
  tf_mixed "$out/fit-$1.json" --fit --threads "$threads" --batch 128 --warmup 10 --steps "$steps" \
    || { echo "mixed_precision: Keras fit failed:" >&2; tail -20 "$out/fit-$1.json.log" >&2; exit 1; }
}
pss_tf() {  # repeat
  tf_mixed "$out/pss-$1.json" --workers 2 --ps 1 --steps $((2 * steps)) \
    || { echo "mixed_precision: TF PSS failed:" >&2; tail -20 "$out/pss-$1.json.log" >&2; exit 1; }
}

for r in $(seq "$repeats"); do
  standalone float32 "$r"
  standalone mixed_bfloat16 "$r"
  one_tf "$r"
  if [[ $cluster == 1 ]]; then
    cluster float32 "$r"
    cluster mixed_bfloat16 "$r"
    pss_tf "$r"
  fi
done
# The oneDNN kernels of two bfloat16 steps.
ONEDNN_VERBOSE=1 "$BUILD_DIR/bin/worker" --standalone --model=seed_cnn \
  --dtype_policy=mixed_bfloat16 --batch_size=128 --epochs=1 --steps_per_epoch=2 \
  --intra_op_threads="$threads" --metrics_out="$out/verbose.json" > "$out/verbose.log" 2>&1

python3 - "$out" "$steps" "$repeats" "$threads" "$cluster" <<'PY'
import glob, json, os, statistics, sys
out, steps, repeats, threads, cluster = sys.argv[1:6]
info = open("/proc/cpuinfo").read()
cpu = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("model name")), "")
flags = set(next((l.split(":", 1)[1].split() for l in info.splitlines() if l.startswith("flags")), []))
def med(pattern, key):
    runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{pattern}"))]
    rates = [r[key] for r in runs]
    return {"examples_per_s": round(statistics.median(rates), 1), "runs": [round(x, 1) for x in rates]}
kernels = {}
for line in open(f"{out}/verbose.log"):
    p = line.split(",")
    if len(p) > 6 and p[0] == "onednn_verbose" and p[1] == "exec" and p[3] in (
            "convolution", "inner_product", "reorder", "eltwise"):
        kernels.setdefault(p[3], set()).add(p[4])
res = {"bench": "mixed_precision", "cpu": cpu, "nproc": os.cpu_count(),
       "bf16_flags": sorted(flags & {"avx512_bf16", "amx_bf16", "amx_tile"}),
       "repeats": int(repeats), "model": "seed_cnn",
       "conditions": f"one process: {threads} compute thread(s), batch 128, {steps} steps; cluster: "
                     f"1 ps + 2 workers, 1 thread each, 128 per worker, {256 * int(steps)} examples "
                     "per run, async; rounds interleaved; medians over rounds",
       "onednn_kernels_bf16": {k: sorted(v) for k, v in kernels.items()}}
res["one_process"] = {"pscluster_float32": med("one-float32-*.json", "examples_per_sec"),
                      "pscluster_mixed_bfloat16": med("one-mixed_bfloat16-*.json", "examples_per_sec"),
                      "keras3_fit_tf_mixed_bfloat16": med("fit-*.json", "examples_per_s_median")}
o = res["one_process"]
res["ratio_bf16_vs_keras_fit_bf16"] = round(
    o["pscluster_mixed_bfloat16"]["examples_per_s"] / o["keras3_fit_tf_mixed_bfloat16"]["examples_per_s"], 3)
res["ratio_bf16_vs_own_float32"] = round(
    o["pscluster_mixed_bfloat16"]["examples_per_s"] / o["pscluster_float32"]["examples_per_s"], 3)
if cluster == "1":
    res["cluster"] = {"pscluster_float32": med("ps-float32-*.json", "examples_per_sec"),
                      "pscluster_mixed_bfloat16": med("ps-mixed_bfloat16-*.json", "examples_per_sec"),
                      "tf_pss_mixed_bfloat16": med("pss-*.json", "aggregate_examples_per_s_median")}
    c = res["cluster"]
    res["ratio_cluster_bf16_vs_tf_pss_bf16"] = round(
        c["pscluster_mixed_bfloat16"]["examples_per_s"] / c["tf_pss_mixed_bfloat16"]["examples_per_s"], 3)
    res["ratio_cluster_bf16_vs_own_float32"] = round(
        c["pscluster_mixed_bfloat16"]["examples_per_s"] / c["pscluster_float32"]["examples_per_s"], 3)
print(json.dumps(res))
PY
