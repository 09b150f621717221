#!/usr/bin/env bash
# bench/cluster_vs_tf_pss.sh: pscluster against TensorFlow's
# ParameterServerStrategy on the reference job, in the same run, interleaved.
#
# Each of --repeats rounds runs, one after another: pscluster async, pscluster
# sync (1 ps + 2 workers, one compute thread each, --batch_size=256, i.e. 128
# per worker per step, --steps_per_epoch=N), then TF 2.21 PSS
# (../shared/anchors/tf_pss.py: 1 coordinator + 1 ps + 2 workers, 1 intra-op
# thread each, 128 per worker, 2N scheduled steps, the same 256*N examples).
# PSS is asynchronous, so both pscluster modes are compared with it. Reports
# the medians over the rounds, the ratios of the medians, each run, and the
# peak RSS of every process (pscluster: VmHWM sampled from /proc every 0.2 s;
# TF: what tf_pss.py reads at its end). TensorFlow comes from the virtual
# environment at TF_VENV (default ~/.cache/pscluster-bench/tf-2.21), created
# with pip if absent. Prints one JSON object.
#
# Usage: bash bench/cluster_vs_tf_pss.sh [--steps=N] [--repeats=N] [--no_tf]
#   (BUILD_DIR, default build; the binaries must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
TF_VENV=${TF_VENV:-$HOME/.cache/pscluster-bench/tf-2.21}
steps=200
repeats=3
tf=1
for a in "$@"; do
  case "$a" in
    --steps=*) steps=${a#--steps=} ;;
    --repeats=*) repeats=${a#--repeats=} ;;
    --no_tf) tf=0 ;;
    *) echo "cluster_vs_tf_pss: unknown argument $a" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/cluster_vs_tf_pss.XXXXXX)
sampler=
cleanup() {
  [[ -n $sampler ]] && kill "$sampler" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT

if [[ $tf == 1 ]] && ! "$TF_VENV/bin/python3" -c 'import tensorflow' 2>/dev/null; then
  echo "cluster_vs_tf_pss: creating $TF_VENV (TensorFlow 2.21 from PyPI)..." >&2
  mkdir -p "$(dirname "$TF_VENV")"
  python3 -m venv "$TF_VENV"
  "$TF_VENV/bin/pip" install -q 'tensorflow-cpu==2.21.*' 'tf-keras==2.21.*'
fi

# Peak RSS (VmHWM, KiB) of the pscluster daemons under the launcher with pid
# $1, per program name, into $2, until the launcher exits.
sample_rss() {
  local launcher=$1 file=$2
  while kill -0 "$launcher" 2>/dev/null; do
    for pid in $(pgrep -P "$launcher" 2>/dev/null); do
      local name hwm
      name=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
      hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null) || continue
      [[ -n $hwm ]] && echo "$name $pid $hwm" >> "$file"
    done
    sleep 0.2
  done
}

run_pscluster() {  # mode repeat
  local file="$out/ps-$1-$2.json"
  "$BUILD_DIR/bin/pscluster" launch --ps=1 --workers=2 -- \
    --mode="$1" --batch_size=256 --epochs=1 --steps_per_epoch="$steps" --intra_op_threads=1 \
    --metrics_out="$file" > "$out/ps-$1-$2.log" 2>&1 &
  local launcher=$!
  sample_rss "$launcher" "$out/rss-$1-$2.txt" &
  sampler=$!
  if ! wait "$launcher"; then
    echo "cluster_vs_tf_pss: pscluster $1 failed:" >&2; tail -20 "$out/ps-$1-$2.log" >&2; exit 1
  fi
  wait "$sampler" || true
  sampler=
}

run_tf() {  # repeat
  "$TF_VENV/bin/python3" ../shared/anchors/tf_pss.py --workers 2 --ps 1 --steps $((2 * steps)) \
    --out "$out/tf-$1.json" > "$out/tf-$1.log" 2>&1 || {
    echo "cluster_vs_tf_pss: TF PSS failed:" >&2; tail -20 "$out/tf-$1.log" >&2; exit 1
  }
}

for r in $(seq "$repeats"); do
  run_pscluster async "$r"
  run_pscluster sync "$r"
  [[ $tf == 1 ]] && run_tf "$r"
done

python3 - "$out" "$steps" "$repeats" <<'PY'
import collections, glob, json, os, platform, statistics, sys
out, steps, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
res = {"bench": "cluster_vs_tf_pss", "cpu": cpu, "nproc": os.cpu_count(), "repeats": repeats,
       "conditions": f"1 ps + 2 workers, 1 compute thread each, 128 per worker per step, "
                     f"{256 * steps} examples per run; rounds interleaved: pscluster async, "
                     f"pscluster sync, TF PSS; medians over rounds"}
def rss(mode):
    peak = collections.defaultdict(int)
    for f in glob.glob(f"{out}/rss-{mode}-*.txt"):
        for line in open(f):
            name, pid, kib = line.split()
            peak[(f, name, pid)] = max(peak[(f, name, pid)], int(kib))
    by_name = collections.defaultdict(int)
    for (f, name, pid), kib in peak.items():
        by_name[name] = max(by_name[name], kib)
    return {name: round(kib / 1024) for name, kib in sorted(by_name.items())}
for mode in ("async", "sync"):
    runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/ps-{mode}-*.json"))]
    res[f"pscluster_{mode}"] = {
        "examples_per_s": round(statistics.median(r["examples_per_sec"] for r in runs), 1),
        "runs": [round(r["examples_per_sec"], 1) for r in runs],
        "worker_compute_s": [round(r.get("worker_compute_s", 0), 2) for r in runs],
        "worker_comm_s": [round(r.get("worker_comm_s", 0), 2) for r in runs],
        "peak_rss_mib": rss(mode)}
tf_runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/tf-*.json"))]
if tf_runs:
    rates = [t["aggregate_examples_per_s_median"] for t in tf_runs]
    peer = statistics.median(rates)
    peak = collections.defaultdict(int)
    for t in tf_runs:
        for name, kib in t.get("peak_rss_kib", {}).items():
            peak[name] = max(peak[name], kib)
    res["tf_pss"] = {"examples_per_s": peer, "runs": rates,
                     "peak_rss_mib": {k: round(v / 1024) for k, v in sorted(peak.items())}}
    for mode in ("async", "sync"):
        res[f"ratio_{mode}_vs_tf_pss"] = round(res[f"pscluster_{mode}"]["examples_per_s"] / peer, 3)
else:
    res["tf_pss"] = "not run (--no_tf)"
print(json.dumps(res))
PY
