#!/usr/bin/env bash
# bench/netsim.sh: the reference job across simulated hosts (tests/netsim/
# testbed.sh: one network namespace per task on a bridge, each host's link
# limited with tbf in both directions), against TensorFlow's
# ParameterServerStrategy on the same hosts, links and run.
#
# One testbed of 5 hosts (ps 0, ps 1, worker 0, worker 1, the chief); per
# link rate (--rates: none = unlimited veth, e.g. 10gbit, 1gbit), for
# every --ps count, --security (plain; tls: mutual TLS on gRPC and the data
# channel, with certificates made here by openssl for the hosts' addresses)
# --wire dtype (float32, bfloat16) and --overlap (off; on: --push_overlap,
# each bucket pushed while the backward pass runs) and --topk (0: dense; R:
# --topk_ratio=R, top-k gradients with error feedback), pscluster trains the reference CNN:
# 2 workers, one compute thread each, --batch_size=256 (128 per worker per
# step), --steps steps, --mode (sync by default), with the cluster token.
# Then, unless --no_tf, TF PSS (bench/tf_pss_netsim.py running
# ../shared/anchors/tf_pss.py's code; 128 per worker per step, 2*steps
# scheduled steps, the same examples) for every --ps count. Each of the
# --repeats rounds runs every rate in that order (the links change rate
# between runs). Prints one JSON object: per
# rate and configuration the examples/s (median over repeats), the
# workers' compute and communication seconds, and each run's figures, the
# loss against the unlimited link, and pscluster / TF PSS per rate.
#
# Needs root (CAP_NET_ADMIN); exits 77 with the reason without it.
# Usage: bash bench/netsim.sh [--steps=N] [--rates=none,10gbit,1gbit] [--ps=1,2]
#          [--security=plain,tls] [--wire=float32,bfloat16] [--overlap=off,on] [--topk=0,0.01]
#          [--mode=sync]
#          [--repeats=N] [--no_tf]
#   (BUILD_DIR, default build; TF_VENV as bench/cluster_vs_tf_pss.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
bin=$(cd "$BUILD_DIR/bin" && pwd)
TF_VENV=${TF_VENV:-$HOME/.cache/pscluster-bench/tf-2.21}
tb="$root/tests/netsim/testbed.sh"
steps=150
rates="none,10gbit,1gbit"
ps_counts="1,2"
security="plain,tls"
wires="float32,bfloat16"
overlaps="off"
topks="0"
mode=sync
repeats=1
tf=1
for a in "$@"; do
  case "$a" in
    --steps=*) steps=${a#--steps=} ;;
    --rates=*) rates=${a#--rates=} ;;
    --ps=*) ps_counts=${a#--ps=} ;;
    --security=*) security=${a#--security=} ;;
    --wire=*) wires=${a#--wire=} ;;
    --overlap=*) overlaps=${a#--overlap=} ;;
    --topk=*) topks=${a#--topk=} ;;
    --mode=*) mode=${a#--mode=} ;;
    --repeats=*) repeats=${a#--repeats=} ;;
    --no_tf) tf=0 ;;
    *) echo "netsim: unknown argument $a" >&2; exit 2 ;;
  esac
done
[[ "$steps" =~ ^[0-9]+$ ]] && ((steps >= 10)) || { echo "netsim: --steps must be >= 10" >&2; exit 2; }
[[ "$repeats" =~ ^[0-9]+$ ]] && ((repeats >= 1)) || { echo "netsim: --repeats must be >= 1" >&2; exit 2; }
for p in ${ps_counts//,/ }; do
  [[ "$p" == 1 || "$p" == 2 ]] || { echo "netsim: --ps takes 1 and 2" >&2; exit 2; }
done
for s in ${security//,/ }; do
  [[ "$s" == plain || "$s" == tls ]] || { echo "netsim: --security takes plain and tls" >&2; exit 2; }
done
for o in ${overlaps//,/ }; do
  [[ "$o" == off || "$o" == on ]] || { echo "netsim: --overlap takes off and on" >&2; exit 2; }
done
for k in ${topks//,/ }; do
  [[ "$k" =~ ^(0|0?\.[0-9]+)$ ]] || { echo "netsim: --topk takes 0 and ratios in (0, 1)" >&2; exit 2; }
done
bash "$tb" check || exit $?

name="ns$$"
out=$(mktemp -d /tmp/netsim.XXXXXX)
keep_var=PSC_NETSIM_KEEP
source "$root/bench/testbed_cluster.sh"
if [[ $tf == 1 ]]; then ensure_tf_venv "$TF_VENV"; fi

# One CA, and one certificate for every daemon naming all five addresses
# (each daemon checks its peer's certificate against the address it dialled).
make_certs() {
  local d="$out/tls" san="IP:$ps0,IP:$ps1,IP:$w0,IP:$w1,IP:$chief"
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=netsim CA" -keyout "$d/ca.key" -out "$d/ca.pem" 2> /dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=netsim" \
    -keyout "$d/key.pem" -out "$d/req.csr" 2> /dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" > "$d/ext.cnf"
  openssl x509 -req -in "$d/req.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
    -days 2 -extfile "$d/ext.cnf" -out "$d/cert.pem" 2> /dev/null
}
make_certs

# run_pscluster RATE NPS SECURITY WIRE OVERLAP TOPK REPEAT
run_pscluster() {
  local rate=$1 nps=$2 sec=$3 wire=$4 ov=$5 topk=$6 rep=$7
  local tag="ps-$rate-$nps-$sec-$wire-$ov-k$topk-$rep" ps_list="\"$ps0:2222\""
  ((nps == 2)) && ps_list="$ps_list, \"$ps1:2222\""
  local cluster="{\"ps\": [$ps_list], \"worker\": [\"$w0:2222\", \"$w1:2222\"], \"chief\": [\"$chief:2222\"]}"
  cfg() { echo "{\"cluster\": $cluster, \"task\": {\"type\": \"$1\", \"index\": $2}}"; }
  local tls=()
  [[ $sec == tls ]] && tls=(--tls_ca="$out/tls/ca.pem" --tls_cert="$out/tls/cert.pem"
    --tls_key="$out/tls/key.pem")
  for ((i = 0; i < nps; ++i)); do start "$i" "$tag-ps$i" "$(cfg ps $i)" ps_server "${tls[@]}"; done
  start 2 "$tag-w0" "$(cfg worker 0)" worker "${tls[@]}"
  start 3 "$tag-w1" "$(cfg worker 1)" worker "${tls[@]}"
  start 4 "$tag-chief" "$(cfg chief 0)" chief "${tls[@]}" --startup_timeout=120s \
    --mode="$mode" --batch_size=256 --epochs=1 --steps_per_epoch="$steps" \
    --intra_op_threads=1 --wire_dtype="$wire" --push_overlap=$([[ $ov == on ]] && echo true || echo false) \
    --topk_ratio="$topk" \
    --metrics_out="$out/$tag.json"
  local chief_pid=${pids[-1]} limit=$((steps * 4 + 300)) t0=$SECONDS
  while kill -0 "$chief_pid" 2> /dev/null && ((SECONDS - t0 < limit)); do sleep 1; done
  if kill -0 "$chief_pid" 2> /dev/null || ! wait "$chief_pid"; then
    echo "netsim: pscluster $tag failed:" >&2
    tail -20 "$out/$tag-chief.log" >&2
    exit 1
  fi
  kill_all
  echo "netsim: $tag $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(round(r["examples_per_sec"],1), "examples/s")' "$out/$tag.json")" >&2
}

# run_tf RATE NPS REPEAT
run_tf() {
  local rate=$1 nps=$2 rep=$3 tag="tf-$1-$2-$3" ps_list="\"$ps0:2223\""
  ((nps == 2)) && ps_list="$ps_list, \"$ps1:2223\""
  local hosts="{\"ps:0\": 0, \"ps:1\": 1, \"worker:0\": 2, \"worker:1\": 3}"
  PSC_TF_CLUSTER="{\"ps\": [$ps_list], \"worker\": [\"$w0:2223\", \"$w1:2223\"], \"chief\": [\"$chief:2223\"]}" \
    PSC_TF_HOSTS=$hosts PSC_TESTBED=$name timeout $((steps * 6 + 300)) \
    bash "$tb" exec "$name" 4 "$TF_VENV/bin/python3" "$root/bench/tf_pss_netsim.py" \
    --workers 2 --ps "$nps" --steps $((2 * steps)) --out "$out/$tag.json" > "$out/$tag.log" 2>&1 || {
    echo "netsim: TF PSS $tag failed:" >&2; tail -20 "$out/$tag.log" >&2; exit 1
  }
  echo "netsim: $tag $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["aggregate_examples_per_s_median"], "examples/s")' "$out/$tag.json")" >&2
}

# One testbed; its links change rate between runs, so every repeat goes
# through every rate (this machine's speed drifts: interleaving spreads it).
bash "$tb" up "$name" 5 none
for rep in $(seq "$repeats"); do
  for rate in ${rates//,/ }; do
    bash "$tb" rate "$name" 5 "$rate"
    for nps in ${ps_counts//,/ }; do
      for sec in ${security//,/ }; do
        for wire in ${wires//,/ }; do
          for ov in ${overlaps//,/ }; do
            for k in ${topks//,/ }; do run_pscluster "$rate" "$nps" "$sec" "$wire" "$ov" "$k" "$rep"; done
          done
        done
      done
      if [[ $tf == 1 ]]; then run_tf "$rate" "$nps" "$rep"; fi
    done
  done
done
bash "$tb" down "$name"

python3 - "$out" "$steps" "$mode" <<'PY'
import collections, glob, json, os, re, statistics, sys
out, steps, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
res = {"bench": "netsim", "cpu": cpu, "nproc": os.cpu_count(),
       "conditions": f"5 network namespaces on a bridge, tbf per host link both ways; 2 workers x 1 "
                     f"compute thread, 128 per worker per step, {steps} steps (TF PSS: {2 * steps} "
                     f"scheduled steps), pscluster --mode={mode}; medians over repeats",
       "pscluster": {}, "tf_pss": {}}
runs = collections.defaultdict(list)
for f in glob.glob(f"{out}/ps-*.json"):
    rate, nps, sec, wire, ov, topk, rep = re.match(
        r".*/ps-(.+)-(\d)-(plain|tls)-(\w+)-(off|on)-k([\d.]+)-(\d+)\.json", f).groups()
    config = wire + ("+overlap" if ov == "on" else "") + ("" if topk == "0" else "+topk" + topk)
    runs[(rate, nps, sec, config)].append(json.load(open(f)))
for (rate, nps, sec, wire), rs in sorted(runs.items()):
    res["pscluster"][f"{rate} {nps}ps {sec} {wire}"] = {
        "examples_per_s": round(statistics.median(r["examples_per_sec"] for r in rs), 1),
        "runs": [round(r["examples_per_sec"], 1) for r in rs],
        "worker_compute_s": [round(r.get("worker_compute_s", 0), 2) for r in rs],
        "worker_comm_s": [round(r.get("worker_comm_s", 0), 2) for r in rs],
        "comm_s": [round(r.get("comm_s", 0), 2) for r in rs],
        "comm_hidden_fraction": [round(r.get("comm_hidden_fraction", 0), 3) for r in rs]}
tf = collections.defaultdict(list)
for f in glob.glob(f"{out}/tf-*.json"):
    rate, nps, rep = re.match(r".*/tf-(.+)-(\d)-(\d+)\.json", f).groups()
    tf[(rate, nps)].append(json.load(open(f))["aggregate_examples_per_s_median"])
for (rate, nps), rs in sorted(tf.items()):
    res["tf_pss"][f"{rate} {nps}ps"] = {"examples_per_s": statistics.median(rs), "runs": rs}
ratios = {}
for key, v in res["pscluster"].items():
    rate, nps, sec, wire = key.split()
    base = res["pscluster"].get(f"none {nps} {sec} {wire}")
    if base and rate != "none":
        ratios[f"{key} / unlimited"] = round(v["examples_per_s"] / base["examples_per_s"], 3)
    peer = res["tf_pss"].get(f"{rate} {nps}")
    if peer:
        ratios[f"{key} / tf_pss {rate} {nps}"] = round(v["examples_per_s"] / peer["examples_per_s"], 3)
res["ratios"] = ratios
print(json.dumps(res, indent=1))
PY
