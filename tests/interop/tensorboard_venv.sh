#!/usr/bin/env bash
# Sourced by the TensorBoard check: tensorboard 2.20.0 (no TensorFlow) from
# the Python package index in a cached virtual environment
# ($PSC_TEST_CACHE; about 60 MB, created on the first run). Sets $tb_venv.
source "$(dirname "${BASH_SOURCE[0]}")/py_venv.sh"
tb_venv=$psc_test_cache/tensorboard-2.20
psc_venv "$tb_venv" 'tensorboard.backend.event_processing.plugin_event_multiplexer' \
  'tensorboard==2.20.0'
