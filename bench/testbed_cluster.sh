# bench/testbed_cluster.sh: sourced by the benchmarks that run a cluster on
# a tests/netsim/testbed.sh testbed of 5 hosts (ps 0, ps 1, worker 0,
# worker 1, the chief): bench/netsim.sh and bench/click_through.sh.
#
# Before sourcing, set `name` (the testbed's), `out` (a fresh directory),
# `tb` (testbed.sh), `bin` (the binaries) and `keep_var` (the environment
# variable that keeps `out`). Defines:
#   ensure_tf_venv VENV   makes VENV with TensorFlow 2.21 and tf-keras 2.21
#                         from PyPI unless it imports them already
#   start HOST TAG TF_CONFIG BINARY [FLAGS...]
#                         runs BINARY in HOST's namespace with the cluster
#                         token, its output in $out/TAG.log; with
#                         START_WRAP set (an array), under that command
#   kill_all              ends every process `start` started
#   ps0 ps1 w0 w1 chief   the hosts' addresses
# and an EXIT trap that kills them, takes the testbed down and removes
# `out`.

ensure_tf_venv() {
  local venv=$1
  "$venv/bin/python3" -c 'import tensorflow, tf_keras, numpy' 2> /dev/null && return 0
  echo "$(basename "$0"): creating $venv (TensorFlow 2.21 from PyPI)..." >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'tensorflow-cpu==2.21.*' 'tf-keras==2.21.*'
}

pids=()
kill_all() {
  # The daemons (their command line starts with $bin and names the token
  # file) first, so that a wrapper (GNU time) still writes what it
  # measured; then whatever is left.
  local daemons="^$bin/.* --auth_token_file=$out/token"
  pkill -TERM -f -- "$daemons" 2> /dev/null || true
  local t0=$SECONDS
  while pgrep -f -- "$daemons" > /dev/null && ((SECONDS - t0 < 10)); do sleep 0.1; done
  pkill -9 -f -- "--auth_token_file=$out/token" 2> /dev/null || true
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null || true; done
  pids=()
}
_testbed_cleanup() {
  kill_all
  bash "$tb" down "$name"
  [[ "${!keep_var:-}" == 1 ]] || rm -rf "$out"
}
trap _testbed_cleanup EXIT

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$out/token"
chmod 0600 "$out/token"
# The hosts' addresses are the same in every testbed of this name.
_addr() { bash "$tb" addr "$name" "$1"; }
ps0=$(_addr 0) ps1=$(_addr 1) w0=$(_addr 2) w1=$(_addr 3) chief=$(_addr 4)

START_WRAP=()
start() {
  local host=$1 tag=$2 config=$3 binary=$4
  shift 4
  TF_CONFIG=$config bash "$tb" exec "$name" "$host" "${START_WRAP[@]}" "$bin/$binary" \
    --auth_token_file="$out/token" "$@" > "$out/$tag.log" 2>&1 &
  pids+=($!)
}
