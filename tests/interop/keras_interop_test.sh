#!/usr/bin/env bash
# pscluster checked against the real Keras 3 (keras_venv.sh). Runs
# keras_interop.py with the build's binaries.
# Usage: keras_interop_test.sh BIN_DIR
set -euo pipefail
bin_dir=${1:?usage: keras_interop_test.sh BIN_DIR}
source "$(dirname "$0")/keras_venv.sh"
exec "$venv/bin/python3" "$(dirname "$0")/keras_interop.py" "$bin_dir"
