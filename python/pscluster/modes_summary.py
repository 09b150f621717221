"""Sync or async? A Markdown table of result files, one row per run.

    python3 -m pscluster.modes_summary RESULT.json [MORE.json ...]
                                       [--label=TEXT ...] [--targets=0.80,0.85] [--json]

Columns: the run's label (as pscluster.plot labels it, or --label once per
file), the training time to each target validation accuracy, the final test
accuracy, examples/s, staleness mean / p99, the gradients dropped as too
stale, and the units of work each worker trained (worker 0/1/...; files
written before the result file listed its units show "—"). --json prints the
rows as a JSON list instead.

Time to a target: the first evaluation whose val_accuracy reaches the target
and the one before it, linearly interpolated on train_s (training wall time
with the evaluation pauses taken out) at the target accuracy; the first
evaluation's own train_s if that one already reaches it; "not reached"
(null in JSON) if none does. A key the file lacks (optional ones) shows "—".

Exit status: 0; 2 bad arguments or a bad result file (one line on stderr:
`pscluster modes_summary: FILE: what (key "evaluations")`).
"""

import argparse
import json
import sys

from pscluster import results

_PROG = "modes_summary"


def time_to_accuracy(evaluations, target):
    """Seconds of training until val_accuracy reached target (interpolated), or None."""
    previous = None
    for e in (e for e in evaluations if e["val_accuracy"] is not None):
        if e["val_accuracy"] >= target:
            if previous is None:
                return float(e["train_s"])
            t0, a0 = previous["train_s"], previous["val_accuracy"]
            t1, a1 = e["train_s"], e["val_accuracy"]
            return t0 + (target - a0) * (t1 - t0) / (a1 - a0)
        previous = e
    return None


def row(result, label, path, targets):
    """One run's row as a dict (the --json form)."""
    staleness = result.get("staleness") or {}
    return {
        "run": label,
        "file": path,
        "time_to_s": {f"{t:.2f}": time_to_accuracy(result["evaluations"], t) for t in targets},
        "test_accuracy": result.get("test_accuracy"),
        "examples_per_sec": result["examples_per_sec"],
        "staleness_mean": staleness.get("mean"),
        "staleness_p99": staleness.get("p99"),
        "gradients_dropped_stale": result.get("gradients_dropped_stale"),
        "units_per_worker": _units_per_worker(result.get("units")),
    }


def _units_per_worker(units):
    """Units trained by worker 0, 1, ... (None without a units list)."""
    if units is None:
        return None
    counts = {}
    for u in units:
        counts[u["worker"]] = counts.get(u["worker"], 0) + 1
    return [counts.get(w, 0) for w in range(max(counts) + 1)] if counts else []


def _fmt(value, spec, missing="—"):
    return missing if value is None else format(value, spec)


def markdown(rows, targets):
    """The rows as a Markdown table."""
    head = (["run"] + [f"time to {t:.2f} val acc (s)" for t in targets] +
            ["test accuracy", "examples/s", "staleness mean / p99", "dropped stale",
             "units per worker"])
    lines = ["| " + " | ".join(head) + " |",
             "| --- |" + " ---: |" * (len(head) - 1)]
    for r in rows:
        cells = ([r["run"]] +
                 [_fmt(r["time_to_s"][f"{t:.2f}"], ".1f", "not reached") for t in targets] +
                 [_fmt(r["test_accuracy"], ".4f"), _fmt(r["examples_per_sec"], ",.0f"),
                  f'{_fmt(r["staleness_mean"], ".2f")} / {_fmt(r["staleness_p99"], "g")}',
                  _fmt(r["gradients_dropped_stale"], "d"),
                  "—" if r["units_per_worker"] is None
                  else "/".join(str(n) for n in r["units_per_worker"])])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _targets(text):
    try:
        targets = [float(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not targets or any(not 0 < t <= 1 for t in targets):
        raise argparse.ArgumentTypeError(f"accuracies in (0, 1] expected: {text!r}")
    return targets


def _parser():
    p = argparse.ArgumentParser(prog="pscluster modes_summary",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("files", nargs="+", metavar="RESULT.json", help="result files (--metrics_out)")
    p.add_argument("--label", action="append", metavar="TEXT",
                   help="the run's label, once per file in order (default: from the file)")
    p.add_argument("--targets", type=_targets, default=[0.80, 0.85], metavar="A,B",
                   help="validation accuracies to time (default: 0.80,0.85)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    if results.wrong_label_count("modes_summary", args.label, args.files):
        return 2
    loaded = [results.load(p) for p in args.files]
    labels = results.labels(loaded, args.files, args.label)
    rows = [row(r, n, p, args.targets) for r, n, p in zip(loaded, labels, args.files)]
    print(json.dumps(rows, indent=1) if args.json else markdown(rows, args.targets))
    return 0


if __name__ == "__main__":
    sys.exit(results.main_guard(_PROG, main))
