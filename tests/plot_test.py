"""pscluster.plot and pscluster.modes_summary on fabricated result files.

Runs `python3 -m pscluster.plot` and `python3 -m pscluster.modes_summary`
as `pscluster plot` runs them (PYTHONPATH=<repo>/python), on a sync run, an
async run with a staleness histogram and a sync run with a backup worker
and a straggler: the image is a PNG of the figure's size, the summary's
times to 0.80 and 0.85 validation accuracy are those of the evaluations
written here, and bad input is one line naming the file and the key, exit 2.

Usage: python3 tests/plot_test.py  (the interpreter needs matplotlib; if it
lacks it, the test runs itself again under $PSC_PYTHON or /usr/bin/python3
when that one has it.)
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIDTH, HEIGHT = 1600, 900  # pscluster.plot's figure: 16 x 9 inches at 100 dpi


def _has_matplotlib(python):
    return subprocess.run([python, "-c", "import matplotlib"], capture_output=True).returncode == 0


def _under_matplotlib():
    """Re-executes this test under an interpreter with matplotlib, if this one lacks it."""
    if _has_matplotlib(sys.executable):
        return
    for python in (os.environ.get("PSC_PYTHON"), "/usr/bin/python3"):
        if python and os.path.exists(python) and _has_matplotlib(python):
            print(f"plot_test: {sys.executable} has no matplotlib; running under {python}",
                  file=sys.stderr)
            os.execv(python, [python] + sys.argv)
    sys.exit(f"plot_test: no python3 with matplotlib ({sys.executable}, $PSC_PYTHON, "
             "/usr/bin/python3); Debian: apt-get install python3-matplotlib")


def _evaluations(points, per_step=126):
    """[(step, train_s, val_accuracy)] -> the result file's "evaluations"."""
    return [{"step": s, "train_s": t, "examples_seen": s * per_step, "val_loss": 1.5 - a,
             "val_accuracy": a} for s, t, a in points]


def _result(mode, evaluations, **extra):
    r = {
        "mode": mode, "strategy": "parameter_server", "model": "seed_cnn",
        "cluster": {"ps": 1, "workers": 3}, "batch_size": 126, "steps": 200,
        "epochs": [
            {"epoch": 1, "loss": 0.9, "accuracy": 0.68, "val_loss": 0.7, "val_accuracy": 0.78,
             "wall_s": 30.0},
            {"epoch": 2, "loss": 0.55, "accuracy": 0.80, "val_loss": 0.5, "val_accuracy": 0.84,
             "wall_s": 29.0},
        ],
        "test_loss": 0.45, "test_accuracy": 0.8321, "wall_s": 70.0, "train_s": 60.0,
        "examples_per_sec": 1234.5, "examples_seen": 25200, "eval_every_steps": 50,
        "gradients_dropped_stale": 0, "staleness": {"mean": 0.0, "p99": 0.0, "max": 0},
        "staleness_bound": 0, "replicas_to_aggregate": 0, "evaluations": evaluations,
        "workers": [{"worker": i, "straggler_factor": 1.0, "steps": 200, "step_s": 0.1,
                     "compute_s_per_step": 0.08, "examples": 8400, "examples_dropped": 0}
                    for i in range(3)],
    }
    r.update(extra)
    return r


# Times to 0.80 / 0.85 (interpolated on train_s between the evaluations around the crossing):
#   sync:      (20 s, 0.78) -> (30 s, 0.82): 25.0 s;  (30 s, 0.82) -> (40 s, 0.86): 37.5 s
#   async:     the first evaluation (8 s, 0.81) already reaches 0.80: 8.0 s; 0.85 not reached
#   straggler: (15 s, 0.79) -> (45 s, 0.85): 20.0 s; 0.85 at the evaluation itself: 45.0 s
SYNC = _result("sync", _evaluations([(50, 10.0, 0.70), (100, 20.0, 0.78), (150, 30.0, 0.82),
                                     (200, 40.0, 0.86)]))
ASYNC = _result("async", _evaluations([(50, 8.0, 0.81), (100, 16.0, 0.83), (150, 24.0, 0.84)]),
                examples_per_sec=1500.0, gradients_dropped_stale=0,
                staleness={"mean": 0.95, "p99": 2.0, "max": 3, "histogram": [100, 250, 40, 6]})
STRAGGLER = _result("sync", _evaluations([(100, 15.0, 0.79), (200, 45.0, 0.85)]),
                    replicas_to_aggregate=2, examples_per_sec=900.0, gradients_dropped_stale=200,
                    staleness={"mean": 0.0, "p99": 0.0, "max": 0})
STRAGGLER["workers"][2].update(straggler_factor=3.0, step_s=0.3, examples_dropped=8000)


class ResultFilesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="plot_test-")
        cls.files = {name: cls.write(name + ".json", json.dumps(r, indent=1))
                     for name, r in (("sync", SYNC), ("async", ASYNC), ("straggler", STRAGGLER))}

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    @classmethod
    def write(cls, name, text):
        path = os.path.join(cls.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def module(self, name, *args):
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        return subprocess.run([sys.executable, "-m", f"pscluster.{name}", *args],
                              capture_output=True, text=True, env=env, timeout=120)

    def broken(self, name, result):
        """A copy of the sync run changed by result(r), written as name."""
        r = json.loads(json.dumps(SYNC))
        result(r)
        return self.write(name, json.dumps(r))

    def check_png(self, path):
        with open(path, "rb") as f:
            data = f.read()
        self.assertTrue(data.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG")
        self.assertGreater(len(data), 20_000, "too small for six panels")
        self.assertLess(len(data), 5_000_000)
        import matplotlib.image
        self.assertEqual(matplotlib.image.imread(path).shape[:2], (HEIGHT, WIDTH))

    def test_plot_writes_a_png_of_the_figure(self):
        out = os.path.join(self.dir.name, "modes.png")
        r = self.module("plot", *self.files.values(), f"--out={out}", "--title=Sync or async?")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_png(out)

    def test_plot_of_sync_runs_only_and_runs_without_workers(self):
        no_workers = self.broken("no_workers.json", lambda r: r.pop("workers"))
        out = os.path.join(self.dir.name, "sync_only.png")
        r = self.module("plot", self.files["sync"], no_workers, f"--out={out}",
                        "--label=one", "--label=two")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_png(out)

    def test_null_validation_points_are_skipped(self):
        # NaN in the chief is null in the file: such an evaluation is no point.
        def add_null(r):
            r["evaluations"].insert(2, {"step": 125, "train_s": 25.0, "examples_seen": 15750,
                                        "val_loss": None, "val_accuracy": None})
        path = self.broken("null_point.json", add_null)
        r = self.module("modes_summary", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[2],
                         "| sync | 25.0 | 37.5 | 0.8321 | 1,234 | 0.00 / 0 | 0 | — |")
        out = os.path.join(self.dir.name, "null_point.png")
        r = self.module("plot", path, f"--out={out}")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_png(out)

    def test_a_regression_plots_its_validation_loss(self):
        # A regression has no accuracy: every val_accuracy is null.
        def regression(r):
            for e in r["evaluations"]:
                e["val_accuracy"] = None
            for e in r["epochs"]:
                e.pop("accuracy", None)
                e.pop("val_accuracy", None)
            r["test_accuracy"] = None
        path = self.broken("regression.json", regression)
        out = os.path.join(self.dir.name, "regression.png")
        r = self.module("plot", path, f"--out={out}")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_png(out)
        sys.path.insert(0, os.path.join(REPO, "python"))
        from pscluster import plot, results
        self.assertEqual(plot._validation_key([{"result": results.load(path)}]), "val_loss")
        self.assertEqual(plot._validation_key([{"result": results.load(self.files["sync"])}]),
                         "val_accuracy")

    def test_summary_times_to_accuracy(self):
        r = self.module("modes_summary", *self.files.values())
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(len(lines), 5, r.stdout)
        self.assertEqual(lines[0], "| run | time to 0.80 val acc (s) | time to 0.85 val acc (s) | "
                                   "test accuracy | examples/s | staleness mean / p99 | "
                                   "dropped stale | units per worker |")
        self.assertEqual(lines[2], "| sync | 25.0 | 37.5 | 0.8321 | 1,234 | 0.00 / 0 | 0 | — |")
        self.assertEqual(lines[3],
                         "| async | 8.0 | not reached | 0.8321 | 1,500 | 0.95 / 2 | 0 | — |")
        self.assertEqual(lines[4], "| sync R=2/3 (1 backup) + 1 worker 3x slower | 20.0 | 45.0 | "
                                   "0.8321 | 900 | 0.00 / 0 | 200 | — |")

    def test_summary_counts_each_workers_units(self):
        unit = {"first_step": 0, "end": 20, "slot": 0, "num_slots": 3}
        queued = self.broken("queued.json", lambda r: r.update(
            units=[dict(unit, worker=w) for w in (0, 1, 0, 2, 0, 1)]))
        r = self.module("modes_summary", "--json", queued)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)[0]["units_per_worker"], [3, 2, 1])
        r = self.module("modes_summary", queued)
        self.assertTrue(r.stdout.strip().splitlines()[2].endswith("| 3/2/1 |"), r.stdout)

    def test_summary_json(self):
        r = self.module("modes_summary", "--json", *self.files.values())
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = json.loads(r.stdout)
        self.assertEqual([row["run"] for row in rows],
                         ["sync", "async", "sync R=2/3 (1 backup) + 1 worker 3x slower"])
        want = [(25.0, 37.5), (8.0, None), (20.0, 45.0)]
        for row, (t80, t85) in zip(rows, want):
            self.assertAlmostEqual(row["time_to_s"]["0.80"], t80, places=9)
            if t85 is None:
                self.assertIsNone(row["time_to_s"]["0.85"])
            else:
                self.assertAlmostEqual(row["time_to_s"]["0.85"], t85, places=9)
        self.assertEqual(rows[1]["staleness_p99"], 2.0)
        self.assertEqual(rows[2]["gradients_dropped_stale"], 200)

    def test_labels(self):
        ssp = self.broken("ssp.json", lambda r: r.update(mode="ssp", staleness_bound=3))
        backups = self.broken("backups.json", lambda r: r.update(replicas_to_aggregate=1))
        r = self.module("modes_summary", "--json", ssp, backups, self.files["sync"],
                        self.files["sync"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([row["run"] for row in json.loads(r.stdout)],
                         ["ssp s=3", "sync R=1/3 (2 backups)", "sync [sync.json]",
                          "sync [sync.json]"])
        r = self.module("modes_summary", "--json", "--label=mine", self.files["async"])
        self.assertEqual(json.loads(r.stdout)[0]["run"], "mine")

    def test_bad_input_is_one_line_naming_the_file_and_the_key(self):
        missing = os.path.join(self.dir.name, "absent.json")
        malformed = self.write("malformed.json", '{"mode": "sync", ')
        no_evals = self.broken("no_evals.json", lambda r: r.pop("evaluations"))
        wrong = self.broken("wrong.json", lambda r: r.update(evaluations="many"))
        nested = self.broken("nested.json", lambda r: r["evaluations"][1].update(train_s="20"))
        cases = [(missing, "no such file", None),
                 (malformed, "not valid JSON", None),
                 (no_evals, "required key missing", "evaluations"),
                 (wrong, "expected a list, got a string", "evaluations"),
                 (nested, "expected a number, got a string", "evaluations[1].train_s")]
        out = os.path.join(self.dir.name, "never.png")
        for name, args in (("plot", [f"--out={out}"]), ("modes_summary", [])):
            for path, what, key in cases:
                with self.subTest(module=name, file=os.path.basename(path)):
                    r = self.module(name, self.files["sync"], path, *args)
                    self.assertEqual(r.returncode, 2, r.stderr)
                    self.assertEqual(r.stdout, "")
                    self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                    line = r.stderr.strip()
                    self.assertTrue(line.startswith(f"pscluster {name}: {path}: {what}"), line)
                    if key:
                        self.assertTrue(line.endswith(f'(key "{key}")'), line)
        self.assertFalse(os.path.exists(out))

    def test_help_and_label_count(self):
        for name in ("plot", "modes_summary"):
            r = self.module(name, "--help")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("RESULT.json", r.stdout)
        r = self.module("plot", self.files["sync"], self.files["async"], "--label=one",
                        f"--out={os.path.join(self.dir.name, 'x.png')}")
        self.assertEqual(r.returncode, 2)
        self.assertIn("1 --label for 2 files", r.stderr)


if __name__ == "__main__":
    _under_matplotlib()
    unittest.main()
