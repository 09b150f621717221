#!/usr/bin/env bash
# bench/tls_on_links.sh: what TLS costs the data channel where there is a
# link to cross. Loopback has no wire time, so there the cipher's own CPU
# time is the whole difference (build/bin/ps_dataplane --tls: 1.81-1.93x);
# on a link the encryption of one record runs while the previous ones are on
# the wire.
#
# Per --rates entry, ps_dataplane --tls (one worker, 1 ps_server, the
# reference model's 1,741,224 bytes each way; the data channel in plaintext,
# in TLS, and gRPC in TLS, repeats interleaved) runs inside a network
# namespace made for it whose loopback is limited with tbf at that rate
# (none: unlimited). The push and the pull share that one queue, so the
# "link" is half duplex: a round trip's 3.5 MB take 2.8 ms at 10 Gbit/s and
# 28 ms at 1 Gbit/s on the wire alone. Prints one JSON object: per rate the
# three medians (µs) and TLS / plaintext.
#
# Needs root (CAP_NET_ADMIN); exits 77 with the reason without it. The
# namespace is removed on exit, also on failure.
# Usage: bash bench/tls_on_links.sh [--rates=none,10gbit,1gbit] [--repeats=3] [--iters=N]
#   (BUILD_DIR, default build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
rates=none,10gbit,1gbit
repeats=3
iters=
for a in "$@"; do
  case "$a" in
    --rates=*) rates=${a#--rates=} ;;
    --repeats=*) repeats=${a#--repeats=} ;;
    --iters=*) iters=${a#--iters=} ;;
    *)
      echo "tls_on_links.sh: unknown argument '$a'" >&2
      exit 2
      ;;
  esac
done
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "tls_on_links.sh: bad --repeats '$repeats'" >&2; exit 2; }
[[ -z "$iters" || "$iters" =~ ^[1-9][0-9]*$ ]] || { echo "tls_on_links.sh: bad --iters '$iters'" >&2; exit 2; }
bench="$BUILD_DIR/bin/ps_dataplane"
[[ -x "$bench" ]] || { echo "tls_on_links.sh: $bench not built" >&2; exit 1; }
ns="psc-tlsbench-$$"
if ! ip netns add "$ns" 2> /dev/null; then
  echo "tls_on_links.sh: cannot make a network namespace (needs root / CAP_NET_ADMIN); skipped" >&2
  exit 77
fi
out=$(mktemp -d)
trap 'ip netns del "$ns" 2> /dev/null || true; rm -rf "$out"' EXIT
ip netns exec "$ns" ip link set lo up

for rate in ${rates//,/ }; do
  if [[ "$rate" == none ]]; then
    ip netns exec "$ns" tc qdisc del dev lo root 2> /dev/null || true
    n=${iters:-200}
  else
    [[ "$rate" =~ ^([0-9]+)([mg])bit$ ]] || { echo "tls_on_links.sh: bad rate '$rate' (e.g. 10gbit, 1gbit, none)" >&2; exit 2; }
    bits=$((BASH_REMATCH[1] * 1000000))
    [[ "${BASH_REMATCH[2]}" == g ]] && bits=$((bits * 1000))
    # The bucket holds 2 ms at the rate, at least loopback's 64 KiB MTU.
    burst=$((bits / 8 / 500))
    ((burst < 65536)) && burst=65536
    ip netns exec "$ns" tc qdisc replace dev lo root tbf rate "$rate" burst "$burst" latency 50ms
    n=${iters:-$((bits >= 10000000000 ? 200 : 50))}
  fi
  echo "tls_on_links.sh: $rate, $repeats repeats of $n round trips" >&2
  ip netns exec "$ns" "$bench" --tls --repeats="$repeats" --iters="$n" --warmup=5 \
    --out="$out/$rate.json" > /dev/null
done

python3 - "$out" "$rates" << 'EOF'
import json, subprocess, sys
out, rates = sys.argv[1], sys.argv[2].split(",")
cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(
    ["lscpu"], capture_output=True, text=True).stdout.splitlines()
    if l.startswith("Model name")), "?")
result = {"bench": "tls_on_links.sh", "cpu": cpu, "rates": {}}
for rate in rates:
    d = json.load(open(f"{out}/{rate}.json"))
    result["rates"][rate] = d
    result.setdefault("tls_ratio_vs_plaintext", {})[rate] = d["tls_ratio_vs_plaintext"]
print(json.dumps(result, indent=1))
EOF
