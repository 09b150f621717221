#!/usr/bin/env bash
# A multi-host network on one machine, for the tests and benchmarks that
# need tasks on separate hosts: each host is a network namespace with its own
# address on a Linux bridge (in a switch namespace of its own), and each
# host's link is limited with tc's tbf qdisc in both directions (netem is
# not available on these machines, so no added latency). Everything it makes
# is named psc-<NAME>-*, lives inside those namespaces, and goes with `down`.
# Needs root (CAP_NET_ADMIN) and iproute2.
#
#   testbed.sh up NAME HOSTS [RATE]  hosts 0..HOSTS-1 (at most 32) at 10.<n>.<m>.(i+1)/24,
#                                    RATE per host link: e.g. 1gbit, 10gbit, or none
#   testbed.sh rate NAME HOSTS RATE  change every host link of a testbed that is up to RATE
#                                    (none: unlimited), e.g. to interleave rates in a benchmark
#   testbed.sh addr NAME I           host I's address
#   testbed.sh exec NAME I CMD...    run CMD in host I's namespace
#   testbed.sh down NAME             remove every namespace of NAME (idempotent)
#   testbed.sh check                 exit 0 when namespaces can be made here, else 77
#                                    with the reason on stderr
set -euo pipefail

die() { echo "testbed.sh: $*" >&2; exit 1; }

# The subnet of NAME: 10.<a>.<b>.0/24 from a checksum of the name, so that
# testbeds of different names do not collide.
subnet() {
  local sum
  sum=$(printf '%s' "$1" | cksum | cut -d' ' -f1)
  echo "10.$((100 + sum % 100)).$(((sum / 100) % 250 + 1))"
}

ns() { echo "psc-$1-$2"; }  # ns NAME h0 | ns NAME sw

# tbf on `dev` in namespace `where` at `rate` (bits/s, tc's syntax); the
# bucket holds 2 ms at that rate (at least 64 KiB), the queue 20 ms.
limit() {
  local where=$1 dev=$2 rate=$3 bits burst
  if [[ "$rate" == none ]]; then
    # No qdisc of ours (a fresh veth has none: nothing to delete).
    ip netns exec "$where" tc qdisc del dev "$dev" root 2> /dev/null || true
    return 0
  fi
  [[ "$rate" =~ ^([0-9]+)([kmg]?)bit$ ]] || die "bad rate '$rate' (e.g. 100mbit, 1gbit, 10gbit, none)"
  case "${BASH_REMATCH[2]}" in
    k) bits=$((BASH_REMATCH[1] * 1000)) ;;
    m) bits=$((BASH_REMATCH[1] * 1000000)) ;;
    g) bits=$((BASH_REMATCH[1] * 1000000000)) ;;
    *) bits=${BASH_REMATCH[1]} ;;
  esac
  burst=$((bits / 8 / 500))
  ((burst < 65536)) && burst=65536
  ip netns exec "$where" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" \
    latency 20ms
}

cmd=${1:-}
case "$cmd" in
  check)
    if [[ $(id -u) -ne 0 ]]; then echo "testbed.sh: needs root (CAP_NET_ADMIN)" >&2; exit 77; fi
    command -v ip > /dev/null || { echo "testbed.sh: no ip (iproute2)" >&2; exit 77; }
    probe="psc-check-$$"
    if ! err=$(ip netns add "$probe" 2>&1); then
      echo "testbed.sh: cannot make a network namespace: $err" >&2
      exit 77
    fi
    ip netns del "$probe"
    ;;
  up)
    name=${2:?usage: testbed.sh up NAME HOSTS [RATE]}
    hosts=${3:?usage: testbed.sh up NAME HOSTS [RATE]}
    rate=${4:-none}
    [[ "$hosts" =~ ^[0-9]+$ ]] && ((hosts >= 1 && hosts <= 32)) || die "HOSTS must be 1..32"
    [[ "$name" =~ ^[a-z0-9]{1,12}$ ]] || die "NAME must be 1-12 of [a-z0-9]"
    [[ "$rate" == none || "$rate" =~ ^[0-9]+[kmg]?bit$ ]] || die "bad rate '$rate' (e.g. 1gbit, none)"
    net=$(subnet "$name")
    sw=$(ns "$name" sw)
    # Half a testbed is removed, not left behind.
    trap 'bash "$0" down "$name"' ERR
    ip netns add "$sw"
    ip -n "$sw" link add br0 type bridge
    ip -n "$sw" link set br0 up
    for ((i = 0; i < hosts; ++i)); do
      h=$(ns "$name" "h$i")
      ip netns add "$h"
      ip -n "$h" link set lo up
      ip -n "$sw" link add "h$i" type veth peer name eth0 netns "$h"
      ip -n "$sw" link set "h$i" master br0 up
      ip -n "$h" addr add "$net.$((i + 1))/24" dev eth0
      ip -n "$h" link set eth0 up
      limit "$h" eth0 "$rate"      # what host i sends
      limit "$sw" "h$i" "$rate"    # what host i receives
    done
    ;;
  rate)
    name=${2:?usage: testbed.sh rate NAME HOSTS RATE}
    hosts=${3:?usage: testbed.sh rate NAME HOSTS RATE}
    rate=${4:?usage: testbed.sh rate NAME HOSTS RATE}
    [[ "$hosts" =~ ^[0-9]+$ ]] && ((hosts >= 1 && hosts <= 32)) || die "HOSTS must be 1..32"
    [[ "$rate" == none || "$rate" =~ ^[0-9]+[kmg]?bit$ ]] || die "bad rate '$rate' (e.g. 1gbit, none)"
    for ((i = 0; i < hosts; ++i)); do
      limit "$(ns "$name" "h$i")" eth0 "$rate"
      limit "$(ns "$name" sw)" "h$i" "$rate"
    done
    ;;
  addr)
    name=${2:?usage: testbed.sh addr NAME I}
    echo "$(subnet "$name").$((${3:?usage: testbed.sh addr NAME I} + 1))"
    ;;
  exec)
    name=${2:?usage: testbed.sh exec NAME I CMD...}
    i=${3:?usage: testbed.sh exec NAME I CMD...}
    shift 3
    exec ip netns exec "$(ns "$name" "h$i")" "$@"
    ;;
  down)
    name=${2:?usage: testbed.sh down NAME}
    for n in $(ip netns list | awk '{print $1}' | grep -E "^psc-$name-(h[0-9]+|sw)$" || true); do
      # Processes still in a namespace keep nothing alive: deleting it
      # removes its interfaces once they exit; the test kills its own.
      ip netns del "$n" 2> /dev/null || true
    done
    ;;
  *)
    die "usage: testbed.sh up NAME HOSTS [RATE] | rate NAME HOSTS RATE | addr NAME I | exec NAME I CMD... | down NAME | check"
    ;;
esac
