#!/usr/bin/env bash
# bench/modes_study.sh: sync or async? The reference job (seed_cnn, SGD 0.01,
# --batch_size=126 so that 3 workers, and R=2 of them, split it evenly) on
# `pscluster launch --ps=1 --workers=3`, one compute thread per worker, the
# same --seed, a validation every 50 steps, in five modes, each plain and with
# worker 2 three times slower (--straggler=2:3):
#   sync, sync_backup (--replicas_to_aggregate=2), async, ssp1 (--mode=ssp
#   --staleness=1), ssp3 (--staleness=3); and sync_straggler, ...
# One run after another. Writes to DIR: NAME.json (--metrics_out), NAME.log,
# logs/NAME/ (TensorBoard), summary.md (the machine, then
# `python3 -m pscluster.modes_summary` of every DIR/NAME.json), and the
# plots modes_plain.png (the plain runs), modes_straggler.png and
# modes_all.png. A failed run is reported and the study goes on; exits 1 at
# the end if any run, the summary or a plot failed.
#
# Usage: bash bench/modes_study.sh [--epochs=3] [--out=DIR] [--seed=0]
#                                  [--only=NAME,...]
#   (BUILD_DIR, default build; the binaries must be built. DIR defaults to
#   modes_study-<date>. PYTHON: an interpreter with matplotlib, default the
#   first of python3, /usr/bin/python3 that has it.)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
epochs=3
seed=0
out=modes_study-$(date +%Y%m%d-%H%M%S)
only=
for a in "$@"; do
  case "$a" in
    --epochs=*) epochs=${a#--epochs=} ;;
    --out=*) out=${a#--out=} ;;
    --seed=*) seed=${a#--seed=} ;;
    --only=*) only=${a#--only=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "modes_study: unknown argument $a" >&2; exit 2 ;;
  esac
done

plain=(sync sync_backup async ssp1 ssp3)
straggler=(sync_straggler sync_backup_straggler async_straggler ssp1_straggler ssp3_straggler)
all=("${plain[@]}" "${straggler[@]}")
if [[ -n $only ]]; then
  for name in ${only//,/ }; do
    [[ " ${all[*]} " == *" $name "* ]] ||
      { echo "modes_study: unknown run $name (one of: ${all[*]})" >&2; exit 2; }
  done
fi

launcher=$BUILD_DIR/bin/pscluster
[[ -x $launcher ]] || { echo "modes_study: $launcher not found (BUILD_DIR=$BUILD_DIR)" >&2; exit 2; }
python=${PYTHON:-}
if [[ -z $python ]]; then
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c 'import matplotlib' 2>/dev/null; then python=$candidate; break; fi
  done
fi
[[ -n $python ]] || { echo "modes_study: no python3 with matplotlib (apt-get install" \
                           "python3-matplotlib, or set PYTHON)" >&2; exit 2; }
mkdir -p "$out"

mode_flags() {  # NAME (without _straggler) -> the chief flags of its mode
  case "$1" in
    sync) echo --mode=sync ;;
    sync_backup) echo --mode=sync --replicas_to_aggregate=2 ;;
    async) echo --mode=async ;;
    ssp1) echo --mode=ssp --staleness=1 ;;
    ssp3) echo --mode=ssp --staleness=3 ;;
  esac
}

failed=()
run() {  # NAME
  local name=$1 base=${1%_straggler} launch_flags=()
  [[ $name == *_straggler ]] && launch_flags=(--straggler=2:3)
  local -a flags
  read -r -a flags <<< "$(mode_flags "$base")"
  rm -rf "$out/$name.json" "$out/logs/$name"
  echo "modes_study: $name ($(date +%T))..." >&2
  local start=$SECONDS
  if "$launcher" launch --ps=1 --workers=3 "${launch_flags[@]}" -- \
      --model=seed_cnn --batch_size=126 --epochs="$epochs" --seed="$seed" \
      --intra_op_threads=1 --eval_every_steps=50 "${flags[@]}" \
      --logdir="$out/logs/$name" --metrics_out="$out/$name.json" > "$out/$name.log" 2>&1 &&
      [[ -s $out/$name.json ]]; then
    echo "modes_study: $name done in $((SECONDS - start)) s" >&2
  else
    echo "modes_study: $name FAILED after $((SECONDS - start)) s; the end of $out/$name.log:" >&2
    tail -15 "$out/$name.log" >&2
    rm -f "$out/$name.json"
    failed+=("$name")
  fi
}

for name in "${all[@]}"; do
  if [[ -z $only || ",$only," == *",$name,"* ]]; then run "$name"; fi
done

existing() {  # NAME... -> DIR/NAME.json of those that exist, in that order
  local name
  for name in "$@"; do [[ -f $out/$name.json ]] && echo "$out/$name.json"; done
  return 0
}
mapfile -t files < <(existing "${all[@]}")
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
status=0
{
  echo "# Sync or async: the modes study"
  echo
  echo "machine: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1), nproc $(nproc)."
  echo "3 workers + 1 ps + the chief share these $(nproc) cores (one compute thread per worker)."
  echo "job: seed_cnn, SGD 0.01, --batch_size=126, --epochs=$epochs, --seed=$seed," \
       "--eval_every_steps=50; straggler runs: --straggler=2:3 (worker 2 three times slower)."
  [[ ${#failed[@]} -eq 0 ]] || echo "failed runs: ${failed[*]} (see their .log)."
  echo
} > "$out/summary.md"
if [[ ${#files[@]} -gt 0 ]]; then
  "$python" -m pscluster.modes_summary "${files[@]}" >> "$out/summary.md" || status=1
else
  echo "no result file" >> "$out/summary.md"
fi

plot() {  # PNG TITLE NAME...
  local png=$1 title=$2
  shift 2
  local -a group
  mapfile -t group < <(existing "$@")
  if [[ ${#group[@]} -eq 0 ]]; then
    echo "modes_study: no result for $png" >&2
    return 0
  fi
  "$python" -m pscluster.plot "${group[@]}" --out="$out/$png" --title="$title" || status=1
}
plot modes_plain.png "1 ps + 3 workers, $epochs epochs" "${plain[@]}"
plot modes_straggler.png "1 ps + 3 workers, worker 2 three times slower" "${straggler[@]}"
plot modes_all.png "1 ps + 3 workers: plain and with a straggler" "${all[@]}"

cat "$out/summary.md"
echo "modes_study: results in $out" >&2
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "modes_study: ${#failed[@]} run(s) failed: ${failed[*]}" >&2
  status=1
fi
exit "$status"
