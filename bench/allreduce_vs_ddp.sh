#!/usr/bin/env bash
# bench/allreduce_vs_ddp.sh: pscluster's multi_worker_mirrored strategy
# against PyTorch DistributedDataParallel, in the same run.
#
# 1. Training, the reference job (seed_cnn, Fashion-MNIST, SGD 0.01), 2
#    workers with one compute thread each, 128 per worker per step
#    (--batch_size=256), --steps=N steps. Each of --repeats rounds runs, one
#    after another:
#      mwm      pscluster launch --strategy=multi_worker_mirrored --workers=2
#               (no ps tasks; the workers all-reduce gradients with Gloo/TCP)
#      ddp      bench/ddp_reference.py: torch DDP, gloo backend, 2 processes,
#               torch.set_num_threads(1), the anchors' seed CNN and tuned
#               allocator, N timed steps after --warmup steps
#      ps_sync  pscluster launch --ps=1 --workers=2, --mode=sync
#    pscluster's figure is `examples_per_sec` of the --metrics_out file:
#    trained examples / time spent training, evaluation excluded (all N
#    steps, no warm-up left out). DDP's: 2*N*128 / wall time of the N timed
#    steps. Reports the medians over the rounds, each run, the ratios, and the
#    goal: mwm >= 1.3x DDP.
# 2. The all-reduce alone: build/bin/allreduce_bytes (2 Gloo ranks over
#    loopback TCP, 435,306 floats = 1,741,224 bytes) and, beside it, the raw
#    TCP round trip of the same bytes (../shared/anchors/tcp_roundtrip.c,
#    compiled into the temporary folder); ratio = all-reduce median ms / TCP
#    round-trip median ms.
#
# Prints one JSON object at the end and writes it to --out.
#
# Usage: bash bench/allreduce_vs_ddp.sh [--steps=N] [--repeats=N] [--warmup=N]
#          [--only=mwm,ddp,ps_sync,allreduce] [--out=FILE]
#   --steps=150 --repeats=3 --warmup=5 (DDP's warm-up steps)
#   --only: the parts to run (default all four); --out default
#   /tmp/allreduce_vs_ddp.json. BUILD_DIR (default build) holds the binaries;
#   ANCHORS (default ../shared/anchors) the PyTorch reference and the TCP peer.
#   Never run it beside another benchmark or a build: they share the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
ANCHORS=${ANCHORS:-../shared/anchors}
PYTHON=/usr/bin/python3
steps=150
repeats=3
warmup=5
only=mwm,ddp,ps_sync,allreduce
out_file=/tmp/allreduce_vs_ddp.json
goal=1.3
for a in "$@"; do
  case "$a" in
    --steps=*) steps=${a#--steps=} ;;
    --repeats=*) repeats=${a#--repeats=} ;;
    --warmup=*) warmup=${a#--warmup=} ;;
    --only=*) only=${a#--only=} ;;
    --out=*) out_file=${a#--out=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "allreduce_vs_ddp: unknown argument $a" >&2; exit 2 ;;
  esac
done
die() { echo "allreduce_vs_ddp: $*" >&2; exit 1; }
[[ $steps =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer"
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats must be a positive integer"
[[ $warmup =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer"
want() { [[ ",$only," == *",$1,"* ]]; }
for p in ${only//,/ }; do
  case "$p" in mwm|ddp|ps_sync|allreduce) ;; *) die "--only: unknown part '$p' (mwm, ddp, ps_sync, allreduce)" ;; esac
done

# ---- prerequisites: all checked before anything runs -------------------------
if want mwm || want ps_sync; then
  for b in pscluster chief worker; do
    [[ -x $BUILD_DIR/bin/$b ]] || die "no $BUILD_DIR/bin/$b: build pscluster first (cmake --build $BUILD_DIR)"
  done
  [[ -d /usr/share/datasets/fashion-mnist ]] ||
    die "no Fashion-MNIST in /usr/share/datasets/fashion-mnist: apt-get install -y dataset-fashion-mnist"
fi
if want ps_sync; then
  [[ -x $BUILD_DIR/bin/ps_server ]] || die "no $BUILD_DIR/bin/ps_server: build pscluster first (cmake --build $BUILD_DIR)"
fi
if want mwm; then
  launch_help=$("$BUILD_DIR/bin/pscluster" launch --help 2>&1 || true)
  [[ $launch_help == *multi_worker_mirrored* ]] ||
    die "this build's 'pscluster launch' has no --strategy=multi_worker_mirrored (rebuild pscluster with it, or leave it out: --only=ddp,ps_sync,allreduce)"
fi
if want ddp; then
  [[ -x $PYTHON ]] || die "no $PYTHON: apt-get install -y python3 python3-torch"
  $PYTHON -c 'import torch' 2>/dev/null ||
    die "$PYTHON cannot import torch: apt-get install -y python3-torch"
  $PYTHON -c 'import torch.distributed as d, sys; sys.exit(not (d.is_available() and d.is_gloo_available()))' ||
    die "this torch has no torch.distributed with the gloo backend"
  [[ -f $ANCHORS/fmnist_common.py ]] || die "no $ANCHORS/fmnist_common.py (set ANCHORS to the anchors folder)"
  [[ -d /usr/share/datasets/fashion-mnist ]] ||
    die "no Fashion-MNIST in /usr/share/datasets/fashion-mnist: apt-get install -y dataset-fashion-mnist"
fi
if want allreduce; then
  [[ -x $BUILD_DIR/bin/allreduce_bytes ]] ||
    die "no $BUILD_DIR/bin/allreduce_bytes: cmake $BUILD_DIR && cmake --build $BUILD_DIR -j2 --target allreduce_bytes"
  command -v gcc > /dev/null || die "no gcc: apt-get install -y gcc"
  [[ -f $ANCHORS/tcp_roundtrip.c ]] || die "no $ANCHORS/tcp_roundtrip.c (set ANCHORS to the anchors folder)"
fi
mkdir -p "$(dirname "$out_file")"

out=$(mktemp -d /tmp/allreduce_vs_ddp.XXXXXX)
trap 'rm -rf "$out"' EXIT
load_at_start=$(cut -d' ' -f1 /proc/loadavg)

# ---- 1. training, interleaved -------------------------------------------------
chief_flags=(--batch_size=256 --epochs=1 --steps_per_epoch="$steps" --intra_op_threads=1)

run_mwm() {  # repeat
  "$BUILD_DIR/bin/pscluster" launch --strategy=multi_worker_mirrored --workers=2 -- \
    "${chief_flags[@]}" --metrics_out="$out/mwm-$1.json" > "$out/mwm-$1.log" 2>&1 || {
    echo "allreduce_vs_ddp: pscluster multi_worker_mirrored failed:" >&2
    tail -20 "$out/mwm-$1.log" >&2; exit 1
  }
}
run_ddp() {  # repeat
  $PYTHON bench/ddp_reference.py --steps "$steps" --warmup "$warmup" --anchors "$ANCHORS" \
    --out "$out/ddp-$1.json" > "$out/ddp-$1.log" 2>&1 || {
    echo "allreduce_vs_ddp: the DDP reference failed:" >&2; tail -20 "$out/ddp-$1.log" >&2; exit 1
  }
}
run_ps_sync() {  # repeat
  "$BUILD_DIR/bin/pscluster" launch --ps=1 --workers=2 -- --mode=sync \
    "${chief_flags[@]}" --metrics_out="$out/ps_sync-$1.json" > "$out/ps_sync-$1.log" 2>&1 || {
    echo "allreduce_vs_ddp: pscluster ps sync failed:" >&2; tail -20 "$out/ps_sync-$1.log" >&2; exit 1
  }
}
for r in $(seq "$repeats"); do
  for part in mwm ddp ps_sync; do
    if want "$part"; then
      echo "allreduce_vs_ddp: round $r/$repeats: $part ($steps steps)" >&2
      "run_$part" "$r"
    fi
  done
done

# ---- 2. the all-reduce alone, and raw TCP ------------------------------------------
if want allreduce; then
  echo "allreduce_vs_ddp: allreduce_bytes, then tcp_roundtrip" >&2
  "$BUILD_DIR/bin/allreduce_bytes" --out="$out/allreduce.json" > "$out/allreduce.log" 2>&1 || {
    echo "allreduce_vs_ddp: allreduce_bytes failed:" >&2; tail -20 "$out/allreduce.log" >&2; exit 1
  }
  gcc -O2 -Wall -Wextra -o "$out/tcp_roundtrip" "$ANCHORS/tcp_roundtrip.c" ||
    die "cannot compile $ANCHORS/tcp_roundtrip.c"
  "$out/tcp_roundtrip" --out "$out/tcp.json" > "$out/tcp.log" 2>&1 || {
    echo "allreduce_vs_ddp: tcp_roundtrip failed:" >&2; tail -20 "$out/tcp.log" >&2; exit 1
  }
fi

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
load_at_end=$(cut -d' ' -f1 /proc/loadavg)
python3 - "$out" "$steps" "$repeats" "$warmup" "$goal" "$cpu" "$load_at_start" "$load_at_end" \
  "$out_file" <<'PY'
import glob, json, os, statistics, sys
out, steps, repeats, warmup, goal, cpu, load, load_end, out_file = sys.argv[1:]
steps, repeats, warmup, goal = int(steps), int(repeats), int(warmup), float(goal)
res = {"bench": "allreduce_vs_ddp", "cpu": cpu, "nproc": os.cpu_count(),
       "loadavg_1m_at_start": float(load),
       "loadavg_1m_at_end": float(load_end), "steps": steps, "repeats": repeats,
       "conditions": f"2 workers/ranks, 1 compute thread each, 128 per worker per step (global "
                     f"256), seed_cnn, SGD 0.01, {steps} steps per run; rounds interleaved: "
                     f"pscluster mwm, torch DDP, pscluster ps sync; medians over rounds",
       "metric": {"pscluster": "examples_per_sec of --metrics_out: trained examples / training "
                               "time, evaluation excluded, all steps counted",
                  "ddp": f"2*{steps}*128 / wall time of the {steps} steps after {warmup} "
                         f"warm-up steps and a barrier"}}

def runs(prefix):
    return [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{prefix}-*.json"),
                                               key=lambda f: int(f.rsplit("-", 1)[1][:-5]))]

def pscluster(prefix, strategy, ps):
    rs = runs(prefix)
    if not rs:
        return None
    for r in rs:  # the job that ran is the one asked for
        got = (r.get("strategy", "parameter_server"), r["cluster"]["ps"], r["cluster"]["workers"])
        if got != (strategy, ps, 2):
            sys.exit(f"allreduce_vs_ddp: {prefix}: ran {got}, expected {(strategy, ps, 2)}")
    rec = {"examples_per_s": round(statistics.median(r["examples_per_sec"] for r in rs), 1),
           "runs": [round(r["examples_per_sec"], 1) for r in rs],
           "wall_s": [round(r.get("wall_s", 0), 1) for r in rs],
           "worker_compute_s": [round(r.get("worker_compute_s", 0), 2) for r in rs],
           "worker_comm_s": [round(r.get("worker_comm_s", 0), 2) for r in rs],
           "steps": [r.get("steps") for r in rs],
           "loss_epoch1": [round(r["epochs"][0]["loss"], 4) if r.get("epochs") else None
                           for r in rs]}
    if strategy == "multi_worker_mirrored":
        rec["comm_hidden_fraction"] = [round(r.get("comm_hidden_fraction", 0), 3) for r in rs]
    return rec

table = {}
for key, prefix, strategy, ps in (("pscluster_mwm", "mwm", "multi_worker_mirrored", 0),
                                  ("pscluster_ps_sync", "ps_sync", "parameter_server", 1)):
    p = pscluster(prefix, strategy, ps)
    if p:
        table[key] = p
ddp = runs("ddp")
if ddp:
    table["torch_ddp_gloo"] = {
        "examples_per_s": round(statistics.median(r["examples_per_s"] for r in ddp), 1),
        "runs": [r["examples_per_s"] for r in ddp],
        "ms_per_step_rank0": [round(r["ranks"][0]["ms_per_step"], 1) for r in ddp],
        "loss_last_rank0": [round(r["ranks"][0]["loss_last"], 4) for r in ddp],
        "torch": ddp[0]["conditions"]["machine"]["torch"],
        "memory_format": ddp[0]["conditions"]["memory_format"],
        "malloc": ddp[0]["conditions"]["malloc"]}
res.update(table)
rate = {k: v["examples_per_s"] for k, v in table.items()}
if "pscluster_mwm" in rate and "torch_ddp_gloo" in rate:
    ratio = rate["pscluster_mwm"] / rate["torch_ddp_gloo"]
    res["ratio_mwm_vs_ddp"] = round(ratio, 3)
    res["goal"] = {"what": f"pscluster mwm >= {goal}x DDP examples/s", "ratio": round(ratio, 3),
                   "met": ratio >= goal}
else:
    res["goal"] = {"what": f"pscluster mwm >= {goal}x DDP examples/s", "ratio": None,
                   "met": None, "note": "mwm or ddp not run"}
if "pscluster_ps_sync" in rate and "torch_ddp_gloo" in rate:
    res["ratio_ps_sync_vs_ddp"] = round(rate["pscluster_ps_sync"] / rate["torch_ddp_gloo"], 3)
if "pscluster_mwm" in rate and "pscluster_ps_sync" in rate:
    res["ratio_mwm_vs_ps_sync"] = round(rate["pscluster_mwm"] / rate["pscluster_ps_sync"], 3)

if os.path.exists(f"{out}/allreduce.json"):
    ar = json.load(open(f"{out}/allreduce.json"))
    tcp = json.load(open(f"{out}/tcp.json"))
    tcp_ms = tcp["median_us"] / 1000
    res["allreduce"] = {k: ar[k] for k in ("collective", "bytes", "allreduces_timed", "median_ms",
                                           "p10_ms", "p90_ms", "mean_ms", "per_repeat_median_ms",
                                           "MB_per_s")}
    res["tcp_roundtrip"] = {"bytes_each_way": tcp["bytes_each_way"],
                            "round_trips_timed": tcp["round_trips_timed"],
                            "median_ms": round(tcp_ms, 3), "p10_ms": round(tcp["p10_us"] / 1000, 3),
                            "p90_ms": round(tcp["p90_us"] / 1000, 3),
                            "per_repeat_median_ms": [round(u / 1000, 3)
                                                     for u in tcp["per_repeat_median_us"]],
                            "GB_per_s_both_directions": tcp["GB_per_s_both_directions"]}
    res["ratio_allreduce_ms_vs_tcp_roundtrip_ms"] = round(ar["median_ms"] / tcp_ms, 3)

text = json.dumps(res)
with open(out_file, "w") as f:
    f.write(text + "\n")
print(text)
g = res["goal"]
if g["met"] is not None:
    print(f"goal: {g['what']}: {'met' if g['met'] else 'NOT met'} ({g['ratio']}x)", file=sys.stderr)
PY
