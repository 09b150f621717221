"""Every role's /metrics read by the real Prometheus text parser.

Runs `pscluster launch --metrics --evaluator` on a job long enough to be
scraped while it trains, reads the URLs the launcher prints, and polls each
task's /metrics (bounded in time) until its role's counters move; parses
each page with prometheus_client's parser (the reference Python client) and
checks the names docs/guide/operations.md promises. Then stops the launcher with SIGTERM
and checks that it stopped every task.

Usage: metrics_scrape.py BIN_DIR
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

COMMON = {"process_cpu_seconds_total", "process_resident_memory_bytes",
          "process_start_time_seconds", "process_open_fds", "pscluster_build_info"}
ROLE = {
    "ps": {"pscluster_ps_version", "pscluster_ps_pushes_accepted_total",
           "pscluster_ps_staleness"},
    "worker": {"pscluster_worker_steps_total", "pscluster_worker_examples_total",
               "pscluster_worker_compute_seconds_total", "pscluster_worker_comm_seconds_total",
               "pscluster_worker_step_seconds", "pscluster_worker_examples_per_second",
               "pscluster_worker_pushes_total", "pscluster_worker_retries_total"},
    "chief": {"pscluster_chief_step", "pscluster_chief_epoch", "pscluster_chief_loss",
              "pscluster_chief_accuracy", "pscluster_chief_workers_live",
              "pscluster_chief_workers_lost_total", "pscluster_chief_recoveries_total"},
    "evaluator": {"pscluster_evaluator_evaluations_total", "pscluster_evaluator_last_step"},
}
# A role's counter that shows the job moving (the value must be > 0).
MOVING = {"ps": "pscluster_ps_version", "worker": "pscluster_worker_steps_total",
          "chief": "pscluster_chief_step", "evaluator": "pscluster_evaluator_evaluations_total"}


def fail(message, log=""):
    print("metrics_scrape: FAIL: " + message, file=sys.stderr)
    if log:
        print(log[-4000:], file=sys.stderr)
    sys.exit(1)


def scrape(url):
    with urllib.request.urlopen(url, timeout=5) as reply:
        return reply.read().decode("utf-8")


def samples(text):
    """{name: {sample name: value}} by the real parser, under each family's
    name and under each sample's (the parser names a counter's family
    without its _total suffix; its sample keeps it)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            for name in (family.name, s.name):
                out.setdefault(name, {})[s.name] = s.value
    return out


def main():
    bin_dir = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="metrics_scrape.")
    log_path = os.path.join(tmp, "launch.log")
    log = open(log_path, "w")
    # The reference CNN, 1000 steps: minutes of work, stopped once scraped;
    # a unit and a checkpoint every 10 steps, for the chief's and the
    # evaluator's counters.
    launcher = subprocess.Popen(
        [os.path.join(bin_dir, "pscluster"), "launch", "--metrics", "--evaluator",
         "--workers=2", "--", "--epochs=20", "--steps_per_epoch=50", "--unit_steps=10",
         "--max_train_examples=3200", "--batch_size=64", "--intra_op_threads=1",
         "--checkpoint_dir=" + os.path.join(tmp, "ckpt"), "--checkpoint_every_steps=10",
         "--poll_interval=100ms"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        urls = {}
        deadline = time.time() + 60
        while time.time() < deadline and len(urls) < 5:
            text = open(log_path).read()
            urls = dict(re.findall(r"\[launcher\] metrics of (\S+): (http://\S+)", text))
            if launcher.poll() is not None:
                fail("the launcher exited %s" % launcher.returncode, text)
            time.sleep(0.1)
        if sorted(urls) != ["chief:0", "evaluator:0", "ps:0", "worker:0", "worker:1"]:
            fail("the launcher printed metrics URLs for %s" % sorted(urls), open(log_path).read())
        seen = {}
        deadline = time.time() + 180
        while time.time() < deadline and len(seen) < len(urls):
            for task, url in urls.items():
                if task in seen:
                    continue
                role = task.split(":")[0]
                try:
                    text = scrape(url)
                except OSError:
                    continue  # not serving yet
                families = samples(text)
                moving = families.get(MOVING[role], {})
                if any(v > 0 for v in moving.values()):
                    seen[task] = (text, families)
            if launcher.poll() is not None:
                fail("the job ended before %s showed their counters moving" %
                     sorted(set(urls) - set(seen)), open(log_path).read())
            time.sleep(0.2)
        if len(seen) < len(urls):
            fail("no moving counters within 180 s from %s" % sorted(set(urls) - set(seen)),
                 open(log_path).read())
        for task, (text, families) in sorted(seen.items()):
            role = task.split(":")[0]
            missing = (COMMON | ROLE[role]) - set(families)
            if missing:
                fail("%s lacks %s" % (task, sorted(missing)), text)
            info = families["pscluster_build_info"]
            if info.get("pscluster_build_info") != 1:
                fail("%s: build_info is %s" % (task, info), text)
            if 'role="%s"' % role not in text:
                fail("%s: build_info has no role=\"%s\"" % (task, role), text)
            if families["process_resident_memory_bytes"]["process_resident_memory_bytes"] < 1e6:
                fail("%s: resident memory under 1 MB" % task, text)
            print("%s: %d families, %s = %s" % (
                task, len(families), MOVING[role],
                max(families[MOVING[role]].values())))
        # The staleness histogram: a handful of exponential buckets.
        ps_text = seen["ps:0"][0]
        bounds = re.findall(r'pscluster_ps_staleness_bucket\{[^}]*le="([^"]+)"', ps_text)
        if [float(b) for b in bounds] != [0, 1, 2, 4, 8, 16, 32, float("inf")]:
            fail("staleness buckets %s" % bounds, ps_text)
        chief = seen["chief:0"][1]
        if chief["pscluster_chief_workers_live"]["pscluster_chief_workers_live"] != 2:
            fail("workers_live %s" % chief["pscluster_chief_workers_live"], seen["chief:0"][0])
    finally:
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGTERM)
        try:
            launcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait(timeout=10)
    text = open(log_path).read()
    pids = re.findall(r"\(pid (\d+)\)", text)
    alive = [p for p in pids if os.path.exists("/proc/" + p) and
             "zombie" not in open("/proc/%s/status" % p).read().lower()]
    if alive:
        fail("tasks still run after the launcher stopped: %s" % alive, text)
    print("metrics_scrape: OK (%d tasks scraped)" % len(seen))


if __name__ == "__main__":
    main()
