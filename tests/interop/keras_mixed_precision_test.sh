#!/usr/bin/env bash
# A mixed_bfloat16 Keras model against pscluster (keras_mixed_precision.py)
# in the cached Keras virtual environment (keras_venv.sh).
# Usage: keras_mixed_precision_test.sh BIN_DIR MODEL
set -euo pipefail
bin_dir=${1:?usage: keras_mixed_precision_test.sh BIN_DIR MODEL}
model=${2:?usage: keras_mixed_precision_test.sh BIN_DIR MODEL}
source "$(dirname "$0")/keras_venv.sh"
exec "$venv/bin/python3" "$(dirname "$0")/keras_mixed_precision.py" "$bin_dir" "$model"
