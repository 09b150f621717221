#!/usr/bin/env bash
# TensorFlow-written TFRecords read by pscluster, and the reverse
# (tfrecord_roundtrip.py), in the TensorFlow venv of tf_venv.sh.
# Usage: tfrecord_roundtrip_test.sh BIN_DIR
set -euo pipefail
bin_dir=${1:?usage: tfrecord_roundtrip_test.sh BIN_DIR}
source "$(dirname "$0")/tf_venv.sh"
exec "$tf_venv/bin/python3" "$(dirname "$0")/tfrecord_roundtrip.py" "$bin_dir"
