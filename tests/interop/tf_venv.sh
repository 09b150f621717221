#!/usr/bin/env bash
# Sourced by the TensorFlow checks: tensorflow-cpu 2.21 from the Python
# package index in a cached virtual environment the tests share
# ($PSC_TEST_CACHE, default ~/.cache/pscluster-tests; about 250 MB
# downloaded, created by the first check that needs it). Sets $tf_venv.
source "$(dirname "${BASH_SOURCE[0]}")/py_venv.sh"
tf_venv=$psc_test_cache/tf-2.21
export TF_CPP_MIN_LOG_LEVEL=2 CUDA_VISIBLE_DEVICES=
psc_venv "$tf_venv" 'tensorflow, numpy' 'tensorflow-cpu==2.21.*'
