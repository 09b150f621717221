"""A pscluster --logdir read by the real TensorBoard, as Keras's callback lays it out.

    tensorboard_runs.py LOGDIR [--epochs=E] [--result=RESULT.json]

Checks, with TensorBoard's own readers (no TensorFlow needed):
  * LOGDIR/train and LOGDIR/validation are runs (EventMultiplexer over LOGDIR,
    as `tensorboard --logdir` finds them) whose tags below the scalars
    dashboard shows (plugin "scalars");
  * train: epoch_loss and epoch_accuracy at steps 0..E-1 (Keras's 0-based
    epoch index, as its TensorBoard callback writes them);
  * validation: epoch_loss and epoch_accuracy at the same epoch steps, and
    evaluation_loss_vs_iterations and evaluation_accuracy_vs_iterations at
    global training steps, strictly increasing, at least 2 points;
  * every value finite, accuracies in [0, 1];
  * with --result: the values equal the result file's ("epochs": loss,
    accuracy, val_loss, val_accuracy; "evaluations": step, val_loss,
    val_accuracy) to float32 precision.
Each run is read twice: by plugin_event_multiplexer (TensorBoard's server
path: every scalar, simple_value or tensor, as a tensor of plugin "scalars")
and by the legacy event_accumulator.EventAccumulator (simple_value scalars
under Scalars(), tensor summaries such as tf.summary.scalar's under
Tensors()); both must give the same points.
Prints one line per check; exits 1 if any failed.
"""

import argparse
import json
import math
import os
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import plugin_event_multiplexer
from tensorboard.util import tensor_util

EPOCH_TAGS = ("epoch_loss", "epoch_accuracy")
EVAL_TAGS = ("evaluation_loss_vs_iterations", "evaluation_accuracy_vs_iterations")
FAILED = []


def check(name, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + name + ("" if ok or not detail else ": " + detail),
          flush=True)
    if not ok:
        FAILED.append(name)
    return ok


def _value(tensor_proto):
    return float(tensor_util.make_ndarray(tensor_proto).reshape(()))


def read_multiplexer(logdir):
    """{run: {tag: [(step, value)]}} of the scalars dashboard's tags, as the server reads them."""
    # 0 = keep every point (the default keeps a reservoir of 10 tensors per tag).
    mux = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"scalars": 0})
    mux.AddRunsFromDirectory(logdir)
    mux.Reload()
    runs = {}
    for run, tags in mux.Runs().items():
        runs[run] = {}
        for tag in tags.get("tensors", []):
            if mux.SummaryMetadata(run, tag).plugin_data.plugin_name != "scalars":
                continue
            runs[run][tag] = [(e.step, _value(e.tensor_proto)) for e in mux.Tensors(run, tag)]
    return runs


def read_accumulator(run_dir):
    """{tag: [(step, value)]} from the legacy EventAccumulator: Scalars(), else Tensors()."""
    acc = event_accumulator.EventAccumulator(
        run_dir, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    scalars = {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in tags["scalars"]}
    for t in tags["tensors"]:
        if acc.SummaryMetadata(t).plugin_data.plugin_name == "scalars":
            scalars.setdefault(t, [(e.step, _value(e.tensor_proto)) for e in acc.Tensors(t)])
    return scalars


def check_points(run, tag, points, steps=None, min_points=1):
    name = f"{run}/{tag}"
    if not check(f"{name}: present", bool(points), "no such scalar"):
        return
    got = [s for s, _ in points]
    if steps is not None:
        check(f"{name}: at steps {steps}", got == steps, f"steps {got}")
    else:
        check(f"{name}: {len(got)} steps, increasing", len(got) >= min_points and
              all(a < b for a, b in zip(got, got[1:])) and got[0] > 0, f"steps {got}")
    values = [v for _, v in points]
    check(f"{name}: finite", all(math.isfinite(v) for v in values), f"values {values}")
    if "accuracy" in tag:
        check(f"{name}: in [0, 1]", all(0 <= v <= 1 for v in values), f"values {values}")


def check_against(run, tag, points, want):
    """The points' (step, value) equal want's to float32 precision."""
    ok = (len(points) == len(want) and
          all(s == ws and math.isclose(v, wv, rel_tol=1e-6, abs_tol=1e-7)
              for (s, v), (ws, wv) in zip(points, want)))
    check(f"{run}/{tag}: equals the result file", ok, f"got {points}, want {want}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logdir")
    p.add_argument("--epochs", type=int, help="E: the epochs the job trained")
    p.add_argument("--result", help="the job's --metrics_out file, to compare the values with")
    args = p.parse_args()

    runs = read_multiplexer(args.logdir)
    print(f"runs: {', '.join(f'{r} ({len(t)} scalar tags)' for r, t in sorted(runs.items()))}")
    for run in ("train", "validation"):
        check(f"{run}: a run", run in runs, f"runs {sorted(runs)}")
    if FAILED:
        return 1
    for run in ("train", "validation"):
        legacy = read_accumulator(os.path.join(args.logdir, run))
        check(f"{run}: EventAccumulator reads the same points", legacy == runs[run],
              f"{legacy} != {runs[run]}")

    train, validation = runs["train"], runs["validation"]
    epochs = len(train.get("epoch_loss", [])) if args.epochs is None else args.epochs
    epoch_steps = list(range(0, epochs))  # Keras's 0-based epoch index
    check("train: at least one epoch", epochs >= 1)
    for tag in EPOCH_TAGS:
        check_points("train", tag, train.get(tag), epoch_steps)
        check_points("validation", tag, validation.get(tag), epoch_steps)
    for tag in EVAL_TAGS:
        check_points("validation", tag, validation.get(tag), min_points=2)
    eval_steps = [[s for s, _ in validation.get(t, [])] for t in EVAL_TAGS]
    check("validation: loss and accuracy evaluated at the same steps",
          eval_steps[0] == eval_steps[1], f"{eval_steps}")

    if args.result:
        with open(args.result) as f:
            result = json.load(f)
        ep, ev = result["epochs"], result["evaluations"]
        for run, tag, key in (("train", "epoch_loss", "loss"),
                              ("train", "epoch_accuracy", "accuracy"),
                              ("validation", "epoch_loss", "val_loss"),
                              ("validation", "epoch_accuracy", "val_accuracy")):
            check_against(run, tag, runs[run].get(tag, []), [(e["epoch"] - 1, e[key]) for e in ep])
        for tag, key in zip(EVAL_TAGS, ("val_loss", "val_accuracy")):
            check_against("validation", tag, validation.get(tag, []),
                          [(e["step"], e[key]) for e in ev])
        last = result.get("steps")
        if last is not None and eval_steps[0]:
            check("validation: evaluations within the job's steps",
                  eval_steps[0][-1] <= last, f"last evaluation at {eval_steps[0][-1]}, "
                                             f"job of {last} steps")

    print(f"{'FAILED: ' + ', '.join(FAILED) if FAILED else 'all checks passed'}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
