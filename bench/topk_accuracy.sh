#!/usr/bin/env bash
# The accuracy cost of --topk_ratio on the reference job: the 10-epoch
# sync job (seed_cnn, full Fashion-MNIST, 1 ps + 2 workers, pscluster
# launch) dense and at each ratio, one after the other, and a table of
# test accuracy, loss, the last validation accuracy, examples/s and the
# workers' communication time.
#
# Usage: bench/topk_accuracy.sh [--ratios=0.01,0.1] [--epochs=10] [--out=DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
ratios=0.01
epochs=10
out=bench_out/topk_accuracy
for a in "$@"; do
  case "$a" in
    --ratios=*) ratios=${a#*=} ;;
    --epochs=*) epochs=${a#*=} ;;
    --out=*) out=${a#*=} ;;
    *) echo "topk_accuracy.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
[[ -x "$BUILD_DIR/bin/pscluster" ]] || { echo "build first: $BUILD_DIR/bin/pscluster" >&2; exit 2; }
mkdir -p "$out"
lscpu | grep -m1 "Model name" | tee "$out/cpu.txt"
runs=(0 ${ratios//,/ })
for r in "${runs[@]}"; do
  echo "== --topk_ratio=$r, $epochs epochs"
  "$BUILD_DIR/bin/pscluster" launch --ps=1 --workers=2 -- --mode=sync --epochs="$epochs" \
    --topk_ratio="$r" --metrics_out="$out/result-topk-$r.json" > "$out/log-topk-$r.txt" 2>&1
done
python3 - "$out" "${runs[@]}" <<'PY'
import json, sys
out, runs = sys.argv[1], sys.argv[2:]
print("| --topk_ratio | test accuracy | test loss | val accuracy, last epoch | examples/s | worker comm s |")
print("| --- | --- | --- | --- | --- | --- |")
for r in runs:
    j = json.load(open("%s/result-topk-%s.json" % (out, r)))
    print("| %s | %.4f | %.4f | %.4f | %.0f | %.1f |" % (
        r if r != "0" else "0 (dense)", j["test_accuracy"], j["test_loss"],
        j["epochs"][-1]["val_accuracy"], j["examples_per_sec"], j["worker_comm_s"]))
PY
