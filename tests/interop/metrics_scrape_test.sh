#!/usr/bin/env bash
# Every role's --metrics_port read by the real Prometheus text parser
# (prometheus_client 0.21.1 from PyPI, in the cached virtual environment of
# prometheus_venv.sh). Runs metrics_scrape.py: `pscluster launch --metrics
# --evaluator`, each task's /metrics scraped while the job trains.
# Usage: metrics_scrape_test.sh BIN_DIR
set -euo pipefail
bin_dir=${1:?usage: metrics_scrape_test.sh BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/prometheus_venv.sh"
exec "$prom_venv/bin/python3" "$here/metrics_scrape.py" "$bin_dir"
