#!/usr/bin/env bash
# Prints, one per line, the Debian packages that hold the shared libraries
# the given executables load (ldd, then dpkg -S), so the runtime image
# installs exactly what the build linked against, CUDA's libraries included
# when they come from packages. Run where the binaries were built: inside the
# build image (deploy/Dockerfile), or on the Debian 12 host whose build
# deploy/docker/stage_prebuilt.sh stages.
#
# Usage: deploy/docker/runtime_packages.sh BINARY...
# Exits 1 naming a library that is missing or that no package owns, except
# libcuda.so.1, which the NVIDIA container toolkit mounts from the host.
set -euo pipefail

[[ $# -gt 0 ]] || { echo "usage: $0 BINARY..." >&2; exit 2; }

# Every library once (path -> a binary that needs it), from all binaries.
declare -A needed_by=()
status=0
for binary in "$@"; do
  while read -r line; do
    case "$line" in
      *"=> not found"*)
        lib=${line%% *}
        if [[ "$lib" == libcuda.so.1 ]]; then continue; fi
        echo "runtime_packages.sh: $binary needs $lib, which is not found" >&2
        status=1
        ;;
      *"=> /"*)
        path=${line#*=> }
        path=${path%% (*}
        [[ -n "${needed_by[$path]:-}" ]] || needed_by[$path]=$binary
        ;;
      /*)  # the dynamic loader: "/lib64/ld-linux-x86-64.so.2 (0x...)"
        path=${line%% (*}
        [[ -n "${needed_by[$path]:-}" ]] || needed_by[$path]=-
        ;;
    esac
  done < <(ldd "$binary")
done

# The names dpkg may know a library by: as found, resolved, and with merged
# /usr either way (/lib/x/y as /usr/lib/x/y or the other way).
candidates() {
  local path=$1 real c
  real=$(readlink -f "$path")
  for c in "$path" "$real"; do
    echo "$c"
    case "$c" in
      /usr/*) echo "${c#/usr}" ;;
      *) echo "/usr$c" ;;
    esac
  done
}

# One dpkg-query for all of them (each call reads every package's file list).
declare -A owner_of=()
mapfile -t all < <(for path in "${!needed_by[@]}"; do candidates "$path"; done | sort -u)
if [[ ${#all[@]} -gt 0 ]]; then
  while IFS= read -r line; do
    # "pkg:arch: /path" or "pkg1, pkg2: /path"; diversions and the like are skipped.
    [[ "$line" == *": /"* ]] || continue
    file=${line##*: }
    pkg=${line%%: /*}
    pkg=${pkg%%,*}
    pkg=${pkg%%:*}
    owner_of[$file]=$pkg
  done < <(dpkg-query -S "${all[@]}" 2>/dev/null || true)
fi

declare -A packages=()
for path in "${!needed_by[@]}"; do
  found=""
  while read -r c; do
    if [[ -n "${owner_of[$c]:-}" ]]; then
      found=${owner_of[$c]}
      break
    fi
  done < <(candidates "$path")
  if [[ -n "$found" ]]; then
    packages[$found]=1
  elif [[ "${needed_by[$path]}" != - ]]; then
    echo "runtime_packages.sh: no package owns $path (needed by ${needed_by[$path]})" >&2
    status=1
  fi
done
[[ $status -eq 0 ]] || exit 1
printf '%s\n' "${!packages[@]}" | sort
