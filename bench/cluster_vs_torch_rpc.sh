#!/usr/bin/env bash
# bench/cluster_vs_torch_rpc.sh: the end-to-end figure of the data plane.
#
# Cluster examples/s of the reference job (seed_cnn, SGD 0.01), 1 ps + 2
# workers with one compute thread each, --batch_size=256 (128 per worker per
# step, as the peer), sync and async, with the data channel and with gRPC
# alone (--data_channel=false on every task); then, in the same run, the
# PyTorch RPC parameter-server peer (../shared/anchors/torch_rpc_ps.py: 1 PS
# + 2 trainers over TensorPipe/TCP, 128 per trainer per step) when Debian's
# python3-torch is installed. Prints one JSON object.
#
# Usage: bash bench/cluster_vs_torch_rpc.sh [--steps=N] [--repeats=N] [--no_torch]
#   (BUILD_DIR, default build; the binaries must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
steps=100
repeats=1
torch=1
for a in "$@"; do
  case "$a" in
    --steps=*) steps=${a#--steps=} ;;
    --repeats=*) repeats=${a#--repeats=} ;;
    --no_torch) torch=0 ;;
    *) echo "cluster_vs_torch_rpc: unknown argument $a" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/cluster_vs_torch.XXXXXX)
trap 'rm -rf "$out"' EXIT

run() {  # mode data_channel repeat
  local file="$out/$1-$2-$3.json"
  "$BUILD_DIR/bin/pscluster" launch --ps=1 --workers=2 --data_channel="$2" -- \
    --mode="$1" --batch_size=256 --epochs=1 --steps_per_epoch="$steps" --intra_op_threads=1 \
    --metrics_out="$file" > "$out/$1-$2-$3.log" 2>&1 || {
    echo "cluster_vs_torch_rpc: $1 data_channel=$2 failed:" >&2; tail -20 "$out/$1-$2-$3.log" >&2
    exit 1
  }
}
for r in $(seq "$repeats"); do
  for mode in sync async; do
    for dc in true false; do run "$mode" "$dc" "$r"; done
  done
done
if [[ $torch == 1 ]] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 ../shared/anchors/torch_rpc_ps.py --transports=tcp --repeats="$repeats" \
    --out "$out/torch.json" > "$out/torch.log" 2>&1 || {
    echo "cluster_vs_torch_rpc: the PyTorch peer failed:" >&2; tail -20 "$out/torch.log" >&2; exit 1
  }
fi
python3 - "$out" "$steps" "$repeats" <<'PY'
import glob, json, os, statistics, sys
out, steps, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
res = {"bench": "cluster_vs_torch_rpc", "steps": steps, "repeats": repeats,
       "conditions": "1 ps + 2 workers, 1 compute thread each, batch 256 (128 per worker), "
                     "seed_cnn, SGD 0.01, 2-core machine, median over repeats"}
for mode in ("sync", "async"):
    for dc, key in (("true", "data_channel"), ("false", "grpc")):
        runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{mode}-{dc}-*.json"))]
        res[f"pscluster_{mode}_{key}"] = {
            "examples_per_s": round(statistics.median(r["examples_per_sec"] for r in runs), 1),
            "runs": [round(r["examples_per_sec"], 1) for r in runs],
            "worker_comm_s": [round(r.get("worker_comm_s", 0), 2) for r in runs],
            "worker_compute_s": [round(r.get("worker_compute_s", 0), 2) for r in runs]}
torch_file = f"{out}/torch.json"
if os.path.exists(torch_file):
    t = json.load(open(torch_file))["configs"]["tcp"]
    for mode in ("sync", "async"):
        peer = t[mode]["aggregate_examples_per_s_median"]
        res[f"torch_rpc_{mode}"] = {"examples_per_s": peer}
        res[f"speedup_vs_torch_rpc_{mode}"] = round(
            res[f"pscluster_{mode}_data_channel"]["examples_per_s"] / peer, 3)
else:
    res["torch_rpc"] = "not run (no /usr/bin/python3 with torch, or --no_torch)"
print(json.dumps(res))
PY
