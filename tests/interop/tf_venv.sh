#!/usr/bin/env bash
# Sourced by the TensorFlow checks: tensorflow-cpu 2.21 from the Python
# package index in a cached virtual environment the tests share
# ($PSC_TEST_CACHE, default ~/.cache/pscluster-tests; about 250 MB
# downloaded, created by the first check that needs it). Sets $tf_venv.
# Concurrent checks: the first takes a lock (flock) while it creates it.
cache=${PSC_TEST_CACHE:-$HOME/.cache/pscluster-tests}
tf_venv=$cache/tf-2.21
export TF_CPP_MIN_LOG_LEVEL=2 CUDA_VISIBLE_DEVICES=
mkdir -p "$cache"
(
  flock 9
  if ! "$tf_venv/bin/python3" -c 'import tensorflow, numpy' 2>/dev/null; then
    echo "tf_venv: creating $tf_venv (tensorflow-cpu 2.21 from PyPI)..." >&2
    rm -rf "$tf_venv"
    python3 -m venv "$tf_venv"
    "$tf_venv/bin/pip" install -q --disable-pip-version-check 'tensorflow-cpu==2.21.*'
  fi
) 9>"$cache/tf-2.21.lock"
