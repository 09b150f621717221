#!/usr/bin/env bash
# The README's and the guide's marked snippets, run as written
# (doc_snippets.py), in the Keras virtual environment keras_interop_test.sh
# makes (keras 3.15.1 on jax, CPU; cached in $PSC_TEST_CACHE).
# Usage: doc_snippets_test.sh REPO_ROOT BIN_DIR
set -euo pipefail
repo=${1:?usage: doc_snippets_test.sh REPO_ROOT BIN_DIR}
bin_dir=${2:?usage: doc_snippets_test.sh REPO_ROOT BIN_DIR}
cache=${PSC_TEST_CACHE:-$HOME/.cache/pscluster-tests}
venv=$cache/keras-jax-3.15
export KERAS_BACKEND=jax JAX_PLATFORMS=cpu
if ! "$venv/bin/python3" -c 'import keras, jax, scipy' 2>/dev/null; then
  echo "doc_snippets: creating $venv (keras 3.15.1, jax, scipy from PyPI)..." >&2
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'keras==3.15.1' 'jax[cpu]' scipy
fi
exec "$venv/bin/python3" "$(dirname "$0")/doc_snippets.py" "$repo" "$bin_dir"
