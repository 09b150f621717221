#!/usr/bin/env bash
# Makes every virtual environment the checks use, in $PSC_TEST_CACHE, unless
# it is there: tests/run_all.sh runs it in the background while it builds, so
# that the downloads overlap compiling instead of holding a test slot. Each
# is made under its lock (py_venv.sh); one that fails does not stop the
# others, and a check that finds one missing makes it itself.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
failed=()
for script in keras_venv.sh tf_venv.sh tensorboard_venv.sh prometheus_venv.sh; do
  if ! (set -e; source "$here/$script"); then
    failed+=("$script")
  fi
done
if ((${#failed[@]})); then
  echo "make_venvs: failed: ${failed[*]}" >&2
  exit 1
fi
echo "make_venvs: the Keras, TensorFlow, TensorBoard and Prometheus venvs are ready"
