#!/usr/bin/env bash
# Makes every virtual environment the checks use, in $PSC_TEST_CACHE, unless
# it is there: tests/run_all.sh runs it in the background while it builds, so
# that the downloads overlap compiling instead of holding a test slot. Each
# is made under its lock (py_venv.sh); a check that finds one missing makes
# it itself.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/keras_venv.sh"
source "$here/tf_venv.sh"
source "$here/tensorboard_venv.sh"
source "$here/prometheus_venv.sh"
echo "make_venvs: $venv, $tf_venv, $tb_venv and $prom_venv ready"
