#!/usr/bin/env bash
# Prints, one per line, the Debian packages that hold the shared libraries
# the given executables load (ldd, then dpkg -S), so the runtime image
# installs exactly what the build image linked against, CUDA's libraries
# included when they come from packages. Run inside the build image.
#
# Usage: deploy/docker/runtime_packages.sh BINARY...
# Exits 1 naming a library that is missing or that no package owns, except
# libcuda.so.1, which the NVIDIA container toolkit mounts from the host.
set -euo pipefail

[[ $# -gt 0 ]] || { echo "usage: $0 BINARY..." >&2; exit 2; }

owner() {  # the package that owns library path $1, or nothing
  local path=$1 real candidates=() c
  real=$(readlink -f "$path")
  candidates=("$path" "$real")
  # Merged /usr: dpkg may know /lib/x/y as /usr/lib/x/y or the other way.
  for c in "$path" "$real"; do
    case "$c" in
      /usr/*) candidates+=("${c#/usr}") ;;
      *) candidates+=("/usr$c") ;;
    esac
  done
  for c in "${candidates[@]}"; do
    if out=$(dpkg-query -S "$c" 2>/dev/null); then
      echo "${out%%:*}"
      return 0
    fi
  done
  return 1
}

declare -A packages=()
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
        if pkg=$(owner "$path"); then packages[$pkg]=1; else
          echo "runtime_packages.sh: no package owns $path (needed by $binary)" >&2
          status=1
        fi
        ;;
      /*)  # the dynamic loader: "/lib64/ld-linux-x86-64.so.2 (0x...)"
        path=${line%% (*}
        if pkg=$(owner "$path"); then packages[$pkg]=1; fi
        ;;
    esac
  done < <(ldd "$binary")
done
[[ $status -eq 0 ]] || exit 1
printf '%s\n' "${!packages[@]}" | sort
