"""Keras models on a pscluster cluster, from Python.

    import pscluster
    history = pscluster.fit(model, x, y, validation_data=(xv, yv), epochs=5,
                            callbacks=[keras.callbacks.EarlyStopping(patience=2)],
                            workers=2, ps=1, mode="sync")
    history.history["val_loss"]     # as keras.Model.fit's History
    model.predict(xt)               # the model was trained in place

`fit` takes keras.Model.fit's arguments, plus the cluster's shape. It saves
the model (model.save) and the arrays (np.savez) in a temporary directory,
runs `pscluster launch` on this machine, shows the chief's progress, sets
the model's weights to the trained ones (as Keras's fit trains in place) and
returns a History (Keras's, with `.history`, `.epoch`, `.params`, `.model`)
that also holds `.result` (the job's result file as a dict) and
`.trained_model` (keras.models.load_model of the job's export, its input
preprocessing included). The pscluster binaries come from `bin_dir`, else
$PSCLUSTER_BIN_DIR, else the PATH.

What fit does not run raises PsclusterError naming its own argument, never a
command-line flag or a temporary file.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

__all__ = ["fit", "PsclusterError"]


class PsclusterError(RuntimeError):
    """The job failed, or an argument asks for what pscluster does not run."""


def _launcher(bin_dir):
    bin_dir = bin_dir or os.environ.get("PSCLUSTER_BIN_DIR")
    path = os.path.join(bin_dir, "pscluster") if bin_dir else shutil.which("pscluster")
    if not path or not os.access(path, os.X_OK):
        raise PsclusterError("pscluster not found: pass bin_dir=, set PSCLUSTER_BIN_DIR, or put "
                             "the build's bin directory on the PATH")
    return path


# The job flags fit passes, by the fit argument they come from: an error
# from the job names the argument.
_FLAG_ARGS = {
    "--batch_size": "batch_size", "--epochs": "epochs", "--validation_split": "validation_split",
    "--steps_per_epoch": "steps_per_epoch", "--optimizer": "optimizer",
    "--learning_rate": "learning_rate", "--mode": "mode", "--rescale": "rescale",
    "--seed": "seed", "--early_stopping_monitor": "EarlyStopping.monitor",
    "--early_stopping_patience": "EarlyStopping.patience",
    "--early_stopping_mode": "EarlyStopping.mode",
    "--export_monitor": "ModelCheckpoint.monitor", "--export_mode": "ModelCheckpoint.mode",
    "--export_best": "ModelCheckpoint.filepath",
    "--reduce_lr_monitor": "ReduceLROnPlateau.monitor",
    "--reduce_lr_factor": "ReduceLROnPlateau.factor",
    "--standardize_axis": "standardize_axis", "--class_weight": "class_weight",
    "--sample_weight": "sample_weight", "--noshuffle": "shuffle=False",
}


def _in_fit_terms(text, files):
    """The job's message with fit's arguments for its flags and files."""
    for path, name in files.items():
        text = text.replace(path, name)
    for flag, arg in sorted(_FLAG_ARGS.items(), key=lambda kv: -len(kv[0])):
        text = re.sub(re.escape(flag) + r"(?![a-z_])", arg, text)
    return text


def _callback_flags(callbacks):
    """Job flags for Keras callback objects; PsclusterError for others."""
    import keras

    flags, saves = [], []
    for cb in callbacks or ():
        if isinstance(cb, keras.callbacks.EarlyStopping):
            flags += [f"--early_stopping_monitor={cb.monitor}",
                      f"--early_stopping_patience={int(cb.patience)}",
                      f"--early_stopping_min_delta={abs(float(cb.min_delta))}",
                      f"--early_stopping_mode={cb.mode}",
                      f"--early_stopping_start_from_epoch={int(cb.start_from_epoch)}"]
            if cb.baseline is not None:
                flags.append(f"--early_stopping_baseline={float(cb.baseline)}")
            if cb.restore_best_weights:
                flags.append("--restore_best_weights")
        elif isinstance(cb, keras.callbacks.ModelCheckpoint):
            if cb.save_weights_only or not str(cb.filepath).endswith(".keras"):
                raise PsclusterError(
                    "callbacks: ModelCheckpoint is supported with a .keras filepath and "
                    "save_weights_only=False (the model is exported)")
            if "{" in str(cb.filepath):
                raise PsclusterError("callbacks: ModelCheckpoint's filepath must be a plain path "
                                     "(no {epoch} formatting)")
            if cb.save_best_only:
                # Written by the chief at each improving epoch end.
                flags += [f"--export_best={os.path.abspath(str(cb.filepath))}",
                          f"--export_monitor={cb.monitor}", f"--export_mode={cb.mode}"]
            else:
                saves.append(str(cb.filepath))  # every epoch's end: the last one stays
        elif isinstance(cb, keras.callbacks.ReduceLROnPlateau):
            flags += [f"--reduce_lr_monitor={cb.monitor}", f"--reduce_lr_factor={cb.factor}",
                      f"--reduce_lr_patience={int(cb.patience)}", f"--reduce_lr_mode={cb.mode}",
                      f"--reduce_lr_min_delta={abs(float(cb.min_delta))}",
                      f"--reduce_lr_cooldown={int(cb.cooldown)}",
                      f"--reduce_lr_min_lr={float(cb.min_lr)}"]
        elif isinstance(cb, (keras.callbacks.TerminateOnNaN, keras.callbacks.History,
                             keras.callbacks.ProgbarLogger)):
            pass  # pscluster stops at the first non-finite step anyway; the others are fit's own
        else:
            raise PsclusterError(
                f"callbacks: {type(cb).__name__} is not supported (supported: EarlyStopping, "
                "ModelCheckpoint(filepath='*.keras'), ReduceLROnPlateau, TerminateOnNaN)")
    if len(saves) + sum(f.startswith("--export_best=") for f in flags) > 1:
        raise PsclusterError("callbacks: at most one ModelCheckpoint")
    return flags, saves


def _input_names(model):
    """The names of a functional model's inputs in Keras's order (its
    config's input_layers); [] for a Sequential's one."""
    config = model.get_config()
    names = []

    def walk(entry):
        if isinstance(entry, (list, tuple)) and entry and isinstance(entry[0], str):
            names.append(entry[0])
        elif isinstance(entry, (list, tuple)):
            for e in entry:
                walk(e)
    walk(config.get("input_layers") if isinstance(config, dict) else None)
    return names


def _examples(x, names, arg, refuse):
    """x as fit takes it: one array, or for a model of several inputs a list
    (in the model's input order) or a dict by input name, as a dict."""
    import numpy as np
    if len(names) <= 1:
        if isinstance(x, dict) and len(x) == 1:
            x = next(iter(x.values()))
        elif isinstance(x, (list, tuple)) and len(x) == 1:
            x = x[0]
        return np.asarray(x)
    if isinstance(x, dict):
        if set(x) != set(names):
            refuse(arg, f"the inputs {sorted(x)} are not the model's {names}")
        out = {n: np.asarray(x[n]) for n in names}
    elif isinstance(x, (list, tuple)) and len(x) == len(names):
        out = {n: np.asarray(v) for n, v in zip(names, x)}
    else:
        refuse(arg, f"the model has {len(names)} inputs ({', '.join(names)}): give a list or a "
               "dict of one array each")
    counts = {n: len(v) for n, v in out.items()}
    if len(set(counts.values())) != 1:
        refuse(arg, f"the inputs hold different numbers of examples: {counts}")
    return out


def _count(x):
    return len(next(iter(x.values()))) if isinstance(x, dict) else len(x)


def _arrays(prefix, x):
    """The .npz arrays of x: "<prefix>", or "<prefix>/<input>" per input."""
    if isinstance(x, dict):
        return {f"{prefix}/{name}": v for name, v in x.items()}
    return {prefix: x}


def fit(model, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
        validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
        sample_weight=None, initial_epoch=0, steps_per_epoch=None, validation_steps=None,
        validation_batch_size=None, validation_freq=1, *, workers=2, ps=1, mode="sync",
        optimizer=None, learning_rate=None, rescale=None, standardize=False,
        standardize_axis="auto", seed=0, bin_dir=None, flags=(), workdir=None):
    """Trains `model` on (x, y) on a local cluster, as keras.Model.fit does.

    keras.Model.fit's arguments, with Keras's defaults (batch_size 32); x
    (and validation_data's) is one array, or for a model of several inputs
    a list of arrays in the model's input order or a dict by input name;
    validation_split takes the last rows, as Keras's does (sample_weight's
    too); class_weight ({class: weight}) and sample_weight (one per
    example) weight the loss as Keras's do, and like Keras's fit not both at
    once; shuffle=False reads the examples in order. Not run (raise
    PsclusterError naming the argument): initial_epoch, validation_steps, validation_batch_size, validation_freq
    other than their defaults, and weights in validation_data. callbacks:
    EarlyStopping,
    ModelCheckpoint (a .keras path; save_best_only too), ReduceLROnPlateau,
    TerminateOnNaN.

    The cluster: workers, ps, mode ("sync", "async", "ssp"). optimizer
    ("sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad", "ftrl") and
    learning_rate override the model's compiled optimizer when given; not
    given, the compiled one runs (else SGD) at its rate (else Keras's
    default for it). The examples reach the
    model as they are, unless rescale (e.g. 1/255) or standardize=True (per
    feature for (N, features) data, as standardize_axis says); either is
    written into the trained model as its first layer. flags: more job
    flags ("--staleness=2", ...). workdir: where the files go (kept);
    default a temporary directory, removed.
    """
    import keras  # the caller's Keras
    import numpy as np  # here: the package (pscluster.plot's checks) imports without it

    def refuse(arg, why):
        raise PsclusterError(f"{arg}: {why}")

    if x is None or y is None:
        refuse("x, y", "pscluster.fit needs both arrays (a dataset or generator is not supported)")
    names = _input_names(model)
    x = _examples(x, names, "x", refuse)
    y = np.asarray(y)
    if _count(x) != len(y):
        refuse("x, y", f"{_count(x)} examples but {len(y)} labels")
    if batch_size is None:
        batch_size = 32  # Keras's default
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        refuse("batch_size", f"{batch_size!r} must be a positive integer")
    if not isinstance(epochs, (int, np.integer)) or epochs < 1:
        refuse("epochs", f"{epochs!r} must be a positive integer")
    if not 0 <= validation_split < 1:
        refuse("validation_split", f"{validation_split} must be in [0, 1)")
    if validation_data is None and validation_split == 0:
        refuse("validation_split", "give validation_data or a validation_split > 0 (pscluster "
               "evaluates every epoch)")
    if class_weight is not None and sample_weight is not None:
        refuse("class_weight, sample_weight", "not both at once (as Keras's fit: fold the class "
               "weights into the sample weights)")
    if class_weight is not None:
        if not isinstance(class_weight, dict) or not all(
                isinstance(k, (int, np.integer)) and isinstance(v, (int, float, np.number))
                for k, v in class_weight.items()):
            refuse("class_weight", f"{class_weight!r}: expected a dict of class index to weight")
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight)
        if sample_weight.shape not in ((_count(x),), (_count(x), 1)):
            refuse("sample_weight", f"shape {sample_weight.shape}: want one weight per example "
                   f"({_count(x)},)")
    if shuffle not in (True, False):
        refuse("shuffle", f"{shuffle!r}: expected True or False ('batch' is tf.data's)")
    for arg, value, default in (("initial_epoch", initial_epoch, 0),
                                ("validation_steps", validation_steps, None),
                                ("validation_batch_size", validation_batch_size, None),
                                ("validation_freq", validation_freq, 1)):
        if (value is not None) if default is None else (value != default):
            refuse(arg, f"{value!r} is not supported by pscluster.fit yet (leave it at "
                   f"{default!r})")
    if verbose not in ("auto", 0, 1, 2):
        refuse("verbose", f"{verbose!r}: expected 'auto', 0, 1 or 2")

    launcher = _launcher(bin_dir)
    own_dir = workdir is None
    work = workdir or tempfile.mkdtemp(prefix="pscluster-fit-")
    os.makedirs(work, exist_ok=True)
    try:
        model_path = os.path.join(work, "model.keras")
        data_path = os.path.join(work, "data.npz")
        trained_path = os.path.join(work, "trained.keras")
        result_path = os.path.join(work, "result.json")
        callback_flags, saves = _callback_flags(callbacks)
        model.save(model_path)
        arrays = {"y_train": y, **_arrays("x_train", x)}
        if sample_weight is not None:
            arrays["sample_weight"] = sample_weight
        if validation_data is not None:
            if len(validation_data) != 2:
                refuse("validation_data", "expected (x_val, y_val); validation sample weights "
                       "are not supported")
            arrays.update(_arrays("x_val", _examples(validation_data[0], names,
                                                     "validation_data", refuse)))
            arrays["y_val"] = np.asarray(validation_data[1])
        np.savez(data_path, **arrays)
        argv = [launcher, "launch", f"--ps={ps}", f"--workers={workers}", "--",
                f"--model={model_path}", f"--data={data_path}", f"--mode={mode}",
                f"--batch_size={batch_size}", f"--epochs={epochs}", f"--seed={seed}",
                f"--export={trained_path}", f"--metrics_out={result_path}"]
        if optimizer is not None:
            argv.append(f"--optimizer={optimizer}")
        if learning_rate is not None:
            argv.append(f"--learning_rate={learning_rate}")
        if steps_per_epoch is not None:
            argv.append(f"--steps_per_epoch={steps_per_epoch}")
        if validation_data is None:
            argv.append(f"--validation_split={validation_split}")
        if not shuffle:
            argv.append("--noshuffle")
        if class_weight:
            argv.append("--class_weight=" + ",".join(
                f"{int(k)}:{float(v)!r}" for k, v in sorted(class_weight.items())))
        if sample_weight is not None:
            argv.append("--sample_weight=sample_weight")
        if rescale is not None:
            argv.append(f"--rescale={rescale}")
        elif not standardize:
            argv.append("--nostandardize")
        else:
            argv.append(f"--standardize_axis={standardize_axis}")
        argv.extend(callback_flags)
        argv.extend(flags)
        files = {model_path: "model", data_path: "x/y", trained_path: "the trained model",
                 work + "/": ""}
        tail = []
        show = verbose != 0
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, bufsize=1) as job:
            for line in job.stdout:
                tail = (tail + [line])[-40:]
                # The chief's progress and the launcher's notes; the tasks'
                # logs only on failure. verbose=2: one line per epoch.
                progress = line.startswith("[chief:0] Epoch")
                if show and ((progress and (verbose != 2 or " - val_loss" in line)) or
                             line.startswith("[chief:0] test") or
                             line.startswith("[chief:0] no test") or
                             line.startswith("job ok") or "early stopping" in line):
                    sys.stdout.write(_in_fit_terms(line, files))
                    sys.stdout.flush()
        if job.returncode != 0:
            # The job's own message first (the launcher's summary line), in
            # fit's terms, then the end of the output for context.
            # Lines of no task ("[chief:0] ...") nor of the launcher's notes:
            # a refused job's message ("chief: --batch_size=...").
            errors = [l for l in tail if not l.startswith("[")]
            raise PsclusterError(_in_fit_terms(
                f"the job failed (exit {job.returncode}): " + "".join(errors[-3:] or tail[-5:]),
                files))
        with open(result_path) as f:
            result = json.load(f)
        trained = keras.models.load_model(trained_path)
        # Keras's fit trains the model in place. The trained model may start
        # with the job's preprocessing layer; the caller's model gets the
        # trained variables (its own layers).
        model.set_weights(trained.get_weights())
        for path in saves:
            shutil.copyfile(trained_path, path)
        history = keras.callbacks.History()
        history.set_model(model)
        history.params = {"verbose": verbose, "epochs": epochs,
                          "steps": result.get("steps_per_epoch")}
        history.epoch = list(range(len(result["epochs"])))
        # Keras's keys: the loss, the accuracy and the compiled metrics, then
        # their val_ forms.
        keys = [k for k in result["epochs"][0]
                if k not in ("epoch", "wall_s", "learning_rate", "examples")]
        keys.sort(key=lambda k: k.startswith("val_"))
        history.history = {k: [e[k] for e in result["epochs"]] for k in keys}
        if any(isinstance(cb, keras.callbacks.ReduceLROnPlateau) for cb in callbacks or ()):
            # Keras logs the rate each epoch trained at with this callback.
            history.history["learning_rate"] = [e.get("learning_rate") for e in result["epochs"]]
        history.result = result
        history.trained_model = trained
        return history
    finally:
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)
