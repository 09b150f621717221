#!/usr/bin/env bash
# pscluster checked against the real Keras 3 (KERAS_BACKEND=jax, CPU only),
# from the Python package index into a cached virtual environment
# ($PSC_TEST_CACHE, default ~/.cache/pscluster-tests; about 700 MB, created
# on the first run). Runs keras_interop.py with the build's binaries.
# Usage: keras_interop_test.sh BIN_DIR
set -euo pipefail
bin_dir=${1:?usage: keras_interop_test.sh BIN_DIR}
cache=${PSC_TEST_CACHE:-$HOME/.cache/pscluster-tests}
venv=$cache/keras-jax-3.15
export KERAS_BACKEND=jax JAX_PLATFORMS=cpu
if ! "$venv/bin/python3" -c 'import keras, jax, scipy' 2>/dev/null; then
  echo "keras_interop: creating $venv (keras 3.15.1, jax, scipy from PyPI)..." >&2
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'keras==3.15.1' 'jax[cpu]' scipy
fi
exec "$venv/bin/python3" "$(dirname "$0")/keras_interop.py" "$bin_dir"
