#!/usr/bin/env bash
# Every role's --metrics_port read by the real Prometheus text parser
# (prometheus_client 0.21.1 from PyPI, in a cached virtual environment under
# $PSC_TEST_CACHE, default ~/.cache/pscluster-tests; under 1 MB). Runs
# metrics_scrape.py: `pscluster launch --metrics --evaluator`, each task's
# /metrics scraped while the job trains.
# Usage: metrics_scrape_test.sh BIN_DIR
set -euo pipefail
bin_dir=${1:?usage: metrics_scrape_test.sh BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
cache=${PSC_TEST_CACHE:-$HOME/.cache/pscluster-tests}
venv=$cache/prometheus-client-0.21
if ! "$venv/bin/python3" -c 'import prometheus_client.parser' 2>/dev/null; then
  echo "metrics_scrape: creating $venv (prometheus_client 0.21.1 from PyPI)..." >&2
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'prometheus_client==0.21.1'
fi
exec "$venv/bin/python3" "$here/metrics_scrape.py" "$bin_dir"
