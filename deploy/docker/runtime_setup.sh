#!/usr/bin/env bash
# The runtime image's setup, shared by deploy/Dockerfile and
# deploy/Dockerfile.prebuilt: the Debian packages that own the binaries'
# libraries (PACKAGES_FILE, runtime_packages.sh's output; with PSC_CUDA=ON
# from NVIDIA's repository too, cuda_repo.sh), the data set, and the user
# pscluster (uid/gid 10001) with its working directory /var/lib/pscluster,
# empty: the chief and the servers make checkpoints/ and logs/ themselves.
# It must stay empty. Docker copies an image's folder into a new named volume
# when a container first mounts it, and containers created at once (compose
# up) copy concurrently: with a subfolder in the image, one of them fails with
# "mkdir .../_data/checkpoints: file exists" (seen in the compose test).
# Runs as root inside the image being built.
#
# Usage: runtime_setup.sh PSC_CUDA PACKAGES_FILE
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 PSC_CUDA PACKAGES_FILE" >&2; exit 2; }
cuda=$1
list=$2
[[ -r "$list" ]] || { echo "runtime_setup.sh: cannot read $list" >&2; exit 1; }

bash "$(dirname "$0")/cuda_repo.sh" "$cuda" runtime
apt-get update -q
# shellcheck disable=SC2046  # one package per word
apt-get install -y -q --no-install-recommends $(cat "$list") dataset-fashion-mnist
apt-get clean
rm -rf /var/lib/apt/lists/*
groupadd --system --gid 10001 pscluster
useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/pscluster \
  --no-create-home --shell /usr/sbin/nologin pscluster
install -d -o 10001 -g 10001 -m 0750 /var/lib/pscluster
