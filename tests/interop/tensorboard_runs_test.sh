#!/usr/bin/env bash
# pscluster's --logdir read by the real TensorBoard (2.20.0 from PyPI, in
# the cached virtual environment of tensorboard_venv.sh; no TensorFlow).
# Runs a small job (1 ps, 2 workers, 2 epochs of 8 steps, an evaluation
# every 4 steps), then tensorboard_runs.py on its logdir and result file:
# train/ and validation/ runs with Keras's tags.
# Usage: tensorboard_runs_test.sh BIN_DIR
set -euo pipefail
bin_dir=${1:?usage: tensorboard_runs_test.sh BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/tensorboard_venv.sh"

tmp=$(mktemp -d /tmp/tensorboard_runs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if ! "$bin_dir/pscluster" launch --workers=2 -- --steps_per_epoch=8 --epochs=2 \
    --max_train_examples=2048 --eval_every_steps=4 --batch_size=64 \
    --logdir="$tmp/logs" --metrics_out="$tmp/result.json" > "$tmp/job.log" 2>&1; then
  echo "tensorboard_runs: the job failed:" >&2
  tail -40 "$tmp/job.log" >&2
  exit 1
fi
"$tb_venv/bin/python3" "$here/tensorboard_runs.py" "$tmp/logs" --epochs=2 --result="$tmp/result.json"
