#!/usr/bin/env bash
# bench/soak.sh: async training under random kill -9, for a set time.
#
# Runs short async jobs back to back under `pscluster launch --restart_failed`
# (2 ps, 3 workers, mlp, checkpoints every 50 steps) until --duration has
# passed. While each job runs, every 1-4 s (random) it kill -9s one task at
# random: a parameter server (the launcher restarts it and the chief
# restores every shard from the latest checkpoint; at most 5 per job, since
# the chief gives up after 10 recoveries) or a worker (the chief declares it
# lost and hands its work to the others; at most workers - 1 per job, since
# a lost worker does not come back). After each job it checks:
#   - the job ended (exit 0) and trained every step (steps = epochs x steps);
#   - the accounting balances on every shard: gradients_accepted =
#     applied + dropped_stale + discarded (nothing pending at the end);
#   - the workers counted lost are the ones the chief declared lost, each of
#     them killed (a worker killed while the job was being started comes
#     back: the chief's StartJob waits for it, or is made again), and
#     every server kill led to a recovery (recoveries >= 1 when a server was
#     killed, unless every kill came after the final checkpoint; several kills
#     between two units can share one);
#   - the model learned (test_accuracy > 0.6).
# Prints one line per job and a JSON summary; exits 1 at the first check
# that fails (its logs are kept in the output directory).
#
# Usage: bash bench/soak.sh [--duration=30m] [--seed=N] [--out=DIR]
#   (BUILD_DIR, default build; the binaries must be built)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
duration=30m
seed=$$
out=
for a in "$@"; do
  case "$a" in
    --duration=*) duration=${a#--duration=} ;;
    --seed=*) seed=${a#--seed=} ;;
    --out=*) out=${a#--out=} ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
case "$duration" in
  *m) budget=$(( ${duration%m} * 60 )) ;;
  *s) budget=${duration%s} ;;
  *) echo "soak.sh: --duration takes a number of minutes (30m) or seconds (90s)" >&2; exit 2 ;;
esac
[[ -n $out ]] || out=$(mktemp -d /tmp/pscluster-soak.XXXXXX)
mkdir -p "$out"
RANDOM=$seed
workers=3
# The chief gives up after 10 recoveries in one job; a job takes at most
# this many server kills.
max_ps_kills=5
epochs=40
steps=150
bin="$BUILD_DIR/bin/pscluster"
[[ -x $bin ]] || { echo "soak.sh: $bin not built" >&2; exit 2; }

# The pid of `task` now: the last "started" or "restarted" line naming it.
pid_of() {
  grep -Eo "\[launcher\] (started|restarted) $1 \(pid [0-9]+" "$2" | tail -1 | grep -Eo '[0-9]+$'
}

start=$(date +%s)
jobs=0 ps_kills=0 worker_kills=0 recoveries=0
while (( $(date +%s) - start < budget )); do
  jobs=$((jobs + 1))
  dir="$out/job-$jobs"
  mkdir -p "$dir"
  "$bin" launch --ps=2 --workers=$workers --restart_failed --max_restarts=1000 -- \
    --mode=async --model=mlp --batch_size=96 --epochs=$epochs --steps_per_epoch=$steps --unit_steps=10 \
    --max_train_examples=19200 --checkpoint_dir="$dir/ckpt" --checkpoint_every_steps=50 \
    --metrics_out="$dir/result.json" >"$dir/launch.log" 2>&1 &
  launcher=$!
  job_ps=0 job_workers=0
  # Faults while it runs (bounded: a job that does not end in 10 minutes fails).
  for (( i = 0; i < 300; i++ )); do
    sleep $(( 1 + RANDOM % 4 ))
    kill -0 $launcher 2>/dev/null || break
    grep -q "cluster ready" "$dir/launch.log" || continue
    if (( RANDOM % 2 == 0 && job_workers < workers - 1 )); then
      task="worker:$(( RANDOM % workers ))"
      # Not one already lost this job.
      grep -q "killed $task " "$dir/faults.log" 2>/dev/null && continue
    elif (( job_ps < max_ps_kills )); then
      task="ps:$(( RANDOM % 2 ))"
    else
      continue
    fi
    pid=$(pid_of "$task" "$dir/launch.log")
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || continue
    kill -9 "$pid" 2>/dev/null || continue
    echo "$(date +%T) killed $task (pid $pid)" >>"$dir/faults.log"
    case $task in ps:*) job_ps=$((job_ps + 1)) ;; *) job_workers=$((job_workers + 1)) ;; esac
  done
  if kill -0 $launcher 2>/dev/null; then
    kill -TERM $launcher; wait $launcher
    echo "soak: job $jobs did not end within its bound; logs in $dir" >&2
    exit 1
  fi
  wait $launcher
  rc=$?
  fail() { echo "soak: job $jobs: $1 (logs in $dir)" >&2; exit 1; }
  [[ $rc -eq 0 ]] || fail "launcher exited $rc"
  python3 - "$dir/result.json" $((epochs * steps)) $job_workers $job_ps "$dir/launch.log" \
    "$dir/faults.log" <<'PY' || fail "checks failed"
import json, re, sys
r = json.load(open(sys.argv[1]))
total, wk, pk = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
log = open(sys.argv[5]).read()
try:
    faults = open(sys.argv[6]).read()
except FileNotFoundError:
    faults = ""
bad = []
# A killed worker is lost, unless it died while the job was being started
# and the chief's StartJob reached it after its restart (the chief waits
# for it; a call that broke is made again).
lost = set(re.findall(r"chief: (worker:\d+) is lost", log))
killed = set(re.findall(r"killed (worker:\d+) ", faults))
if not lost <= killed:
    bad.append(f"lost {sorted(lost)} but killed only {sorted(killed)}")
wk = len(lost)
if r["steps"] != total: bad.append(f"steps {r['steps']} != {total}")
acc = r["gradients_accepted"]
bal = (r["gradients_applied"] + r["gradients_dropped_stale"] + r["gradients_discarded"]
       + (r["loss_scale"] or {}).get("gradients_skipped", 0))
if acc != bal: bad.append(f"accepted {acc} != applied+stale+discarded {bal}")
if r["workers_lost"] != wk: bad.append(f"workers_lost {r['workers_lost']} != {wk} declared lost")
if pk > 0 and r["recoveries"] < 1:
    # Only a kill after the chief's last call that changes the servers (the
    # final checkpoint) needs no recovery.
    import datetime, glob, os
    ckpt = os.path.join(os.path.dirname(sys.argv[1]), "ckpt", f"ckpt-{total}")
    indexes = glob.glob(os.path.join(ckpt, "shard-*-of-2.index"))
    kills = [l.split()[0] for l in faults.splitlines() if " killed ps:" in l]
    today = datetime.date.today()
    last_kill = max(datetime.datetime.combine(today, datetime.time.fromisoformat(k)).timestamp()
                    for k in kills)
    if len(indexes) != 2 or max(os.path.getmtime(i) for i in indexes) > last_kill + 1:
        bad.append(f"{pk} server kills but no recovery, and not all after the final checkpoint")
if r["test_accuracy"] <= 0.6: bad.append(f"test_accuracy {r['test_accuracy']}")
if bad:
    print("; ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
  read -r rec redone accepted acc < <(python3 -c "
import json; r = json.load(open('$dir/result.json'))
print(r['recoveries'], r['steps_redone'], r['gradients_accepted'], round(r['test_accuracy'], 4))")
  ps_kills=$((ps_kills + job_ps)); worker_kills=$((worker_kills + job_workers))
  recoveries=$((recoveries + rec))
  echo "soak: job $jobs ok: killed $job_ps ps + $job_workers workers; $rec recoveries," \
    "$redone steps redone, $accepted gradients accepted, test_accuracy $acc"
done
elapsed=$(( $(date +%s) - start ))
echo "{\"duration_s\": $elapsed, \"jobs\": $jobs, \"faults_survived\": $((ps_kills + worker_kills)),"\
" \"ps_kills\": $ps_kills, \"worker_kills\": $worker_kills, \"recoveries\": $recoveries,"\
" \"seed\": $seed, \"out\": \"$out\"}"
