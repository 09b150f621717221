#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, in one go (under 10
# minutes): unpacks the bundle made by make_bundle.sh, checks the host's
# glibc and libstdc++ against what the binaries need (needs.txt), finds the
# CUDA runtime, cuBLAS, cuDNN and NCCL (the toolkit's, else PyTorch's nvidia-*
# wheels) and puts them on LD_LIBRARY_PATH (Python keeps the environment it
# had), prints the device, the driver and the versions and files of the CUDA
# libraries loaded, then
#   1. runs the `gpu` tests (conformance of every op against the reference,
#      a training step against the CPU backend, bit-identical gradients of two
#      backends, memory caps, the NCCL collectives on one GPU, mirrored
#      replicas' gradient reduction on the GPUs, as one NCCL rank there);
#      a skipped test is a FAIL here, since every gpu test skips where CUDA
#      cannot start;
#   2. runs bench/compute_gpu (batch 128 and 1024, heuristic and autotuned
#      algorithms, PyTorch on the same GPU);
#   3. reports the device memory a worker holds: with --memory_growth,
#      without it (reserve), and with --virtual_devices=2 --memory_limit_mb=2048;
#      then trains the same short job under mixed_float16 (the loss scaled:
#      its final scale and the steps skipped) and mixed_bfloat16;
#   4. runs the reference job (seed_cnn, Fashion-MNIST, sync) twice: 1 ps and
#      2 worker processes sharing the GPU, each with --memory_limit_mb; then
#      1 ps and 1 worker with --virtual_devices=2;
# and prints a table. Everything also goes to $OUT (when set): the table,
# each test's and job's log, the bench's JSON.
#
# Usage: bash tests/gpu/run_on_device.sh [bundle.tar.xz]
# Env: EPOCHS (reference job, default 2), WORKER_LIMIT_MB (default 4096),
#      DEADLINE_S (skip what would start after this, default 540); to try the
#      script's mechanics without a GPU: JOB_DEVICE=cpu, JOB_FLAGS (more
#      chief flags, e.g. --max_train_examples=6400 --steps_per_epoch=10)
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=${1:-.gpu_bundle/pscluster-gpu.tar.xz}
EPOCHS=${EPOCHS:-2}
WORKER_LIMIT_MB=${WORKER_LIMIT_MB:-4096}
DEADLINE_S=${DEADLINE_S:-540}
JOB_DEVICE=${JOB_DEVICE:-gpu}
read -r -a job_flags <<<"${JOB_FLAGS:-}"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
tar -C "$work" -xJf "$bundle" || { echo "run_on_device.sh: cannot unpack $bundle" >&2; exit 1; }
root="$work/pscluster"
bin="$root/bin"
data="$root/data"
logs=${OUT:-$work/logs}
mkdir -p "$logs"
py=$(command -v python3 || true)

# ---- The host: the bundle leaves glibc and the C++ runtime to it
# (make_bundle.sh wrote what the binaries need into needs.txt).
read -r need_glibc need_glibcxx <"$root/needs.txt"
host_glibc="GLIBC_$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
host_libstdcxx=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/{print $NF; exit}')
host_glibcxx=$(grep -aoE 'GLIBCXX_3\.4\.[0-9]+' "${host_libstdcxx:-/nonexistent}" 2>/dev/null | sort -uV | tail -1)
at_least() { [[ -n "$2" && "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" == "$1" ]]; }
host_ok=ok
at_least "$need_glibc" "$host_glibc" && at_least "$need_glibcxx" "$host_glibcxx" || host_ok=FAIL

# ---- Libraries: the bundle's, the toolkit's, then every lib folder of
# PyTorch's nvidia-* wheels (nvidia/cudnn/lib, nvidia/cu13/lib, ...). The
# environment from before is kept for the PyTorch peer, which brings its own.
peer_ld_library_path=${LD_LIBRARY_PATH:-unset}
# Python (the PyTorch peer, the helpers below) runs in that environment, not
# with the bundle's libraries first.
host_python() {
  if [[ "$peer_ld_library_path" == unset ]]; then
    env -u LD_LIBRARY_PATH "${py:-python3}" "$@"
  else
    LD_LIBRARY_PATH="$peer_ld_library_path" "${py:-python3}" "$@"
  fi
}
libdirs=("$root/lib")
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d "$d" ]] && libdirs+=("$d")
done
if [[ -n "$py" ]]; then
  nv=$("$py" -c "import nvidia, os; print(' '.join(os.path.abspath(p) for p in nvidia.__path__))" 2>/dev/null || true)
  for top in $nv; do
    while read -r d; do libdirs+=("$d"); done < <(find "$top" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u)
  done
fi
export LD_LIBRARY_PATH="$(IFS=:; echo "${libdirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

declare -a rows
row() { rows+=("$(printf '%-44s %-6s %s' "$1" "$2" "$3")"); }
over_time() { (( SECONDS > DEADLINE_S )); }

gpu_line=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
echo "GPU: ${gpu_line:-nvidia-smi not available}"
row "device" "$([[ -n "$gpu_line" ]] && echo ok || echo FAIL)" "${gpu_line:-nvidia-smi not available}"
row "host glibc, libstdc++" "$host_ok" \
    "has ${host_glibc:-?} and ${host_glibcxx:-?} (${host_libstdcxx:-no libstdc++}); needs $need_glibc, $need_glibcxx"
# The CUDA libraries are the GPU plugin's (the worker and the tests load it
# with dlopen; cuda_status_test and cuda_backend_test link the runtime too),
# so the plugin is what must resolve them: libnccl is not bundled
# (make_bundle.sh).
ldd_bins=("$bin/libpsc_cuda_plugin.so" "$bin/worker" "$bin/cuda_backend_test")
missing=$(ldd "${ldd_bins[@]}" 2>/dev/null | grep 'not found' | sort -u | awk '{print $1}' | tr '\n' ' ')
row "libraries" "$([[ -z "$missing" ]] && echo ok || echo FAIL)" "${missing:+missing: }${missing:-all found}"
# Which CUDA, cuBLAS, cuDNN and NCCL files the loader picked.
ldd "${ldd_bins[@]}" 2>/dev/null | awk '/libcudart|libcublas|libcudnn|libnccl/{print "  " $1 " => " $3}' \
  | sort -u | tee "$logs/cuda_libraries.txt"

devices=$("$bin/worker" --list_devices 2>&1)
echo "$devices" | tee "$logs/list_devices.txt"
row "worker --list_devices" "$(grep -q physical_device:GPU <<<"$devices" && echo ok || echo FAIL)" \
    "$(grep -c 'physical_device:GPU' <<<"$devices") GPU(s)"
# The versions the process loaded (runtime, driver, cuDNN, cuBLAS and their files).
versions=$(grep 'GPU libraries' <<<"$devices" | sed 's/^GPU libraries: //')
row "versions loaded" "$([[ -n "$versions" ]] && echo ok || echo FAIL)" "${versions:-none reported}"

# ---- 1. The gpu tests.
failed=0
for t in $(cat "$root/gpu_tests.txt"); do
  timeout 300 "$bin/$t" >"$logs/$t.txt" 2>&1
  rc=$?
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$logs/$t.txt" | awk '{print $4}')
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$logs/$t.txt" | awk '{print $4}')
  nfailed=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$logs/$t.txt" | awk '{print $4}')
  # On the GPU machine a skipped test is a failure: every gpu test skips
  # where CUDA cannot start, so "all skipped" must not look green. Only the
  # tests that need two GPUs ("needs 2 GPUs") may skip on a one-GPU machine.
  multi=$(grep -c '^needs 2 GPUs' "$logs/$t.txt")
  skipped=$(( ${skipped:-0} - multi ))
  result=ok
  [[ $rc -ne 0 || "$skipped" -gt 0 || "${passed:-0}" -eq 0 ]] && { result=FAIL; failed=1; }
  row "$t" "$result" \
      "passed ${passed:-0}, failed ${nfailed:-0}, skipped ${skipped}, multi-GPU skipped ${multi}$([[ $rc -eq 124 ]] && echo ', TIMEOUT')"
  grep -E '^\[  FAILED  \] [A-Z]|^\[  SKIPPED \] [A-Z]|Skipped$' -B1 -A1 "$logs/$t.txt" | head -20
done

# ---- 2. The benchmark.
if ! over_time; then
  timeout 300 "$bin/compute_gpu" --python="${py:-/usr/bin/python3}" --out="$logs/compute_gpu.json" \
    --peer_ld_library_path="$peer_ld_library_path" >"$logs/compute_gpu.txt" 2>&1
  rc=$?
  cat "$logs/compute_gpu.txt"
  summary=$(host_python - "$logs/compute_gpu.json" <<'PY' 2>/dev/null
import json, sys
j = json.load(open(sys.argv[1]))
if "skipped" in j: print("SKIPPED: " + j["skipped"]); sys.exit()
torch = j.get("torch", {}).get("examples_per_s", {})
def line(key, ratio_key):
    ours = {b: v.get("examples_per_s", v.get("error")) for b, v in j.get(key, {}).items()}
    return ", ".join("batch %s: %s ex/s (torch %s, x%s)" % (
        b, ours[b], round(torch[b], 1) if b in torch else "n/a",
        j.get(ratio_key, {}).get(b, "n/a")) for b in ours)
out = "heuristic " + line("pscluster", "speedup_vs_torch")
if "pscluster_autotune" in j: out += "; autotune " + line("pscluster_autotune", "speedup_vs_torch_autotune")
print(out + ("" if torch else "; torch: " + j.get("torch_unavailable", "?")[:300]))
PY
)
  # A bench that skipped on the GPU machine did not run: that is a failure.
  bench_ok=ok
  [[ $rc -ne 0 || -z "$summary" || "$summary" == SKIPPED* ]] && bench_ok=FAIL
  row "bench compute_gpu" "$bench_ok" "${summary:-see compute_gpu.txt}"
fi

# ---- Device memory: nvidia-smi's used memory above the idle baseline,
# sampled every 0.2 s while `$@` runs; the worker's own allocator figures
# come from its "device memory:" log lines.
used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -1; }
peak_while() {
  local log=$1; shift
  local base peak now
  base=$(used_mib); peak=${base:-0}
  "$@" >"$log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  while kill -0 "$pid" 2>/dev/null; do
    now=$(used_mib); [[ -n "$now" && "$now" -gt "$peak" ]] && peak=$now
    sleep 0.2
  done
  wait "$pid"
  local rc=$?
  echo "$rc $(( peak - ${base:-0} ))"
}

# ---- 3. What a worker holds.
# --device=gpu: a worker that fell back to the CPU would measure nothing.
short=(--standalone --data_dir="$data" --model=seed_cnn --batch_size=128 --epochs=1
       --steps_per_epoch=40 --max_train_examples=10000 --device="$JOB_DEVICE")
for mode in "--memory_growth" "" "--virtual_devices=2 --memory_limit_mb=2048"; do
  over_time && break
  name="memory ${mode:-(reserve, default)}"
  # shellcheck disable=SC2086
  read -r rc mib < <(peak_while "$logs/memory${mode// /_}.txt" "$bin/worker" "${short[@]}" $mode)
  own=$(grep -oE 'holds [0-9]+ MiB \(peak in use [0-9]+ MiB' "$logs/memory${mode// /_}.txt" | tr '\n' ' ')
  result=ok
  [[ $rc -ne 0 || ( "$JOB_DEVICE" == gpu && -z "$own" ) ]] && result=FAIL
  row "$name" "$result" "nvidia-smi +${mib} MiB; allocator: ${own:-n/a}"
  grep -m3 'cudnn: replica 0' "$logs/memory${mode// /_}.txt"
done

# ---- 3b. Mixed precision on the GPU (issue 41): the short job above in
# each 16-bit policy; mixed_float16 scales its loss (Keras's
# auto_scale_loss), and the result file says how.
for policy in mixed_float16 mixed_bfloat16; do
  over_time && break
  "$bin/worker" "${short[@]}" --memory_growth --dtype_policy="$policy" \
    --metrics_out="$logs/mixed_$policy.json" >"$logs/mixed_$policy.txt" 2>&1
  rc=$?
  detail=$(host_python -c "
import json; j = json.load(open('$logs/mixed_$policy.json')); s = j.get('loss_scale') or {}
print('%s; test_accuracy %.4f, %.0f examples/s; loss scale %s, %s steps skipped' % (
    j['compute_dtypes'], j['test_accuracy'], j['examples_per_sec'], s.get('final', 'none'),
    s.get('steps_skipped', 0)))" 2>/dev/null)
  row "mixed precision: $policy" "$([[ $rc -eq 0 && -n "$detail" ]] && echo ok || echo FAIL)" \
      "${detail:-see mixed_$policy.txt}"
  tail -n 2 "$logs/mixed_$policy.txt"
done

# ---- 4. The reference job on a cluster started by hand (the launcher
# passes flags to the chief only; these workers need their own).
free_ports() {
  host_python -c "
import socket
ss = [socket.socket() for _ in range($1)]
for s in ss: s.bind(('127.0.0.1', 0))
print(' '.join(str(s.getsockname()[1]) for s in ss))"
}
run_job() {  # name workers worker-flags...
  local name=$1 nworkers=$2; shift 2
  local dir="$logs/job_${name}"
  mkdir -p "$dir"
  read -r -a ports < <(free_ports $((nworkers + 2)))
  local chief="\"127.0.0.1:${ports[0]}\"" ps="\"127.0.0.1:${ports[1]}\"" workers=""
  for ((i = 0; i < nworkers; ++i)); do workers+="${workers:+,}\"127.0.0.1:${ports[$((i + 2))]}\""; done
  local cluster="{\"chief\":[$chief],\"ps\":[$ps],\"worker\":[$workers]}"
  tf() { echo "{\"cluster\":$cluster,\"task\":{\"type\":\"$1\",\"index\":$2}}"; }
  local job_pids=()
  TF_CONFIG=$(tf ps 0) "$bin/ps_server" >"$dir/ps.txt" 2>&1 & job_pids+=($!)
  for ((i = 0; i < nworkers; ++i)); do
    TF_CONFIG=$(tf worker $i) "$bin/worker" "$@" >"$dir/worker$i.txt" 2>&1 & job_pids+=($!)
  done
  pids+=("${job_pids[@]}")
  read -r rc mib < <(peak_while "$dir/chief.txt" env TF_CONFIG="$(tf chief 0)" timeout 300 \
    "$bin/chief" --mode=sync --epochs="$EPOCHS" --data_dir="$data" --metrics_out="$dir/result.json" \
    "${job_flags[@]}")
  for p in "${job_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  wait "${job_pids[@]}" 2>/dev/null
  local detail
  detail=$(host_python -c "
import json; j = json.load(open('$dir/result.json'))
print('test_accuracy %.4f, %.0f examples/s, %.0fs' % (j['test_accuracy'], j['examples_per_sec'], j['wall_s']))" 2>/dev/null)
  row "job: $name" "$([[ $rc -eq 0 ]] && echo ok || echo FAIL)" \
      "${detail:-no result (see $dir)}; GPU memory +${mib} MiB"
  tail -n 3 "$dir/chief.txt"
}
over_time || run_job "1ps_2workers_limit${WORKER_LIMIT_MB}" 2 --device="$JOB_DEVICE" \
  --memory_limit_mb="$WORKER_LIMIT_MB"
over_time || run_job "1ps_1worker_2virtual" 1 --device="$JOB_DEVICE" --virtual_devices=2 \
  --memory_limit_mb=2048
over_time && row "deadline" "SKIP" "stopped starting new checks after ${DEADLINE_S}s"

echo
printf '%-44s %-6s %s\n' "CHECK" "RESULT" "DETAIL"
printf '%s\n' "${rows[@]}" | tee "$logs/gpu_table.txt"
echo "($SECONDS s)"
! printf '%s\n' "${rows[@]}" | grep -q ' FAIL '
