#!/usr/bin/env bash
# Sourced by the metrics check: the real Prometheus text parser
# (prometheus_client 0.21.1) from the Python package index in a cached
# virtual environment ($PSC_TEST_CACHE; under 1 MB). Sets $prom_venv.
source "$(dirname "${BASH_SOURCE[0]}")/py_venv.sh"
prom_venv=$psc_test_cache/prometheus-client-0.21
psc_venv "$prom_venv" 'prometheus_client.parser' 'prometheus_client==0.21.1'
