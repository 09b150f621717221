#!/usr/bin/env bash
# Sourced by the venv scripts of the checks that need a Python package from
# the package index (keras_venv.sh, tf_venv.sh, tensorboard_venv.sh,
# prometheus_venv.sh): the cache the tests share ($PSC_TEST_CACHE, default
# ~/.cache/pscluster-tests) and psc_venv, which makes one of its virtual
# environments.
psc_test_cache=${PSC_TEST_CACHE:-$HOME/.cache/pscluster-tests}

# psc_venv DIR IMPORTS PACKAGE...: makes the virtual environment DIR with
# PACKAGE... unless its python imports IMPORTS ("a, b.c"). Concurrent callers
# (tests/run_all.sh makes them while it builds, and the checks run in
# parallel) wait on DIR.lock while one makes it; a ready one is used without
# the lock. An existing one that lacks a package is first given it (pip
# installs what is missing) before it is made again from nothing.
psc_venv() {
  local dir=$1 imports=$2
  shift 2
  if "$dir/bin/python3" -c "import $imports" 2>/dev/null; then
    return 0
  fi
  mkdir -p "$(dirname "$dir")"
  (
    flock 9
    if "$dir/bin/python3" -c "import $imports" 2>/dev/null; then
      exit 0
    fi
    if [[ -x $dir/bin/pip ]]; then
      echo "py_venv: adding to $dir what it lacks of: $*" >&2
      if "$dir/bin/pip" install -q --disable-pip-version-check "$@" &&
          "$dir/bin/python3" -c "import $imports" 2>/dev/null; then
        exit 0
      fi
    fi
    echo "py_venv: creating $dir ($* from PyPI)..." >&2
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install -q --disable-pip-version-check "$@"
  ) 9>"$dir.lock"
}
