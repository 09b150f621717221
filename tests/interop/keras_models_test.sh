#!/usr/bin/env bash
# One Keras model against pscluster (keras_models.py) in the cached Keras
# virtual environment (keras_venv.sh).
# Usage: keras_models_test.sh BIN_DIR MODEL
set -euo pipefail
bin_dir=${1:?usage: keras_models_test.sh BIN_DIR MODEL}
model=${2:?usage: keras_models_test.sh BIN_DIR MODEL}
source "$(dirname "$0")/keras_venv.sh"
exec "$venv/bin/python3" "$(dirname "$0")/keras_models.py" "$bin_dir" "$model"
