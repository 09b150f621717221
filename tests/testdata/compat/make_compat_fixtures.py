"""Writes the compatibility fixtures of tests/compat_fixtures_test.cc.

Made once, with the binaries of the commit before the compute layer became a
graph (issue 37), and committed: a checkpoint and an export of the built-in
`mlp` and of a small chain Keras model (Conv2D, BatchNormalization,
MaxPooling2D, Dropout, Conv2D, Activation, GlobalAveragePooling2D, Dense),
each with the job's final_variables_sha256 and the predictions of its export
and of an export made from its checkpoint. Later binaries must restore the
checkpoint to the same sha and predict the same outputs.

Usage: KERAS_BACKEND=jax python make_compat_fixtures.py BIN_DIR OUT_DIR
(python with keras and numpy; BIN_DIR holds pscluster).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np


def chain_model(path):
    import keras
    keras.utils.set_random_seed(7)
    m = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
        keras.layers.BatchNormalization(),
        keras.layers.MaxPooling2D(),
        keras.layers.Dropout(0.25),
        keras.layers.Conv2D(6, 3, padding="valid"),
        keras.layers.Activation("tanh"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(5, activation="softmax"),
    ], name="chain")
    m.compile(optimizer=keras.optimizers.Adam(0.01),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    m.save(path)


def banded(rng, n, h, w, classes, band):
    """uint8 images whose class is where a bright band lies (learnable and
    compressible)."""
    y = rng.integers(0, classes, n)
    x = (rng.random((n, h, w, 1)) < 0.1).astype(np.uint8) * 255
    for i in range(n):
        x[i, band * y[i]:band * y[i] + band, :, 0] = 200
    return x, y.astype(np.uint8)


def run(argv, cwd):
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(argv), p.stdout[-4000:], p.stderr[-4000:]))


def main():
    bin_dir, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    pscluster = os.path.join(bin_dir, "pscluster")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    rng = np.random.default_rng(37)
    for name, shape, classes, band in (("mlp", (28, 28), 10, 2), ("chain", (8, 8), 5, 1)):
        d = os.path.join(out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        if name == "chain":
            chain_model(os.path.join(d, "model.keras"))
            model = "model.keras"
        else:
            model = "mlp"
        x, y = banded(rng, 160, shape[0], shape[1], classes, band)
        np.savez_compressed(os.path.join(d, "data.npz"), x_train=x[:128], y_train=y[:128],
                            x_val=x[128:], y_val=y[128:])
        np.savez_compressed(os.path.join(d, "inputs.npz"),
                            x=banded(rng, 4, shape[0], shape[1], classes, band)[0]
                            .astype(np.float32))
        flags = ["--model=" + model, "--data=data.npz", "--epochs=2", "--batch_size=16"]
        with tempfile.TemporaryDirectory() as tmp:
            run([pscluster, "launch", "--ps=1", "--workers=1", "--"] + flags +
                ["--checkpoint_dir=" + os.path.join(tmp, "ckpt"), "--export=export.keras",
                 "--metrics_out=" + os.path.join(tmp, "result.json")], d)
            result = json.load(open(os.path.join(tmp, "result.json")))
            steps = sorted(int(s.split("-")[1]) for s in os.listdir(os.path.join(tmp, "ckpt")))
            last = "ckpt-%d" % steps[-1]
            shutil.copytree(os.path.join(tmp, "ckpt", last), os.path.join(d, "ckpt", last))
        run([pscluster, "predict", "--model=export.keras", "--data=inputs.npz", "--x=x",
             "--out=predictions.npy"], d)
        with tempfile.TemporaryDirectory() as tmp:
            run([pscluster, "export", "ckpt", "--model=" + model,
                 "--out=" + os.path.join(tmp, "c.keras")], d)
            run([pscluster, "predict", "--model=" + os.path.join(tmp, "c.keras"),
                 "--data=inputs.npz", "--x=x", "--out=checkpoint_predictions.npy"], d)
        json.dump({"made_with": commit, "flags": flags, "steps": steps[-1],
                   "final_variables_sha256": result["final_variables_sha256"]},
                  open(os.path.join(d, "expected.json"), "w"), indent=1)
        print(name, steps[-1], result["final_variables_sha256"])


if __name__ == "__main__":
    main()
