#!/usr/bin/env bash
# bench/click_through.sh: issue 38's click-through job, pscluster against
# TensorFlow 2.21's ParameterServerStrategy in the same run, interleaved.
#
# Data and model: bench/ctr_data.py (26 categorical features with Zipf ids
# and 13 dense ones, a label that depends on both; a DLRM of 26 tables of
# --rows rows in all by a harmonic rule, dim 16, bottom MLP 13->64->16,
# Dot(axes=(2, 2)) of the 27 rows, top MLP 64->1; binary cross-entropy,
# Adagrad lr 0.01). Async, 2 ps and 2 workers of 512 examples per step, one
# compute thread each, every process in its own network namespace of
# tests/netsim/testbed.sh (5 hosts; --rate per link, none by default).
#
# pscluster: the chief, 2 ps_server and 2 worker processes with the cluster
# token, tables trained by rows; --steps steps of 1,024 (512 per worker).
# TF PSS: bench/ctr_tf_pss.py, 40 warm-up steps then 2 x --steps timed
# scheduled steps of 512 (the same examples).
#
# Measured, per system and --rows: examples/s (pscluster: its result's
# training window; TF: the timed window), the bytes on the wire per worker
# step (the sum of every host's eth0 tx counter; TF: over its timed window;
# pscluster: the difference between a run of 2 x --steps and one of
# --steps over the extra steps, so that startup and the final evaluation
# and digest, which reads every table once, are not counted), and each
# process's peak RSS (pscluster: GNU time's maximum RSS of the daemon, the
# 2 x --steps run; TF: VmHWM before its tasks end). Prints one JSON object
# with the CPU named, and the goals: pscluster >= 3x TF's examples/s,
# workers' peak RSS < 400 MiB and within 10% between the smallest and the
# largest --rows, the whole cluster's peak RSS below TF's.
#
# Needs root (CAP_NET_ADMIN: exits 77 without) and GNU time.
# --tfrecord: pscluster reads the data as gzip TFRecord shards instead of
# the .npz (`pscluster data convert ctr.npz DIR --shards=8
# --compression=gzip`, read=stream: each worker streams its shards).
#
# Usage: bash bench/click_through.sh [--rows=2000000,20000000] [--steps=300]
#          [--repeats=N] [--rate=none] [--no_tf] [--tfrecord]
#   (BUILD_DIR, default build; TF_VENV, default ~/.cache/pscluster-bench/tf-2.21, made here
#    from PyPI when missing: tensorflow-cpu 2.21 and tf-keras 2.21, which also bring numpy and
#    Keras 3 for bench/ctr_data.py)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
bin=$(cd "$BUILD_DIR/bin" && pwd)
TF_VENV=${TF_VENV:-$HOME/.cache/pscluster-bench/tf-2.21}
tb="$root/tests/netsim/testbed.sh"
rows_list="2000000,20000000"
steps=300
repeats=1
rate=none
tf=1
tfrecord=0
for a in "$@"; do
  case "$a" in
    --rows=*) rows_list=${a#--rows=} ;;
    --steps=*) steps=${a#--steps=} ;;
    --repeats=*) repeats=${a#--repeats=} ;;
    --rate=*) rate=${a#--rate=} ;;
    --no_tf) tf=0 ;;
    --tfrecord) tfrecord=1 ;;
    *) echo "click_through: unknown argument $a" >&2; exit 2 ;;
  esac
done
[[ "$steps" =~ ^[0-9]+$ ]] && ((steps >= 20)) || { echo "click_through: --steps must be >= 20" >&2; exit 2; }
[[ "$repeats" =~ ^[0-9]+$ ]] && ((repeats >= 1)) || { echo "click_through: --repeats must be >= 1" >&2; exit 2; }
for r in ${rows_list//,/ }; do
  [[ "$r" =~ ^[0-9]+$ ]] && ((r >= 1000 && r <= 400000000)) ||
    { echo "click_through: --rows takes counts in [1000, 4e8]" >&2; exit 2; }
done
[[ -x /usr/bin/time ]] || { echo "click_through: needs GNU time (apt-get install time)" >&2; exit 77; }
bash "$tb" check || exit $?

name="ct$$"
out=$(mktemp -d /tmp/click_through.XXXXXX)
keep_var=PSC_BENCH_KEEP
source "$root/bench/testbed_cluster.sh"
# numpy and Keras 3 (bench/ctr_data.py) come with TensorFlow.
ensure_tf_venv "$TF_VENV"

# start under GNU time, which writes the daemon's maximum RSS (KiB) to
# $out/TAG.rss when it exits.
start_timed() {
  START_WRAP=(/usr/bin/time -f %M -o "$out/$2.rss")
  start "$@"
  START_WRAP=()
}

# The bytes every host's eth0 has sent, summed.
tx_total() {
  local sum=0 b
  for h in 0 1 2 3 4; do
    b=$(ip -n "psc-$name-h$h" -s -j link show dev eth0 |
      "$TF_VENV/bin/python3" -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])')
    sum=$((sum + b))
  done
  echo "$sum"
}

# run_pscluster ROWS STEPS TAG: one job; $out/TAG.json (the result) and
# $out/TAG.bytes (the hosts' bytes sent during the whole job).
run_pscluster() {
  local rows=$1 n=$2 tag=$3 data="$out/data-$1"
  local source="$data/ctr.npz"
  if ((tfrecord)); then
    source="tfrecord:train=$data/shards/train-*,validation=$data/shards/validation-*,test=$data/shards/test-*,spec=$data/shards/spec.json,read=stream"
  fi
  local cluster="{\"ps\": [\"$ps0:2222\", \"$ps1:2222\"], \"worker\": [\"$w0:2222\", \"$w1:2222\"], \"chief\": [\"$chief:2222\"]}"
  cfg() { echo "{\"cluster\": $cluster, \"task\": {\"type\": \"$1\", \"index\": $2}}"; }
  local before
  before=$(tx_total)
  start_timed 0 "$tag-ps0" "$(cfg ps 0)" ps_server
  start_timed 1 "$tag-ps1" "$(cfg ps 1)" ps_server
  start_timed 2 "$tag-w0" "$(cfg worker 0)" worker
  start_timed 3 "$tag-w1" "$(cfg worker 1)" worker
  start_timed 4 "$tag-chief" "$(cfg chief 0)" chief --startup_timeout=120s \
    --model="$data/ctr_model.json" --data="$source" --nostandardize --mode=async \
    --batch_size=1024 --epochs=1 --steps_per_epoch="$n" --intra_op_threads=1 --eval_threads=1 \
    --metrics_out="$out/$tag.json"
  local t0=$SECONDS limit=$((n + 600))
  # Every task ends when the job does (the chief shuts them down).
  while ((SECONDS - t0 < limit)); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null && alive=1; done
    ((alive)) || break
    sleep 0.2
  done
  if [[ ! -s "$out/$tag.json" ]]; then
    echo "click_through: pscluster $tag failed:" >&2
    tail -20 "$out/$tag-chief.log" >&2
    exit 1
  fi
  kill_all
  echo $(($(tx_total) - before)) > "$out/$tag.bytes"
  echo "click_through: $tag $("$TF_VENV/bin/python3" -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["examples_per_sec"], 1), "examples/s")' "$out/$tag.json")" >&2
}

# run_tf ROWS TAG
run_tf() {
  local rows=$1 tag=$2
  PSC_TF_CLUSTER="{\"ps\": [\"$ps0:2223\", \"$ps1:2223\"], \"worker\": [\"$w0:2223\", \"$w1:2223\"], \"chief\": [\"$chief:2223\"]}" \
    PSC_TF_HOSTS='{"ps:0": 0, "ps:1": 1, "worker:0": 2, "worker:1": 3}' PSC_TESTBED=$name \
    timeout $((steps * 4 + 900)) bash "$tb" exec "$name" 4 "$TF_VENV/bin/python3" \
    "$root/bench/ctr_tf_pss.py" --data "$out/data-$rows" --steps $((2 * steps)) \
    --out "$out/$tag.json" > "$out/$tag.log" 2>&1 || {
    echo "click_through: TF PSS $tag failed:" >&2; tail -20 "$out/$tag.log" >&2; exit 1
  }
  echo "click_through: $tag $("$TF_VENV/bin/python3" -c 'import json,sys; print(json.load(open(sys.argv[1]))["examples_per_s"], "examples/s")' "$out/$tag.json")" >&2
}

for rows in ${rows_list//,/ }; do
  echo "click_through: making the data of $rows rows..." >&2
  "$TF_VENV/bin/python3" "$root/bench/ctr_data.py" --rows "$rows" --train $((2 * steps * 1024 + 20480)) \
    --out "$out/data-$rows" > "$out/data-$rows.log" 2>&1 ||
    { tail -5 "$out/data-$rows.log" >&2; exit 1; }
  if ((tfrecord)); then
    "$bin/pscluster" data convert "$out/data-$rows/ctr.npz" "$out/data-$rows/shards" --shards=8 \
      --compression=gzip >> "$out/data-$rows.log" 2>&1 || { tail -5 "$out/data-$rows.log" >&2; exit 1; }
  fi
done

bash "$tb" up "$name" 5 "$rate"
for rep in $(seq "$repeats"); do
  for rows in ${rows_list//,/ }; do
    run_pscluster "$rows" "$steps" "ps-$rows-short-$rep"
    run_pscluster "$rows" $((2 * steps)) "ps-$rows-long-$rep"
    if [[ $tf == 1 ]]; then run_tf "$rows" "tf-$rows-$rep"; fi
  done
done
bash "$tb" down "$name"

PSC_CT_TFRECORD=$tfrecord "$TF_VENV/bin/python3" - "$out" "$steps" "$rows_list" "$rate" <<'PY'
import glob, json, os, statistics, sys
out, steps, rows_list, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
med = lambda xs: round(statistics.median(xs), 1) if xs else None
res = {"bench": "click_through", "cpu": cpu, "nproc": os.cpu_count(),
       "conditions": f"async, 2 ps + 2 workers x 1 compute thread, 512 per worker per step, each "
                     f"process in its own network namespace (link rate {rate}); pscluster "
                     f"{2 * steps} steps of 1,024, TF PSS 40 + {2 * steps} scheduled steps of 512; "
                     f"medians over repeats",
       "pscluster_data": "tfrecord shards, streamed" if os.environ.get("PSC_CT_TFRECORD") == "1" else "npz",
       "pscluster": {}, "tf_pss": {}}
for rows in rows_list:
    reps = sorted(glob.glob(f"{out}/ps-{rows}-long-*.json"))
    p = {"examples_per_s": [], "bytes_per_worker_step": [], "peak_rss_mib": {}}
    for f in reps:
        rep = f.rsplit("-", 1)[1][:-5]
        r = json.load(open(f))
        p["examples_per_s"].append(round(r["examples_per_sec"], 1))
        long_b = int(open(f"{out}/ps-{rows}-long-{rep}.bytes").read())
        short_b = int(open(f"{out}/ps-{rows}-short-{rep}.bytes").read())
        p["bytes_per_worker_step"].append(round((long_b - short_b) / (2 * steps)))
        for task in ("chief", "ps0", "ps1", "w0", "w1"):
            kib = int(open(f"{out}/ps-{rows}-long-{rep}-{task}.rss").read().split()[-1])
            p["peak_rss_mib"].setdefault(task, []).append(round(kib / 1024, 1))
        p["test_loss"] = round(r["test_loss"], 4)
    p["examples_per_s_median"] = med(p["examples_per_s"])
    p["bytes_per_worker_step_median"] = med(p["bytes_per_worker_step"])
    p["peak_rss_mib_max"] = {k: max(v) for k, v in p["peak_rss_mib"].items()}
    p["cluster_peak_rss_mib"] = round(sum(p["peak_rss_mib_max"].values()), 1)
    res["pscluster"][rows] = p
    t = {"examples_per_s": [], "bytes_per_worker_step": [], "peak_rss_mib": {}}
    for f in sorted(glob.glob(f"{out}/tf-{rows}-*.json")):
        r = json.load(open(f))
        t["examples_per_s"].append(r["examples_per_s"])
        t["bytes_per_worker_step"].append(r.get("bytes_per_worker_step"))
        for task, kib in r["peak_rss_kib"].items():
            t["peak_rss_mib"].setdefault(task, []).append(round(kib / 1024, 1))
        t["last_50_steps_loss"] = r["last_50_steps_loss"]
    if t["examples_per_s"]:
        t["examples_per_s_median"] = med(t["examples_per_s"])
        t["bytes_per_worker_step_median"] = med([b for b in t["bytes_per_worker_step"] if b])
        t["peak_rss_mib_max"] = {k: max(v) for k, v in t["peak_rss_mib"].items()}
        t["cluster_peak_rss_mib"] = round(sum(t["peak_rss_mib_max"].values()), 1)
        res["tf_pss"][rows] = t
goals = {}
for rows in rows_list:
    p, t = res["pscluster"][rows], res["tf_pss"].get(rows)
    if t:
        ratio = round(p["examples_per_s_median"] / t["examples_per_s_median"], 2)
        goals[f"{rows} rows: examples/s pscluster / TF (goal >= 3)"] = ratio
        goals[f"{rows} rows: cluster peak RSS pscluster / TF (goal < 1)"] = round(
            p["cluster_peak_rss_mib"] / t["cluster_peak_rss_mib"], 3)
        goals[f"{rows} rows: bytes per worker step pscluster / TF"] = round(
            p["bytes_per_worker_step_median"] / t["bytes_per_worker_step_median"], 3)
    goals[f"{rows} rows: workers' peak RSS MiB (goal < 400)"] = max(
        p["peak_rss_mib_max"]["w0"], p["peak_rss_mib_max"]["w1"])
lo, hi = rows_list[0], rows_list[-1]
if lo != hi:
    w = lambda r: max(res["pscluster"][r]["peak_rss_mib_max"]["w0"],
                      res["pscluster"][r]["peak_rss_mib_max"]["w1"])
    goals[f"workers' peak RSS {hi} / {lo} rows (goal within 1.10)"] = round(w(hi) / w(lo), 3)
res["goals"] = goals
print(json.dumps(res, indent=1))
PY
