#!/usr/bin/env bash
# The README's and the guide's marked snippets, run as written
# (doc_snippets.py), in the Keras virtual environment of keras_venv.sh.
# Usage: doc_snippets_test.sh REPO_ROOT BIN_DIR
set -euo pipefail
repo=${1:?usage: doc_snippets_test.sh REPO_ROOT BIN_DIR}
bin_dir=${2:?usage: doc_snippets_test.sh REPO_ROOT BIN_DIR}
source "$(dirname "$0")/keras_venv.sh"
exec "$venv/bin/python3" "$(dirname "$0")/doc_snippets.py" "$repo" "$bin_dir"
