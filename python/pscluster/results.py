"""Result files (the chief's --metrics_out JSON) for the plot and the summary.

    result = results.load("sync.json")      # a dict, checked; ResultError if not
    results.label(result)                   # "sync R=2/3 (1 backup) + 1 worker 3x slower"

`load` checks the keys the plot and the summary read. Required: "mode"
(string), "epochs" (list of {"epoch", "loss", ...}), "evaluations" (list of
{"step", "train_s", "examples_seen", "val_accuracy", "val_loss"}) and
"examples_per_sec". Optional, checked only when present: "strategy",
"cluster", "replicas_to_aggregate", "staleness_bound", "staleness" (with its
"histogram"), "gradients_dropped_stale", "test_accuracy", "workers". A value
the chief writes as null (NaN in C++, e.g. without a validation split) is
accepted for the losses, "val_accuracy" and "test_accuracy"; the plot and the
summary skip such points.

Errors are ResultError: str() is one line, `FILE: what (key "evaluations[2].train_s")`.
"""

import json
import os
import sys

__all__ = ["ResultError", "load", "mode_label", "label", "labels", "straggler_note", "main_guard"]


class ResultError(Exception):
    """A result file that cannot be read or lacks a key: one line for stderr."""

    def __init__(self, path, what, key=None):
        super().__init__(f"{path}: {what}" + (f' (key "{key}")' if key else ""))


_KIND = {
    "int": ((int,), "an integer"),
    "number": ((int, float), "a number"),
    "string": ((str,), "a string"),
    "list": ((list,), "a list"),
    "object": ((dict,), "an object"),
}


def _type_name(value):
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _check(path, obj, key, kind, where, required=True, nullable=False):
    """obj[key] checked against kind; None when absent (and allowed) or null (and nullable)."""
    name = f"{where}.{key}" if where else key
    if key not in obj:
        if required:
            raise ResultError(path, "required key missing", name)
        return None
    value = obj[key]
    if value is None and nullable:
        return None
    types, wanted = _KIND[kind]
    if isinstance(value, bool) or not isinstance(value, types):
        raise ResultError(path, f"expected {wanted}{' or null' if nullable else ''}, "
                                f"got {_type_name(value)}", name)
    return value


def _check_items(path, obj, key, fields, required=True):
    """obj[key] as a list of objects, each with fields {name: (kind, required, nullable)}."""
    items = _check(path, obj, key, "list", "", required=required)
    for i, item in enumerate(items or []):
        where = f"{key}[{i}]"
        if not isinstance(item, dict):
            raise ResultError(path, f"expected an object, got {_type_name(item)}", where)
        for name, (kind, field_required, nullable) in fields.items():
            _check(path, item, name, kind, where, field_required, nullable)
    return items


def load(path):
    """The result file at path as a dict, its keys checked; raises ResultError."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ResultError(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ResultError(path, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        result = json.loads(text)
    except json.JSONDecodeError as e:
        raise ResultError(path, f"not valid JSON: {e.msg} at line {e.lineno} "
                                f"column {e.colno}") from None
    if not isinstance(result, dict):
        raise ResultError(path, f"expected a JSON object, got {_type_name(result)}")

    _check(path, result, "mode", "string", "")
    _check(path, result, "examples_per_sec", "number", "")
    _check_items(path, result, "epochs", {"epoch": ("int", True, False),
                                          "loss": ("number", True, True),
                                          "wall_s": ("number", False, True)})
    _check_items(path, result, "evaluations", {"step": ("int", True, False),
                                               "train_s": ("number", True, False),
                                               "examples_seen": ("int", True, False),
                                               "val_accuracy": ("number", True, True),
                                               "val_loss": ("number", False, True)})
    _check_items(path, result, "workers", {"worker": ("int", False, False),
                                           "straggler_factor": ("number", False, False),
                                           "step_s": ("number", False, True)},
                 required=False)
    for key in ("replicas_to_aggregate", "staleness_bound", "gradients_dropped_stale"):
        _check(path, result, key, "int", "", required=False)
    _check(path, result, "strategy", "string", "", required=False)
    _check(path, result, "test_accuracy", "number", "", required=False, nullable=True)
    cluster = _check(path, result, "cluster", "object", "", required=False)
    if cluster is not None:
        _check(path, cluster, "workers", "int", "cluster", required=False)
    staleness = _check(path, result, "staleness", "object", "", required=False)
    if staleness is not None:
        for key in ("mean", "p99"):
            _check(path, staleness, key, "number", "staleness", required=False)
        histogram = _check(path, staleness, "histogram", "list", "staleness", required=False)
        for i, count in enumerate(histogram or []):
            if isinstance(count, bool) or not isinstance(count, int):
                raise ResultError(path, f"expected an integer, got {_type_name(count)}",
                                  f"staleness.histogram[{i}]")
    result["evaluations"] = sorted(result["evaluations"], key=lambda e: e["step"])
    return result


def _plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def straggler_note(result):
    """The straggler part of the label (' + 1 worker 3x slower'); empty if none is slower."""
    factors = {}
    for w in result.get("workers") or []:
        f = w.get("straggler_factor", 1)
        if f > 1:
            factors[f] = factors.get(f, 0) + 1
    return "".join(f" + {_plural(n, 'worker')} {f:g}x slower"
                   for f, n in sorted(factors.items(), reverse=True))


def mode_label(result):
    """The mode part of the label: sync, sync R=2/3 (1 backup), async, ssp s=3.

    A strategy other than parameter_server is named instead (its mode is sync).
    """
    strategy = result.get("strategy")
    if strategy and strategy != "parameter_server":
        return strategy
    mode = result["mode"]
    if mode == "sync":
        r = result.get("replicas_to_aggregate") or 0
        workers = (result.get("cluster") or {}).get("workers")
        if r <= 0 or (workers is not None and r >= workers):
            return "sync"
        if workers is None:
            return f"sync R={r}"
        return f"sync R={r}/{workers} ({_plural(workers - r, 'backup')})"
    if mode == "ssp" and result.get("staleness_bound") is not None:
        return f"ssp s={result['staleness_bound']}"
    return mode


def label(result):
    """The legend label of one run: its mode (and R or s) and its stragglers."""
    return mode_label(result) + straggler_note(result)


def labels(results, paths, overrides=None):
    """One label per run: overrides (one per file) or label(); repeats get the file name."""
    if overrides:
        return list(overrides)
    names = [label(r) for r in results]
    return [f"{n} [{os.path.basename(p)}]" if names.count(n) > 1 else n
            for n, p in zip(names, paths)]


def wrong_label_count(prog, overrides, paths):
    """True (after one line on stderr) unless --label is absent or given once per file."""
    if overrides and len(overrides) != len(paths):
        print(f"pscluster {prog}: {len(overrides)} --label for {len(paths)} files "
              "(give one per file, or none)", file=sys.stderr)
        return True
    return False


def main_guard(prog, main, argv=None):
    """Runs main(argv); a ResultError becomes one line `pscluster PROG: ...` and exit 2."""
    try:
        return main(argv)
    except ResultError as e:
        print(f"pscluster {prog}: {e}", file=sys.stderr)
        return 2
