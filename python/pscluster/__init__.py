"""Keras models on a pscluster cluster, from Python.

    import pscluster
    trained, result = pscluster.fit(model, x, y, validation_data=(xv, yv),
                                    epochs=5, workers=2, ps=1, mode="sync")

`fit` saves the model (model.save) and the arrays (np.savez) in a temporary
directory, runs `pscluster launch` on this machine, shows the chief's
progress, and returns the trained Keras model (keras.models.load_model of
the job's --export) and the result file as a dict. The pscluster binaries
come from `bin_dir`, else $PSCLUSTER_BIN_DIR, else the PATH.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

__all__ = ["fit", "PsclusterError"]


class PsclusterError(RuntimeError):
    """The job failed; the message holds the end of its output."""


def _launcher(bin_dir):
    bin_dir = bin_dir or os.environ.get("PSCLUSTER_BIN_DIR")
    path = os.path.join(bin_dir, "pscluster") if bin_dir else shutil.which("pscluster")
    if not path or not os.access(path, os.X_OK):
        raise PsclusterError("pscluster not found: pass bin_dir=, set PSCLUSTER_BIN_DIR, or put "
                             "the build's bin directory on the PATH")
    return path


def fit(model, x, y, validation_data=None, epochs=1, batch_size=128, workers=2, ps=1,
        mode="sync", optimizer=None, learning_rate=None, validation_split=0.0,
        rescale=None, standardize=False, seed=0, bin_dir=None, flags=(), verbose=True,
        workdir=None):
    """Trains `model` on (x, y) on a local cluster; returns (trained model, result dict).

    x: examples (N, H, W, C), (N, H, W) or (N, features), uint8 or float32;
    y: class ids (N,) or one-hot rows. validation_data: (x_val, y_val), or
    validation_split of x taken from the end (as Keras's fit). The examples
    reach the model as they are, unless rescale (a factor, e.g. 1/255) or
    standardize=True. mode: "sync", "async" or "ssp". optimizer ("sgd",
    "momentum" or "adam") and learning_rate, when given, override the
    model's compiled optimizer; not given, the compiled one runs (else SGD),
    at its learning rate (else Keras's default for it).
    flags: more job flags for the chief ("--staleness=2", ...). workdir:
    where the files go (kept); default a temporary directory, removed.
    """
    import keras  # the caller's Keras
    import numpy as np  # here: the package (pscluster.plot's checks) imports without it

    launcher = _launcher(bin_dir)
    own_dir = workdir is None
    work = workdir or tempfile.mkdtemp(prefix="pscluster-fit-")
    os.makedirs(work, exist_ok=True)
    try:
        model_path = os.path.join(work, "model.keras")
        data_path = os.path.join(work, "data.npz")
        trained_path = os.path.join(work, "trained.keras")
        result_path = os.path.join(work, "result.json")
        model.save(model_path)
        arrays = {"x_train": np.asarray(x), "y_train": np.asarray(y)}
        if validation_data is not None:
            arrays["x_val"], arrays["y_val"] = (np.asarray(a) for a in validation_data[:2])
        np.savez(data_path, **arrays)
        argv = [launcher, "launch", f"--ps={ps}", f"--workers={workers}", "--",
                f"--model={model_path}", f"--data={data_path}", f"--mode={mode}",
                f"--batch_size={batch_size}", f"--epochs={epochs}", f"--seed={seed}",
                f"--export={trained_path}", f"--metrics_out={result_path}"]
        if optimizer is not None:
            argv.append(f"--optimizer={optimizer}")
        if learning_rate is not None:
            argv.append(f"--learning_rate={learning_rate}")
        if validation_data is None:
            argv.append(f"--validation_split={validation_split}")
        if rescale is not None:
            argv.append(f"--rescale={rescale}")
        elif not standardize:
            argv.append("--nostandardize")
        argv.extend(flags)
        tail = []
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, bufsize=1) as job:
            for line in job.stdout:
                tail = (tail + [line])[-40:]
                # The chief's progress and the launcher's notes; the tasks'
                # logs only on failure.
                if verbose and (line.startswith("[chief:0] Epoch") or
                                line.startswith("[chief:0] test") or
                                line.startswith("[chief:0] no test") or
                                line.startswith("job ok")):
                    sys.stdout.write(line)
                    sys.stdout.flush()
        if job.returncode != 0:
            raise PsclusterError(f"pscluster launch exited {job.returncode}:\n" + "".join(tail))
        with open(result_path) as f:
            result = json.load(f)
        return keras.models.load_model(trained_path), result
    finally:
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)
