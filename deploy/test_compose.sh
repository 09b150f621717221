#!/usr/bin/env bash
# The real test of deploy/docker-compose.yml: a private Docker engine, the
# image built from deploy/Dockerfile, and two short training jobs on the
# compose cluster (1 chief, 2 ps, 2 workers, and the evaluator in the first).
#
#   1. Starts its own dockerd as root (--storage-driver=vfs --iptables=false,
#      --bridge=none) with its data root, exec root and socket in a temporary
#      folder, so it touches no other engine.
#   2. Makes the base image itself, since no registry can be reached:
#      `debootstrap --variant=minbase bookworm`, then `docker import` as
#      debian:bookworm. The root file system is cached as a tarball between
#      runs (PSC_COMPOSE_CACHE).
#   3. Builds the image with --network host (no NAT without iptables; apt-get
#      in the build reaches the Debian archive directly): from the binaries of
#      PSC_COMPOSE_BIN_DIR when it is set (deploy/Dockerfile.prebuilt, staged
#      by deploy/docker/stage_prebuilt.sh; what ctest does, with the build's
#      bin/), otherwise from the sources (deploy/Dockerfile).
#   4. Job 1 (with --profile evaluator): the servers, workers and evaluator
#      start first, without the chief (they wait for it), and each must report
#      healthy (its compose healthcheck) and worker-0's /metrics must answer
#      over the project network; then the chief. The chief's result JSON must
#      show accuracy well above chance and gradients_accepted = applied +
#      dropped_stale + discarded; every task exits 0, the evaluator has
#      evaluated the final checkpoint and the chief waited for it (its
#      TF_CONFIG leaves the evaluator out; the evaluator announced itself to
#      the chief), and everything
#      in the volume belongs to the image's user (10001).
#   5. Job 2: the chief and the servers start first (the chief waits for the
#      workers) and must report healthy; then the workers. One ps is killed by
#      its host PID (`docker kill` would disable the restart policy); compose
#      restarts it, the chief restores every shard from the latest checkpoint,
#      and the job still completes.
#   6. Tears everything down and stops the engine, also on failure, timeout
#      or Ctrl-C (a trap).
# The token file is made as docs/guide/deploy.md says: group 10001, mode 0440.
# The containers talk over the compose project's bridge network, by service
# name; that works with --iptables=false, so no host-network override is used.
#
# Usage: bash deploy/test_compose.sh         (as root; exit 0 pass, 1 fail,
#                                            77 skipped: not root)
# Env:
#   PSC_COMPOSE_BIN_DIR  a host build's bin/ to make the image from (default:
#                        none, the image is built from the sources)
#   PSC_COMPOSE_CACHE    base image cache (default ~/.cache/pscluster-compose-test)
#   PSC_COMPOSE_TIMEOUT  limit for the whole run in seconds (default 3600)
#   PSC_DEBIAN_MIRROR    debootstrap's mirror (default http://deb.debian.org/debian)
#   PSC_COMPOSE_KEEP=1   keep the temporary folder afterwards (results, and every
#                        container's log: logs-job1.txt, logs-job2.txt, or
#                        logs-failed.txt)
set -euo pipefail
cd "$(dirname "$0")/.."

LIMIT=${PSC_COMPOSE_TIMEOUT:-3600}
if [[ -z "${PSC_COMPOSE_UNDER_TIMEOUT:-}" ]]; then
  # The whole run under one deadline: on expiry timeout(1) sends SIGTERM and
  # the trap below cleans up.
  export PSC_COMPOSE_UNDER_TIMEOUT=1
  exec timeout --kill-after=300 "$LIMIT" bash "$0" "$@"
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "test_compose.sh: skipped: needs root (it starts its own dockerd)" >&2
  exit 77
fi

# The script's own stdout/stderr, kept on fds 4 and 3: a trap can run while
# a function's redirection (e.g. into build.log) is in effect.
exec 3>&2 4>&1
log() { printf '[test_compose %s] %s\n' "$(date +%T)" "$*" >&3; }
fail() { log "FAIL: $*"; exit 1; }

start_s=$SECONDS
declare -a timings=()
timed() {  # timed NAME COMMAND...: runs it and records how long it took
  local name=$1 t0=$SECONDS
  shift
  "$@"
  timings+=("$name $((SECONDS - t0))s")
}

for tool in dockerd docker-compose debootstrap; do
  if ! command -v "$tool" >/dev/null; then
    log "installing the Docker engine, docker-compose and debootstrap (deploy/install_deps.sh --with-docker)"
    bash deploy/install_deps.sh --with-docker
    break
  fi
done
DOCKER_CLI=/usr/bin/docker  # Debian's client, the engine's own version
[[ -x "$DOCKER_CLI" ]] || DOCKER_CLI=$(command -v docker)

T=$(mktemp -d /tmp/psc-compose.XXXXXX)
export DOCKER_HOST="unix://$T/docker.sock"
IMAGE=pscluster:compose-test
PROJECT=psctest
DOCKERD_PID=""
COMPOSE_UP=""  # set once a compose cluster was started

docker() { "$DOCKER_CLI" "$@"; }
compose() {
  PSC_IMAGE=$IMAGE PSC_TOKEN_FILE="$T/token" \
    docker-compose -p "$PROJECT" -f deploy/docker-compose.yml "$@"
}

# With PSC_COMPOSE_KEEP=1: every container's whole log, into $T/logs-NAME.txt.
keep_logs() {
  if [[ "${PSC_COMPOSE_KEEP:-}" == 1 ]]; then
    compose --profile evaluator logs --no-color --timestamps >"$T/logs-$1.txt" 2>&1 || true
  fi
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  exec 1>&4 2>&3
  if [[ -n "$DOCKERD_PID" ]] && kill -0 "$DOCKERD_PID" 2>/dev/null; then
    if [[ -n "$COMPOSE_UP" ]]; then
      if [[ $rc -ne 0 ]]; then
        log "logs of the failed run:"
        compose --profile evaluator logs --no-color --tail=40 2>&1 | tail -n 200
        keep_logs failed
      fi
      timeout 90 env PSC_IMAGE=$IMAGE PSC_TOKEN_FILE="$T/token" docker-compose -p "$PROJECT" \
        -f deploy/docker-compose.yml --profile evaluator down -v --timeout 5 >/dev/null 2>&1
    fi
    kill -TERM "$DOCKERD_PID"
    for _ in $(seq 1 300); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$DOCKERD_PID" 2>/dev/null
  fi
  # Whatever this run's engine left (its containerd, shims): the processes
  # whose command line names this run's folder, by PID.
  for pid in $(grep -lsF -- "$T" /proc/[0-9]*/cmdline | cut -d/ -f3); do
    [[ "$pid" != "$$" ]] && kill -KILL "$pid" 2>/dev/null
  done
  findmnt -rn -o TARGET | awk -v t="$T" 'index($0, t) == 1' | sort -r |
    while read -r m; do umount -l "$m"; done
  if [[ "${PSC_COMPOSE_KEEP:-}" == 1 ]]; then
    log "kept $T"
  else
    rm -rf "$T"
  fi
  log "$( [[ $rc -eq 0 ]] && echo PASS || echo "FAILED (exit $rc)" ) in $((SECONDS - start_s))s: ${timings[*]}"
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted or timed out"; exit 124' INT TERM

# ---- 1. the engine ----
start_engine() {
  mkdir -p "$T/data" "$T/exec"
  setsid dockerd --storage-driver=vfs --iptables=false --ip-masq=false --bridge=none \
    --data-root="$T/data" --exec-root="$T/exec" --pidfile="$T/dockerd.pid" \
    -H "$DOCKER_HOST" >"$T/dockerd.log" 2>&1 3>&- 4>&- &
  DOCKERD_PID=$!
  for _ in $(seq 1 600); do
    if docker version >/dev/null 2>&1; then
      DOCKERD_PID=$(cat "$T/dockerd.pid")
      return 0
    fi
    kill -0 "$DOCKERD_PID" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 20 "$T/dockerd.log"
  fail "dockerd did not start"
}
timed engine start_engine
log "engine: $(docker version --format '{{.Server.Version}}'), storage driver vfs, no iptables"

# ---- 2. the base image, from debootstrap, cached ----
CACHE=${PSC_COMPOSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pscluster-compose-test}
BASE_TAR=$CACHE/debian-bookworm-minbase.tar
make_base() {
  if [[ ! -s "$BASE_TAR" ]]; then
    log "debootstrap bookworm (cached afterwards in $CACHE)"
    mkdir -p "$CACHE"
    debootstrap --variant=minbase bookworm "$T/rootfs" \
      "${PSC_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$T/debootstrap.log" 2>&1 ||
      { tail -n 20 "$T/debootstrap.log"; fail "debootstrap failed"; }
    tar --numeric-owner -C "$T/rootfs" -cf "$BASE_TAR.tmp" .
    mv "$BASE_TAR.tmp" "$BASE_TAR"
    rm -rf "$T/rootfs"
  else
    log "base image from the cache ($BASE_TAR)"
  fi
  docker import -c 'CMD ["bash"]' "$BASE_TAR" debian:bookworm >/dev/null
}
timed base_image make_base

# ---- 3. the image ----
BIN_DIR=${PSC_COMPOSE_BIN_DIR:-}
build_image() {
  if [[ -n "$BIN_DIR" ]]; then
    log "docker build (deploy/Dockerfile.prebuilt, the binaries of $BIN_DIR); log in $T/build.log"
    bash deploy/docker/stage_prebuilt.sh "$BIN_DIR" "$T/context" >"$T/build.log" 2>&1 ||
      { tail -n 20 "$T/build.log"; fail "staging the binaries of $BIN_DIR failed"; }
    DOCKER_BUILDKIT=0 docker build --network host -f deploy/Dockerfile.prebuilt -t "$IMAGE" \
      "$T/context" >>"$T/build.log" 2>&1 ||
      { tail -n 40 "$T/build.log"; fail "docker build failed"; }
    return 0
  fi
  log "docker build (deploy/Dockerfile, from the sources, --network host); log in $T/build.log"
  DOCKER_BUILDKIT=0 docker build --network host -f deploy/Dockerfile -t "$IMAGE" \
    --build-arg JOBS="$(nproc)" . >"$T/build.log" 2>&1 ||
    { tail -n 40 "$T/build.log"; fail "docker build failed"; }
}
timed build build_image
[[ "$(docker image inspect -f '{{.Config.User}}' "$IMAGE")" == 10001:10001 ]] ||
  fail "the image does not run as 10001:10001"
log "image $IMAGE: $(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"

# The documented mode: a compose secret is a bind mount that keeps the
# file's owner and mode, and the daemons run as uid/gid 10001.
openssl rand -hex 32 >"$T/token"
chgrp 10001 "$T/token"
chmod 0440 "$T/token"
compose config -q
compose -f deploy/docker-compose.gpu.yml --profile evaluator --profile tensorboard config -q

# Short jobs on a training subset, checkpointed every 10 steps. Chief and
# evaluator share the job flags.
export PSC_CHIEF_FLAGS="--checkpoint_every_steps=10 --unit_steps=5 --eval_threads=1"

container() { compose --profile evaluator ps -q "$1"; }
wait_exit() {  # wait_exit SERVICE SECONDS: waits for it to stop, prints its exit code
  local id
  id=$(container "$1")
  [[ -n "$id" ]] || fail "no container for $1"
  timeout "$2" "$DOCKER_CLI" wait "$id" || fail "$1 did not finish within $2 s"
}
wait_healthy() {  # wait_healthy SECONDS SERVICE...: each reports healthy (its healthcheck)
  local limit=$1 deadline=$((SECONDS + $1)) s id state i
  shift
  for s in "$@"; do
    id=$(container "$s")
    [[ -n "$id" ]] || fail "no container for $s"
    state=""
    # At most 4 polls a second until the deadline (the first check runs one
    # healthcheck interval, 10 s, after the start).
    for ((i = 0; i < 4 * limit; i++)); do
      state=$(docker inspect -f \
        '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' "$id")
      case "$state" in
        "running healthy") break ;;
        *" none") fail "$s has no healthcheck" ;;
        "running "*) ;;
        *) fail "$s stopped before it was healthy ($state)" ;;
      esac
      [[ $SECONDS -lt $deadline ]] || break
      sleep 0.25
    done
    if [[ "$state" != "running healthy" ]]; then
      { docker inspect -f '{{range .State.Health.Log}}{{.ExitCode}}: {{.Output}}{{end}}' "$id" |
          tail -n 5 >&3; } || true
      fail "$s not healthy within ${limit} s ($state)"
    fi
  done
  log "  healthy: $*"
}
scrape_metrics() {  # scrape_metrics FROM HOST: GET http://HOST:9464/metrics inside FROM's container
  # The image has no HTTP client: bash's /dev/tcp, HTTP/1.0 (no chunking;
  # the server closes the connection after the response).
  docker exec "$(container "$1")" timeout 10 bash -c \
    'exec 3<>"/dev/tcp/$0/9464" && printf "GET /metrics HTTP/1.0\r\nHost: %s:9464\r\n\r\n" "$0" >&3 &&
     cat <&3' "$2"
}
logs_contain() {  # logs_contain CONTAINER TEXT (no pipe: grep -q would cut it)
  docker logs "$1" >"$T/logs.txt" 2>&1
  grep -q -- "$2" "$T/logs.txt"
}
volume_file() {  # volume_file PATH: a file of the job's volume, via the chief's container
  docker cp "$(container chief):/var/lib/pscluster/$1" - | tar -xO
}
check_result() {  # check_result FILE STEPS MIN_RECOVERIES: the chief's result JSON
  /usr/bin/python3 - "$@" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
steps, min_recoveries = int(sys.argv[2]), int(sys.argv[3])
checks = {
    "test_accuracy above chance (> 0.5)": r["test_accuracy"] > 0.5,
    # `steps` counts the steps trained: after a recovery the steps since the
    # checkpoint (every 10 steps here) are trained again and count again.
    f"every step ran ({steps}, plus at most 10 redone per recovery)":
        steps <= r["steps"] <= steps + 10 * r["recoveries"],
    "gradients_accepted = applied + dropped_stale + discarded (+ skipped for an overflow)":
        r["gradients_accepted"] == r["gradients_applied"] + r["gradients_dropped_stale"]
        + r["gradients_discarded"] + (r["loss_scale"] or {}).get("gradients_skipped", 0),
    "gradients were applied": r["gradients_applied"] > 0,
    "checkpoints written": r["checkpoints_written"] >= 1,
    "no worker lost": r["workers_lost"] == 0,
    f"recoveries >= {min_recoveries}": r["recoveries"] >= min_recoveries,
}
print("  result: test_accuracy %.4f, steps %d, accepted %d = applied %d + stale %d + discarded %d,"
      " checkpoints %d, recoveries %d" % (r["test_accuracy"], r["steps"], r["gradients_accepted"],
      r["gradients_applied"], r["gradients_dropped_stale"], r["gradients_discarded"],
      r["checkpoints_written"], r["recoveries"]))
bad = [name for name, ok in checks.items() if not ok]
for name in bad:
    print("  check failed:", name)
sys.exit(1 if bad else 0)
EOF
}

# ---- 4. job 1: the whole cluster with the evaluator ----
job1() {
  log "job 1: chief, ps-0, ps-1, worker-0, worker-1, evaluator (mlp, 3 x 20 steps)"
  export PSC_JOB_FLAGS="--model=mlp --optimizer=momentum --epochs=3 --steps_per_epoch=20
    --max_train_examples=6400 --intra_op_threads=1"
  # The chief's TF_CONFIG leaves the evaluator out (a profile of
  # docker-compose.yml); the evaluator announces itself to the chief, which
  # then waits for the final evaluation, as on Kubernetes (checked below).
  COMPOSE_UP=1
  # Without the chief first: the others wait for it, so their health and
  # metrics can be checked before the job can end.
  compose --profile evaluator up -d --no-build ps-0 ps-1 worker-0 worker-1 evaluator \
    >"$T/up1.log" 2>&1 || { cat "$T/up1.log"; fail "job 1: docker-compose up (without the chief)"; }
  wait_healthy 120 ps-0 ps-1 worker-0 worker-1 evaluator
  scrape_metrics ps-0 worker-0 >"$T/metrics1.txt" 2>&1 ||
    { head -n 20 "$T/metrics1.txt"; fail "job 1: no answer from worker-0:9464/metrics"; }
  head -n 1 "$T/metrics1.txt" | grep -q '^HTTP/1\.[01] 200' ||
    { head -n 5 "$T/metrics1.txt"; fail "job 1: worker-0:9464/metrics did not answer 200"; }
  grep -q '^pscluster_build_info{.*role="worker"' "$T/metrics1.txt" ||
    { head -n 40 "$T/metrics1.txt"; fail "job 1: worker-0's /metrics has no pscluster_build_info"; }
  log "  worker-0:9464/metrics: $(grep -c '^# TYPE' "$T/metrics1.txt") metric families"
  compose --profile evaluator up -d --no-build >>"$T/up1.log" 2>&1 ||
    { cat "$T/up1.log"; fail "job 1: docker-compose up"; }
  local code
  code=$(wait_exit chief 900)
  [[ "$code" == 0 ]] || fail "job 1: the chief exited $code"
  for s in ps-0 ps-1 worker-0 worker-1 evaluator; do
    code=$(wait_exit "$s" 180)
    [[ "$code" == 0 ]] || fail "job 1: $s exited $code"
  done
  volume_file result.json >"$T/result1.json"
  check_result "$T/result1.json" 60 0 || fail "job 1: result.json"
  volume_file eval.jsonl >"$T/eval1.jsonl"
  grep -q '"step":60' "$T/eval1.jsonl" || fail "job 1: the evaluator did not evaluate step 60"
  compose --profile evaluator logs --no-color chief 2>&1 |
    grep -q "chief: the evaluator evaluated step 60" ||
    fail "job 1: the chief did not wait for the evaluator's final evaluation"
  compose --profile evaluator logs --no-color evaluator 2>&1 |
    grep -q "evaluator: announced to the chief" ||
    fail "job 1: the evaluator did not announce itself to the chief"
  log "  evaluator: $(wc -l <"$T/eval1.jsonl") evaluations, the last: $(tail -n 1 "$T/eval1.jsonl")"
  # Everything in the volume belongs to the image's user, and holds the
  # checkpoints and the TensorBoard files.
  docker run --rm -v "${PROJECT}_pscluster-data:/d" "$IMAGE" \
    find /d -printf '%U %p\n' >"$T/volume1.txt"
  awk '$1 != 10001' "$T/volume1.txt" >"$T/volume1.foreign"
  if [[ -s "$T/volume1.foreign" ]]; then
    head "$T/volume1.foreign"
    fail "job 1: files in the volume not owned by uid 10001"
  fi
  grep -q '/d/checkpoints/ckpt-60/shard-1-of-2' "$T/volume1.txt" || fail "job 1: no final checkpoint"
  grep -q '/d/logs/.*tfevents' "$T/volume1.txt" || fail "job 1: no TensorBoard events"
  keep_logs job1
  compose --profile evaluator down -v --timeout 5 >/dev/null 2>&1
}
timed job1 job1

# ---- 5. job 2: a ps is killed by its host PID and comes back ----
job2() {
  log "job 2: kill -9 of ps-1's process on the host during training (seed_cnn, 2 x 40 steps)"
  export PSC_JOB_FLAGS="--model=seed_cnn --optimizer=momentum --epochs=2 --steps_per_epoch=40
    --max_train_examples=6400 --intra_op_threads=1"
  COMPOSE_UP=1
  # The chief and the servers first: the chief waits for the workers
  # (--startup_timeout=180s), so its health can be checked before the job runs.
  compose up -d --no-build chief ps-0 ps-1 >"$T/up2.log" 2>&1 ||
    { cat "$T/up2.log"; fail "job 2: docker-compose up (without the workers)"; }
  wait_healthy 120 chief ps-0 ps-1
  compose up -d --no-build >>"$T/up2.log" 2>&1 || { cat "$T/up2.log"; fail "job 2: docker-compose up"; }
  local chief deadline volume
  chief=$(container chief)
  # Kill once the first checkpoint is complete (its last index file), well
  # before the 80th step, watching the volume's folder on this host.
  volume=$(docker volume inspect -f '{{.Mountpoint}}' "${PROJECT}_pscluster-data")
  deadline=$((SECONDS + 300))
  until [[ -e "$volume/checkpoints/ckpt-10/shard-1-of-2.index" ]]; do
    [[ $SECONDS -lt $deadline ]] || fail "job 2: no checkpoint at step 10"
    sleep 0.05
  done
  local ps1 pid
  ps1=$(container ps-1)
  pid=$(docker inspect -f '{{.State.Pid}}' "$ps1")
  [[ "$(cat "/proc/$pid/comm")" == ps_server ]] || fail "job 2: pid $pid is not ps_server"
  grep -q '^Uid:[[:space:]]*10001' "/proc/$pid/status" || fail "job 2: ps_server does not run as 10001"
  kill -KILL "$pid"
  log "  killed ps_server (host pid $pid)"
  deadline=$((SECONDS + 120))
  until [[ "$(docker inspect -f '{{.RestartCount}} {{.State.Running}}' "$ps1")" == [1-9]*" true" ]]; do
    [[ $SECONDS -lt $deadline ]] || fail "job 2: ps-1 was not restarted (restart: on-failure)"
    sleep 0.2
  done
  log "  ps-1 restarted by its restart policy (host pid $(docker inspect -f '{{.State.Pid}}' "$ps1"))"
  local code
  code=$(wait_exit chief 900)
  [[ "$code" == 0 ]] || fail "job 2: the chief exited $code"
  logs_contain "$chief" "restored every shard" ||
    fail "job 2: the chief did not restore the shards"
  volume_file result.json >"$T/result2.json"
  check_result "$T/result2.json" 80 1 || fail "job 2: result.json"
  keep_logs job2
  compose down -v --timeout 5 >/dev/null 2>&1
}
timed job2 job2
log "networking: the compose project's bridge network (containers reach each other by service name)"
