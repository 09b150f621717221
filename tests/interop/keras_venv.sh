#!/usr/bin/env bash
# Sourced by the Keras checks: the real Keras 3 (KERAS_BACKEND=jax, CPU
# only) from the Python package index in a cached virtual environment
# ($PSC_TEST_CACHE, default ~/.cache/pscluster-tests; about 700 MB, created
# on the first run). Sets $venv and exports the backend's variables.
#
# JAX's persistent compilation cache lives beside it: most of a Keras
# check's time is XLA compiling (a random initializer per weight shape, each
# train and predict function), the same programs every run, so a second run
# of the suite on the machine loads them (a model check: 14 s -> 5 s). The
# cache has a size cap, which turns on JAX's file lock (filelock), as the
# checks run in parallel; an entry is read or written under that lock.
source "$(dirname "${BASH_SOURCE[0]}")/py_venv.sh"
cache=$psc_test_cache
venv=$cache/keras-jax-3.15
export KERAS_BACKEND=jax JAX_PLATFORMS=cpu
export JAX_COMPILATION_CACHE_DIR=$cache/jax-compilation-cache
export JAX_COMPILATION_CACHE_MAX_SIZE=$((1 << 30))
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
psc_venv "$venv" 'keras, jax, scipy, filelock' 'keras==3.15.1' 'jax[cpu]' scipy filelock
