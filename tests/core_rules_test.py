#!/usr/bin/env python3
"""The rules the build enforces on the transport-free cores, checked on this
build (tests/CMakeLists.txt runs it as CoreRulesTest):

1. Every object of a transport-free library (cmake/PscHelpers.cmake) is
   compiled with the poisoned gRPC headers first, and including
   <grpcpp/...> with those flags is an #error (a GRPC library's flags
   compile it: the check is not vacuous).
2. The role cores (ps_core, chief_core, worker_core, evaluator) read time
   only through base::Clock: no absl::Now() or absl::SleepFor() in their
   sources.

Usage: core_rules_test.py <build dir>
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

CORES = ["psc_ps_core", "psc_chief_core", "psc_worker_core", "psc_evaluator"]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def target_of(entry):
    m = re.search(r"CMakeFiles/(psc_\w+)\.dir/", entry.get("output", "") + entry["command"])
    return m.group(1) if m else None


def sources(entry):
    """The source files an entry compiles: its file, or the files a unity
    build's batch (CMake's Unity/unity_N_cxx.cxx) includes."""
    path = entry["file"]
    if "/Unity/unity_" not in path:
        return [path]
    text = open(path).read()
    included = re.findall(r'^#include "([^"]+)"', text, re.M)
    if not included:
        fail(f"{path}: a unity batch that includes no source")
    return included


def is_cxx(entry):
    return entry["file"].endswith((".cc", ".cxx"))


def compile_snippet(entry, source, obj):
    argv = shlex.split(entry["command"])
    out = []
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a in ("-o", "-c", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-MD", "-MMD"):
            continue
        out.append(a)
    out += ["-c", source, "-o", obj]
    return subprocess.run(out, cwd=entry["directory"], capture_output=True, text=True)


def main():
    build = os.path.abspath(sys.argv[1])
    entries = json.load(open(os.path.join(build, "compile_commands.json")))
    free = set(open(os.path.join(build, "transport_free_targets.txt")).read().split())
    poison = os.path.join(build, "transport_free")
    by_target = {}
    for e in entries:
        t = target_of(e)
        if t:
            by_target.setdefault(t, []).append(e)
    for core in CORES + ["psc_ps_client", "psc_io"]:
        if core not in free:
            fail(f"{core} is not a transport-free library")
        if core not in by_target:
            fail(f"no compile commands for {core}")
    checked = 0
    for t in free:
        for e in by_target.get(t, []):
            if e["file"].endswith(".cu"):
                continue
            if poison not in e["command"]:
                fail(f"{e['file']} ({t}) is compiled without {poison}")
            checked += 1
    print(f"ok: {checked} objects of {len(free)} transport-free libraries see the poisoned headers")

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "uses_grpc.cc")
        with open(src, "w") as f:
            f.write("#include <grpcpp/client_context.h>\nint main() { return 0; }\n")
        core = next(e for e in by_target["psc_ps_core"] if is_cxx(e))
        r = compile_snippet(core, src, os.path.join(tmp, "a.o"))
        if r.returncode == 0 or "transport-free library" not in r.stderr:
            fail("including <grpcpp/...> with ps_core's flags did not fail as it must:\n" + r.stderr)
        error = next(l for l in r.stderr.splitlines() if "error:" in l)
        print("ok: <grpcpp/client_context.h> with ps_core's flags: " + error.strip()[:160])
        rpc = next(e for e in by_target["psc_rpc"] if is_cxx(e))
        r = compile_snippet(rpc, src, os.path.join(tmp, "b.o"))
        if r.returncode != 0:
            fail("the same include with rpc's flags does not compile:\n" + r.stderr)
        print("ok: the same include compiles with rpc's flags")

    clock_calls = re.compile(r"\babsl::(Now|SleepFor)\(")
    bad = []
    read = 0
    for core in CORES:
        for e in by_target[core]:
            for path in sources(e):
                text = open(path).read()
                read += 1
                code = re.sub(r"//[^\n]*", "", text)
                if clock_calls.search(code):
                    bad.append(f"{path} ({core})")
    if bad:
        fail("absl::Now()/absl::SleepFor() in a core (use base::Clock): " + ", ".join(bad))
    print(f"ok: the {read} sources of {', '.join(CORES)} read time only through base::Clock")


if __name__ == "__main__":
    main()
