"""A Keras model written in Python, trained on a local pscluster cluster,
loaded back in Keras and evaluated.

    KERAS_BACKEND=jax python3 examples/train_keras_model.py [BIN_DIR]

Needs keras (3.x, any backend) and numpy; reads Fashion-MNIST from Debian's
dataset-fashion-mnist (/usr/share/datasets/fashion-mnist). BIN_DIR holds
the pscluster binaries (default: build/bin).
"""

import gzip
import os
import subprocess
import sys
import tempfile

import numpy as np

import keras
from keras import layers

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/bin"
DATA = "/usr/share/datasets/fashion-mnist"


def idx(name):
    with gzip.open(os.path.join(DATA, name)) as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


work = tempfile.mkdtemp(prefix="pscluster-example-")
x, y = idx("train-images-idx3-ubyte.gz"), idx("train-labels-idx1-ubyte.gz")
xt, yt = idx("t10k-images-idx3-ubyte.gz"), idx("t10k-labels-idx1-ubyte.gz")
np.savez(os.path.join(work, "fashion.npz"), x_train=x[..., None], y_train=y,
         x_test=xt[..., None], y_test=yt)

model = keras.Sequential([
    keras.Input((28, 28, 1)),
    layers.Conv2D(32, 3, padding="same", activation="relu"),
    layers.MaxPooling2D(),
    layers.Conv2D(64, 3, padding="same", activation="relu"),
    layers.MaxPooling2D(),
    layers.Flatten(),
    layers.Dense(64, activation="relu"),
    layers.Dense(10, activation="softmax"),
])
model.save(os.path.join(work, "model.keras"))

# 2 workers and 2 parameter servers, synchronous, 3 epochs.
subprocess.run([os.path.join(BIN, "pscluster"), "launch", "--ps=2", "--workers=2", "--",
                "--model=" + os.path.join(work, "model.keras"),
                "--data=" + os.path.join(work, "fashion.npz"), "--validation_split=0.1",
                "--rescale=1/255", "--optimizer=adam", "--learning_rate=0.001",
                "--epochs=3", "--export=" + os.path.join(work, "trained.keras"),
                "--metrics_out=" + os.path.join(work, "result.json")], check=True)

trained = keras.models.load_model(os.path.join(work, "trained.keras"))
trained.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
loss, accuracy = trained.evaluate(xt[..., None] / np.float32(255), yt, verbose=0)
print(f"Keras on the trained model: test loss {loss:.4f}, test accuracy {accuracy:.4f}")
print(f"files in {work}")
