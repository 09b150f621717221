#!/usr/bin/env python3
"""The click-through benchmark's data and model (bench/click_through.sh; issue 38, item 6).

Data: N examples of 26 categorical features and 13 dense ones, and a binary label that depends on
both. Feature i's ids follow a Zipf law (exponent 1.1) over its table's rows, the ranks scattered
over the rows by a fixed multiplier (so the hot rows are not all on one server). The dense
features are N(0, 1). The label is Bernoulli(sigmoid(z)), z = dense . w + sum over the first 8
features of a fixed +-1 effect of the id's hash, scaled so that both parts matter.

Tables: 26 of `--rows` rows in all, table i holding round(rows * (1 / (i + 1)) / H) rows
(H = sum of 1 / (j + 1) over the 26: a harmonic rule, the largest table 26 % of the rows, the
smallest 1 %), dim 16.

Model (DLRM-shaped, Keras 3): 26 inputs of one id each through their own Embedding to a (1, 16)
row; the dense input through the bottom MLP 13 -> 64 -> 16, reshaped to (1, 16); the 27 rows
concatenated (27, 16) and dotted with themselves, Dot(axes=(2, 2)) -> (27, 27), flattened beside
the bottom MLP's output into the top MLP 64 -> 1 (sigmoid); binary cross-entropy, Adagrad lr 0.01.

Writes, into --out:
  ctr.npz          x_train/c0..c25 (int32, (N, 1)), x_train/dense (float32, (N, 13)), y_train
                   (uint8), and the same for the validation (half as many as the test split)
                   and test splits (what pscluster reads)
  ctr_model.json   the model's config with its compile_config, as a .keras archive's config.json
                   (no weights: every table is drawn from the seed by its servers)
  train_ids.bin, train_dense.bin, train_labels.bin   raw little-endian int32 / float32 / float32
                   arrays of the training split, the same examples (what TF's workers read)
  meta.json        the table sizes, counts and the rule

Run with an interpreter that has numpy and Keras 3 (the TF venv does):
    VENV/bin/python3 bench/ctr_data.py --rows 20000000 --train 400000 --out DIR
"""

import argparse
import json
import os

FEATURES, DENSE, DIM = 26, 13, 16


def table_sizes(rows):
    weights = [1.0 / (i + 1) for i in range(FEATURES)]
    total = sum(weights)
    return [max(2, round(rows * w / total)) for w in weights]


def make_split(np, n, sizes, seed):
    rng = np.random.default_rng(seed)
    ids = np.empty((n, FEATURES), dtype=np.int32)
    for i, size in enumerate(sizes):
        rank = rng.zipf(1.1, n).astype(np.uint64) - 1
        # Scatter the ranks over the rows: rank r -> (r * a + i) mod size.
        ids[:, i] = ((rank * np.uint64(2654435761) + np.uint64(i)) % np.uint64(size)).astype(np.int32)
    dense = rng.standard_normal((n, DENSE)).astype(np.float32)
    w = np.linspace(-1.0, 1.0, DENSE, dtype=np.float32)
    z = dense @ w / np.sqrt(DENSE)
    for i in range(8):
        h = (ids[:, i].astype(np.uint64) * np.uint64(0x9E3779B1)) >> np.uint64(7)
        z += np.where(h % np.uint64(2) == 0, 0.5, -0.5).astype(np.float32)
    labels = (rng.random(n) < 1.0 / (1.0 + np.exp(-z))).astype(np.uint8)
    return ids, dense, labels


def model_config(sizes):
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    from keras import layers
    cats = [keras.Input((1,), dtype="int32", name=f"c{i}") for i in range(FEATURES)]
    dense = keras.Input((DENSE,), name="dense")
    bottom = layers.Dense(16, activation="relu", name="bottom_1")(
        layers.Dense(64, activation="relu", name="bottom_0")(dense))
    # A table of 1 row stands in for each while the config is made (no
    # 20 M rows drawn here); the sizes are written into the config below.
    rows = [layers.Embedding(2, DIM, name=f"table{i}")(c) for i, c in enumerate(cats)]
    stack = layers.Concatenate(axis=1, name="stack")(rows + [layers.Reshape((1, DIM))(bottom)])
    pairs = layers.Flatten(name="pairs")(layers.Dot(axes=(2, 2), name="interact")([stack, stack]))
    top = layers.Dense(64, activation="relu", name="top_0")(
        layers.Concatenate(name="top_in")([bottom, pairs]))
    model = keras.Model(cats + [dense], layers.Dense(1, activation="sigmoid", name="ctr")(top),
                        name="dlrm_ctr")
    model.compile(optimizer=keras.optimizers.Adagrad(0.01), loss="binary_crossentropy")
    config = keras.saving.serialize_keras_object(model)
    for layer in config["config"]["layers"]:
        if layer["class_name"] == "Embedding":
            i = int(layer["config"]["name"][len("table"):])
            layer["config"]["input_dim"] = sizes[i]
    return config


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--train", type=int, default=400_000)
    ap.add_argument("--test", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import numpy as np
    os.makedirs(args.out, exist_ok=True)
    sizes = table_sizes(args.rows)
    arrays = {}
    for split, n, seed in (("train", args.train, args.seed), ("val", args.test // 2, args.seed + 2),
                           ("test", args.test, args.seed + 1)):
        ids, dense, labels = make_split(np, n, sizes, seed)
        for i in range(FEATURES):
            arrays[f"x_{split}/c{i}"] = np.ascontiguousarray(ids[:, i:i + 1])
        arrays[f"x_{split}/dense"] = dense
        arrays[f"y_{split}"] = labels
        if split == "train":
            ids.tofile(os.path.join(args.out, "train_ids.bin"))
            dense.tofile(os.path.join(args.out, "train_dense.bin"))
            labels.astype(np.float32).tofile(os.path.join(args.out, "train_labels.bin"))
    np.savez(os.path.join(args.out, "ctr.npz"), **arrays)
    with open(os.path.join(args.out, "ctr_model.json"), "w") as f:
        json.dump(model_config(sizes), f)
    meta = {"rows": sum(sizes), "table_sizes": sizes, "dim": DIM, "train": args.train,
            "test": args.test, "rule": "table i: rows * (1/(i+1)) / H_26; ids Zipf(1.1)"}
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
