#!/usr/bin/env bash
# The cluster across hosts: 1 ps, 2 workers and the chief, each in a network
# namespace of its own with its own address on a bridge (testbed.sh, 1 Gbit/s
# links), with the cluster token (the addresses are not loopback). Worker 1
# is killed with SIGKILL while it trains; the chief declares it lost
# (heartbeats), the job completes on worker 0, and the result file counts
# the loss. The one test whose addresses are not 127.0.0.1: they exist only
# inside the namespaces it makes and removes. Needs root (CAP_NET_ADMIN):
# exits 77 (skipped) with the reason without it.
# Usage: multihost_test.sh BIN_DIR
set -euo pipefail
bin=$(cd "${1:?usage: multihost_test.sh BIN_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tb="$here/testbed.sh"
bash "$tb" check || exit $?

name="mh$$"
tmp=$(mktemp -d /tmp/multihost.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null || true; done
  bash "$tb" down "$name"
  if [[ "${PSC_MULTIHOST_KEEP:-}" != 1 ]]; then rm -rf "$tmp"; fi
}
trap cleanup EXIT
fail() {
  echo "multihost: FAIL: $*" >&2
  for f in "$tmp"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done
  exit 1
}

bash "$tb" up "$name" 4 1gbit
ps=$(bash "$tb" addr "$name" 0)
w0=$(bash "$tb" addr "$name" 1)
w1=$(bash "$tb" addr "$name" 2)
chief=$(bash "$tb" addr "$name" 3)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/token"
chmod 0600 "$tmp/token"
cluster="{\"ps\": [\"$ps:2222\"], \"worker\": [\"$w0:2222\", \"$w1:2222\"], \"chief\": [\"$chief:2222\"]}"
tf_config() { echo "{\"cluster\": $cluster, \"task\": {\"type\": \"$1\", \"index\": $2}}"; }

# start HOST LOG BINARY TYPE INDEX [FLAGS...]: a daemon in host HOST's namespace.
start() {
  local host=$1 log=$2 binary=$3 type=$4 index=$5
  shift 5
  TF_CONFIG=$(tf_config "$type" "$index") bash "$tb" exec "$name" "$host" \
    "$bin/$binary" --auth_token_file="$tmp/token" "$@" > "$tmp/$log.log" 2>&1 &
  pids+=($!)
}
# metric HOST PORT NAME: a sample's value from HOST's /metrics (bash's /dev/tcp
# inside the namespace; empty when it does not answer).
metric() {
  bash "$tb" exec "$name" "$1" timeout 5 bash -c \
    "exec 3<>/dev/tcp/$2/$3 && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3" \
    2> /dev/null | awk -v n="$4" '$1 ~ "^"n"({|$)" {print $2; exit}' || true
}

start 0 ps ps_server ps 0
start 1 worker0 worker worker 0 --heartbeat_interval=500ms
start 2 worker1 worker worker 1 --heartbeat_interval=500ms --metrics_port=9464
worker1_pid=${pids[-1]}
# The reference CNN, one thread per worker, small units: a few seconds per
# unit, so that worker 1 dies inside the job.
start 3 chief chief chief 0 --startup_timeout=60s --heartbeat_timeout=3s --unit_steps=4 \
  --epochs=2 --steps_per_epoch=24 --max_train_examples=3072 --batch_size=64 \
  --intra_op_threads=1 --metrics_out="$tmp/result.json"
chief_pid=${pids[-1]}

# Kill worker 1 once it has pushed 3 steps (polled, 120 s at most).
for ((i = 0; i < 600; ++i)); do
  steps=$(metric 2 "$w1" 9464 pscluster_worker_steps_total) || true
  [[ -n "$steps" ]] && awk -v s="$steps" 'BEGIN {exit !(s >= 3)}' && break
  kill -0 "$chief_pid" 2> /dev/null || fail "the chief exited before worker 1 trained"
  sleep 0.2
done
[[ -n "${steps:-}" ]] && awk -v s="$steps" 'BEGIN {exit !(s >= 3)}' ||
  fail "worker 1 did not train 3 steps within 120 s"
# `ip netns exec` execs the command in place: the job's pid is the worker's.
victim=$worker1_pid
[[ "$(cat "/proc/$victim/comm" 2> /dev/null)" == worker ]] || fail "pid $victim is not the worker"
kill -9 "$victim"
echo "multihost: killed worker 1 (pid $victim) after $steps steps"

# The chief finishes within 240 s and exits 0.
for ((i = 0; i < 1200; ++i)); do
  kill -0 "$chief_pid" 2> /dev/null || break
  sleep 0.2
done
kill -0 "$chief_pid" 2> /dev/null && fail "the chief did not finish within 240 s"
wait "$chief_pid" && rc=0 || rc=$?
[[ $rc -eq 0 ]] || fail "the chief exited $rc"
python3 - "$tmp/result.json" <<'PY' || fail "the result file"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["workers_lost"] >= 1, r["workers_lost"]
assert r["steps"] == 48, r["steps"]
assert r["test_accuracy"] > 0.2, r["test_accuracy"]  # chance: 0.1
print("multihost: %d steps, workers_lost %d, test_accuracy %.4f" %
      (r["steps"], r["workers_lost"], r["test_accuracy"]))
PY
grep -q "serving on $chief:2222" "$tmp/chief.log" || fail "the chief did not serve on $chief"
echo "multihost: OK (ps $ps, workers $w0 $w1, chief $chief; 1 Gbit/s links)"
