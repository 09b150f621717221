#!/usr/bin/env bash
# bench/record_read.sh: records per second one reader thread parses from
# TFRecord files, pscluster (bench/record_read.cc: framing and CRCs,
# inflating, each tf.train.Example parsed, checked and converted into the
# arrays, as a job reads them) against tf.data
# (TFRecordDataset(files).batch(512).map(parse_example), one thread:
# bench/tf_record_read.py), both under `taskset -c 0` (issue 42).
#
# Three kinds of records, each plain and GZIP, 4 files each, written by
# `pscluster data convert` from an .npz: click-through (26 int64 ids, 13
# floats, an int64 label), Fashion-MNIST-shaped (784 random raw bytes, an
# int64 label; tf.data leaves the bytes a string, pscluster copies them into
# the uint8 array) and Fashion-MNIST itself (the 60,000 training images of
# Debian's dataset-fashion-mnist, repeated to --records; skipped without
# it). Random pixels are the worst case for GZIP: they barely compress, so
# inflating decodes a literal per byte; real images compress to about half.
# pscluster reads each case two ways (bench/record_read.cc): whole, into one
# set of arrays (files under 1 GiB), and streamed, chunks of 512 records
# dropped after each, as tf.data's batches are (a streamed job's reader).
# Each of --repeats rounds runs every case, pscluster whole, then streamed,
# then tf.data, interleaved; the report is the medians and their ratios to
# tf.data, with the CPU. TensorFlow comes from TF_VENV (default
# ~/.cache/pscluster-bench/tf-2.21), created with pip if absent. Prints one
# JSON object.
#
# Usage: bash bench/record_read.sh [--records=200000] [--repeats=3]
#   (BUILD_DIR, default build; the binaries must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
TF_VENV=${TF_VENV:-$HOME/.cache/pscluster-bench/tf-2.21}
records=200000
repeats=3
for a in "$@"; do
  case "$a" in
    --records=*) records=${a#--records=} ;;
    --repeats=*) repeats=${a#--repeats=} ;;
    *) echo "record_read: unknown argument $a" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/record_read.XXXXXX)
trap 'rm -rf "$out"' EXIT
if ! "$TF_VENV/bin/python3" -c 'import tensorflow' 2>/dev/null; then
  echo "record_read: creating $TF_VENV (TensorFlow 2.21 from PyPI)..." >&2
  mkdir -p "$(dirname "$TF_VENV")"
  python3 -m venv "$TF_VENV"
  "$TF_VENV/bin/pip" install -q 'tensorflow-cpu==2.21.*' 'tf-keras==2.21.*'
fi
export TF_CPP_MIN_LOG_LEVEL=2 CUDA_VISIBLE_DEVICES=
"$TF_VENV/bin/python3" - "$out" "$records" <<'PY'
import sys
import numpy as np
out, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
np.savez(f"{out}/click.npz", **{"x_train/cat": rng.integers(0, 1 << 20, (n, 26)),
                                "x_train/dense": rng.normal(size=(n, 13)).astype(np.float32),
                                "y_train": rng.integers(0, 2, n)})
np.savez(f"{out}/fashion.npz", x_train=rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
         y_train=rng.integers(0, 10, n))
PY
kinds=(click fashion)
fmnist=/usr/share/datasets/fashion-mnist
if [[ -f $fmnist/train-images-idx3-ubyte.gz && -f $fmnist/train-labels-idx1-ubyte.gz ]]; then
  "$TF_VENV/bin/python3" - "$out" "$records" "$fmnist" <<'PY'
import gzip, sys
import numpy as np
out, n, src = sys.argv[1], int(sys.argv[2]), sys.argv[3]
x = np.frombuffer(gzip.open(f"{src}/train-images-idx3-ubyte.gz").read()[16:], np.uint8)
y = np.frombuffer(gzip.open(f"{src}/train-labels-idx1-ubyte.gz").read()[8:], np.uint8)
rows = np.arange(n) % len(y)
np.savez(f"{out}/fmnist.npz", x_train=x.reshape(-1, 28, 28)[rows], y_train=y[rows].astype(np.int64))
PY
  kinds+=(fmnist)
else
  echo "record_read: no $fmnist (apt-get install -y dataset-fashion-mnist): its case is skipped" >&2
fi
for kind in "${kinds[@]}"; do
  for c in none gzip; do
    "$BUILD_DIR/bin/pscluster" data convert "$out/$kind.npz" "$out/$kind-$c" --shards=4 \
      --compression="$c" > /dev/null
  done
  rm "$out/$kind.npz"
done
for r in $(seq "$repeats"); do
  for kind in "${kinds[@]}"; do
    for c in none gzip; do
      dir="$out/$kind-$c"
      for mode in whole stream; do
        taskset -c 0 "$BUILD_DIR/bin/record_read" --files="$dir/train-*" --spec="$dir/spec.json" \
          --read="$mode" > "$out/$mode-$kind-$c-$r.json"
      done
      taskset -c 0 "$TF_VENV/bin/python3" bench/tf_record_read.py "${kind/fmnist/fashion}" "$c" \
        "$dir"/train-* \
        > "$out/tf-$kind-$c-$r.json"
    done
  done
done
python3 - "$out" "$repeats" "$records" <<'PY'
import glob, json, os, statistics, subprocess, sys
out, repeats, records = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True,
            text=True).stdout.splitlines() if l.startswith("Model name")), "unknown")
report = {"bench": "record_read", "records": records, "repeats": repeats, "cpu": cpu,
          "cases": {}}
for kind in ["click", "fashion", "fmnist"]:
    if not os.path.isdir(f"{out}/{kind}-none"):
        continue
    for c in ["none", "gzip"]:
        runs = {}
        for side in ["whole", "stream", "tf"]:
            runs[side] = [json.load(open(f"{out}/{side}-{kind}-{c}-{r}.json"))["records_per_second"]
                          for r in range(1, repeats + 1)]
        whole, stream, tf = (statistics.median(runs[s]) for s in ["whole", "stream", "tf"])
        mb = sum(os.path.getsize(f) for f in glob.glob(f"{out}/{kind}-{c}/train-*")) / 1e6
        report["cases"][f"{kind}/{c}"] = {
            "pscluster_whole_records_per_second": round(whole),
            "pscluster_stream_records_per_second": round(stream),
            "tf_data_records_per_second": round(tf),
            "ratio_whole": round(whole / tf, 2), "ratio_stream": round(stream / tf, 2),
            "file_mb": round(mb, 1),
            "pscluster_whole_runs": [round(x) for x in runs["whole"]],
            "pscluster_stream_runs": [round(x) for x in runs["stream"]],
            "tf_data_runs": [round(x) for x in runs["tf"]]}
print(json.dumps(report, indent=1))
PY
