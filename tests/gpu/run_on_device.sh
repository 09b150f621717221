#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, in one go: unpacks the
# bundle made by make_bundle.sh, finds cuDNN/cuBLAS (system or PyTorch's
# nvidia-* wheels), runs the `gpu` tests and the daemons' device listing,
# and prints a short table. Results also go to $OUT (when set) as JSON.
#
# Usage: bash tests/gpu/run_on_device.sh [bundle.tar.xz]
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=${1:-.gpu_bundle/pscluster-gpu.tar.xz}
work=$(mktemp -d)
tar -C "$work" -xJf "$bundle" || { echo "run_on_device.sh: cannot unpack $bundle" >&2; exit 1; }
root="$work/pscluster"

# CUDA libraries: the toolkit's, else those inside PyTorch's wheels.
libdirs=("$root/lib" /usr/local/cuda/lib64)
for mod in nvidia.cudnn nvidia.cublas nvidia.cuda_runtime nvidia.nccl; do
  d=$(python3 -c "import $mod, os; print(os.path.join(list($mod.__path__)[0], 'lib'))" 2>/dev/null) || continue
  [[ -d "$d" ]] && libdirs+=("$d")
done
export LD_LIBRARY_PATH="$(IFS=:; echo "${libdirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

declare -a rows
row() { rows+=("$(printf '%-34s %-8s %s' "$1" "$2" "$3")"); }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1 |
  { read -r line && echo "GPU: $line"; } || echo "GPU: nvidia-smi not available"

devices=$("$root/bin/worker" --list_devices 2>&1)
devices_rc=$?
echo "$devices"
row "worker --list_devices" "$([[ $devices_rc -eq 0 ]] && echo ok || echo FAIL)" \
    "$(grep -c 'device:GPU' <<<"$devices") GPU(s)"

out=$("$root/bin/gpu_info_test" 2>&1)
rc=$?
echo "$out" | tail -n 15
skipped=$(grep -c '^\[  SKIPPED \] GpuInfoTest.*ms)$' <<<"$out")
row "gpu_info_test" "$([[ $rc -eq 0 ]] && echo ok || echo FAIL)" \
    "$(grep -E '^\[  PASSED  \]' <<<"$out" | head -1) skipped=$skipped"

echo
printf '%-34s %-8s %s\n' "CHECK" "RESULT" "DETAIL"
printf '%s\n' "${rows[@]}"
if [[ -n "${OUT:-}" ]]; then printf '%s\n' "${rows[@]}" >"$OUT/gpu_table.txt"; fi
rm -rf "$work"
[[ $rc -eq 0 && $devices_rc -eq 0 ]]
