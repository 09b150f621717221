#!/usr/bin/env bash
# Sourced by the Keras checks: the real Keras 3 (KERAS_BACKEND=jax, CPU
# only) from the Python package index in a cached virtual environment
# ($PSC_TEST_CACHE, default ~/.cache/pscluster-tests; about 700 MB, created
# on the first run). Sets $venv and exports the backend's variables.
cache=${PSC_TEST_CACHE:-$HOME/.cache/pscluster-tests}
venv=$cache/keras-jax-3.15
export KERAS_BACKEND=jax JAX_PLATFORMS=cpu
if ! "$venv/bin/python3" -c 'import keras, jax, scipy' 2>/dev/null; then
  echo "keras_venv: creating $venv (keras 3.15.1, jax, scipy from PyPI)..." >&2
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'keras==3.15.1' 'jax[cpu]' scipy
fi
