"""Sync or async? One figure comparing result files of pscluster runs.

    python3 -m pscluster.plot RESULT.json [MORE.json ...] --out=FILE.png
                              [--title=TEXT] [--label=TEXT ...]

Panels: validation accuracy (the validation loss when no run has an
accuracy: regressions) against training time (the evaluations' train_s:
wall time with the evaluation pauses taken out) and against examples seen; training loss per epoch; throughput (examples/s); the
staleness histogram of the async and ssp runs; seconds per step of each
worker. A run is labelled by its mode ("sync", "sync R=2/3 (1 backup)",
"async", "ssp s=3") and its stragglers (" + 1 worker 3x slower"); --label,
once per file in order, replaces those. Runs of one mode share a colour,
runs with a straggler are dashed (hatched bars).

Exit status: 0 written; 2 bad arguments or a bad result file (one line on
stderr: `pscluster plot: FILE: what (key "evaluations")`); 1 no matplotlib,
or the image could not be written. Needs matplotlib (Debian:
python3-matplotlib) and numpy, nothing else.
"""

import argparse
import importlib.util
import sys

from pscluster import results

_PROG = "plot"
_WIDTH_IN, _HEIGHT_IN, _DPI = 16, 9, 100  # 1600 x 900 pixels


def _runs(paths, overrides):
    """[{"path", "result", "label", "color", "dashed"}] in the order of the files."""
    loaded = [results.load(p) for p in paths]
    names = results.labels(loaded, paths, overrides)
    base = [results.mode_label(r) for r in loaded]
    palette = {}
    for b in base:
        palette.setdefault(b, f"C{len(palette) % 10}")
    return [{"path": p, "result": r, "label": n, "color": palette[b],
             "dashed": bool(results.straggler_note(r))}
            for p, r, n, b in zip(paths, loaded, names, base)]


def _line(ax, run, x, y):
    ax.plot(x, y, color=run["color"], linestyle="--" if run["dashed"] else "-",
            marker="o", markersize=3)


def _note(ax, text):
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", wrap=True,
            fontsize=9, color="0.4")


def _validation_key(runs):
    """val_accuracy; val_loss when no run has an accuracy (regressions)."""
    for run in runs:
        if any(e["val_accuracy"] is not None for e in run["result"]["evaluations"]):
            return "val_accuracy"
    return "val_loss"


def _validated(run, key):
    return [e for e in run["result"]["evaluations"] if e.get(key) is not None]


def plot_accuracy_vs_time(ax, runs):
    key = _validation_key(runs)
    what = "accuracy" if key == "val_accuracy" else "loss"
    for run in runs:
        ev = _validated(run, key)
        _line(ax, run, [e["train_s"] for e in ev], [e[key] for e in ev])
    ax.set(title=f"Validation {what} over training time",
           xlabel="training time, evaluation excluded (s)", ylabel=f"validation {what}")


def plot_accuracy_vs_examples(ax, runs):
    key = _validation_key(runs)
    what = "accuracy" if key == "val_accuracy" else "loss"
    for run in runs:
        ev = _validated(run, key)
        _line(ax, run, [e["examples_seen"] for e in ev], [e[key] for e in ev])
    ax.set(title=f"Validation {what} over examples seen",
           xlabel="examples in applied gradients (examples)", ylabel=f"validation {what}")


def plot_epoch_loss(ax, runs):
    from matplotlib.ticker import MaxNLocator
    for run in runs:
        epochs = [e for e in run["result"]["epochs"] if e["loss"] is not None]
        _line(ax, run, [e["epoch"] for e in epochs], [e["loss"] for e in epochs])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(title="Training loss per epoch", xlabel="epoch", ylabel="training loss (mean)")


def _bar(ax, x, height, run, width):
    return ax.bar(x, height, width, color=run["color"], edgecolor="black", linewidth=0.5,
                  hatch="//" if run["dashed"] else None)


def plot_throughput(ax, runs):
    for i, run in enumerate(runs):
        value = run["result"]["examples_per_sec"]
        _bar(ax, i, value, run, 0.8)
        ax.annotate(f"{value:,.0f}", (i, value), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(runs)), [str(i + 1) for i in range(len(runs))])
    ax.set(title="Throughput", xlabel="run (in the legend's order)",
           ylabel="training throughput (examples/s)")


def plot_staleness(ax, runs):
    stale = [r for r in runs if r["result"]["mode"] in ("async", "ssp")]
    shown = [r for r in stale if (r["result"].get("staleness") or {}).get("histogram")]
    ax.set(title="Staleness of applied gradients (async, ssp)", xlabel="staleness (steps)",
           ylabel="gradients applied (count)")
    if not shown:
        _note(ax, "no async or ssp run: sync applies every gradient at staleness 0"
              if not stale else "the async and ssp runs have no staleness histogram")
        return
    width = 0.8 / len(shown)
    for i, run in enumerate(shown):
        histogram = run["result"]["staleness"]["histogram"]
        _bar(ax, [s - 0.4 + (i + 0.5) * width for s in range(len(histogram))], histogram,
             run, width)
    ax.set_xticks(range(max(len(r["result"]["staleness"]["histogram"]) for r in shown)))


def plot_step_time(ax, runs):
    shown = [r for r in runs
             if any(w.get("step_s") is not None for w in r["result"].get("workers") or [])]
    ax.set(title="Seconds per step of each worker", xlabel="worker",
           ylabel="mean time per step (s)")
    if not shown:
        _note(ax, "no per-worker times in these result files")
        return
    width = 0.8 / len(shown)
    for i, run in enumerate(shown):
        workers = [w for w in run["result"]["workers"] if w.get("step_s") is not None]
        xs = [w.get("worker", j) - 0.4 + (i + 0.5) * width for j, w in enumerate(workers)]
        _bar(ax, xs, [w["step_s"] for w in workers], run, width)
    ax.set_xticks(sorted({w.get("worker", j) for r in shown
                          for j, w in enumerate(r["result"]["workers"])}))


def draw(runs, out, title=None):
    """Writes the figure of runs (from _runs) to out; raises OSError if it cannot."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(2, 3, figsize=(_WIDTH_IN, _HEIGHT_IN), dpi=_DPI)
    for panel, ax in zip((plot_accuracy_vs_time, plot_accuracy_vs_examples, plot_epoch_loss,
                          plot_throughput, plot_staleness, plot_step_time), axes.flat):
        panel(ax, runs)
        ax.grid(True, alpha=0.3)
    entries = [(Line2D([], [], color=r["color"], linestyle="--" if r["dashed"] else "-",
                       marker="o", markersize=4), f"{i + 1}. {r['label']}")
               for i, r in enumerate(runs)]
    columns = min(len(runs), 5)
    rows = -(-len(runs) // columns)
    # The legend fills column by column; this order reads row by row.
    entries = [entries[r * columns + c] for c in range(columns) for r in range(rows)
               if r * columns + c < len(entries)]
    fig.legend(*zip(*entries), loc="lower center", ncol=columns, fontsize=10, frameon=False)
    if title:
        fig.suptitle(title, fontsize=14)
    fig.tight_layout(rect=(0, 0.015 + 0.035 * rows, 1, 0.95 if title else 1))
    fig.savefig(out, dpi=_DPI)
    plt.close(fig)


def _parser():
    p = argparse.ArgumentParser(prog="pscluster plot", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("files", nargs="+", metavar="RESULT.json", help="result files (--metrics_out)")
    p.add_argument("--out", required=True, metavar="FILE.png", help="the image to write")
    p.add_argument("--title", help="the figure's title")
    p.add_argument("--label", action="append", metavar="TEXT",
                   help="legend label of a run, once per file in order (default: from the file)")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    if results.wrong_label_count("plot", args.label, args.files):
        return 2
    runs = _runs(args.files, args.label)
    if importlib.util.find_spec("matplotlib") is None:
        print(f"pscluster plot: matplotlib is not installed for {sys.executable} "
              "(Debian: apt-get install python3-matplotlib)", file=sys.stderr)
        return 1
    try:
        draw(runs, args.out, args.title)
    except OSError as e:
        print(f"pscluster plot: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(results.main_guard(_PROG, main))
