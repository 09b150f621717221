#!/usr/bin/env python3
"""TensorFlow's ParameterServerStrategy (the anchor ../shared/anchors/tf_pss.py) on the hosts of a
tests/netsim/testbed.sh testbed, for bench/netsim.sh.

The anchor starts every task on 127.0.0.1. This driver runs the anchor's own code, unchanged, with
one difference: its ps and worker tasks are started on the testbed's hosts (`testbed.sh exec`), at
the addresses of PSC_TF_CLUSTER (a TF cluster spec: {"ps": [...], "worker": [...], "chief":
[...]}), each on the host PSC_TF_HOSTS names ({"ps:0": 0, "worker:0": 2, ...}). Run it inside the
chief's host, with the venv's interpreter and the anchor's flags:

    testbed.sh exec NAME 4 VENV/bin/python3 bench/tf_pss_netsim.py --workers 2 --ps 1 \\
        --steps 200 --out result.json
"""

import importlib.util
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ANCHOR = os.path.join(HERE, "..", "..", "shared", "anchors", "tf_pss.py")
TESTBED = os.path.join(HERE, "..", "tests", "netsim", "testbed.sh")


def load_anchor():
    path = os.environ.get("PSC_TF_PSS", ANCHOR)
    spec = importlib.util.spec_from_file_location("tf_pss", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, os.path.abspath(path)


def main():
    tf_pss, anchor_path = load_anchor()
    cluster = json.loads(os.environ["PSC_TF_CLUSTER"])
    hosts = json.loads(os.environ["PSC_TF_HOSTS"])
    testbed = os.environ["PSC_TESTBED"]

    def chief_on_hosts(args):
        if len(cluster["worker"]) != args.workers or len(cluster["ps"]) != args.ps:
            sys.exit(f"tf_pss_netsim: PSC_TF_CLUSTER has {len(cluster['worker'])} workers and "
                     f"{len(cluster['ps'])} ps; the flags say {args.workers} and {args.ps}")
        env = tf_pss.thread_env(args.threads, args.server_inter_op)
        procs = {}
        try:
            for job in ("ps", "worker"):
                for i in range(len(cluster[job])):
                    # testbed.sh execs `ip netns exec`, which execs the interpreter:
                    # the pid is the task's (the anchor reads its CPU time).
                    procs[f"{job}:{i}"] = subprocess.Popen(
                        ["bash", TESTBED, "exec", testbed, str(hosts[f"{job}:{i}"]),
                         sys.executable, anchor_path, "--serve", f"{job}:{i}",
                         "--cluster", json.dumps(cluster), "--threads", str(args.threads),
                         "--server-inter-op", str(args.server_inter_op)], env=env)
            os.environ.update({k: env[k] for k in (
                "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS",
                "TF_CPP_MIN_LOG_LEVEL", "TF_USE_LEGACY_KERAS", "CUDA_VISIBLE_DEVICES")})
            return tf_pss.run_chief(args, cluster, procs)
        finally:
            for p in procs.values():
                p.terminate()
            for p in procs.values():
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()

    tf_pss.chief = chief_on_hosts
    tf_pss.main()


if __name__ == "__main__":
    main()
