"""TFRecord files TensorFlow writes, read by pscluster, value for value.

tf.io.TFRecordWriter writes tf.train.Examples (floats, int64s, raw uint8
and float32 bytes, a variable-length int64 list) plain, GZIP and ZLIB;
`pscluster data dump` reads them through a feature spec and writes the
arrays; each must equal what tf.io.parse_single_example (and
tf.io.decode_raw) gives, exactly. Then the reverse: a flipped data CRC and
a truncated file are errors naming the file and the offset, and with
--skip_corrupt_records the damaged record is skipped and counted. Finally
pscluster's own gzip files (`pscluster data convert`) are read back by
tf.data.TFRecordDataset.

Usage: tfrecord_roundtrip.py BIN_DIR
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

BIN = sys.argv[1]
work = tempfile.mkdtemp(prefix="tfrecord_roundtrip-")
failed = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failed.append(what)


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


rng = np.random.default_rng(7)
N = 50
dense = rng.normal(size=(N, 3)).astype(np.float32)
dense[0] = [np.float32(1e-45), np.float32(3.4e38), -0.0]  # a denormal, near max, -0
ids = [rng.integers(0, 1000, size=rng.integers(0, 6)).tolist() for _ in range(N)]
pixels = rng.integers(0, 256, size=(N, 4, 4), dtype=np.uint8)
raw = rng.normal(size=(N, 2)).astype(np.float32)
labels = rng.integers(-(2**62), 2**62, size=N)
weights = rng.uniform(size=N).astype(np.float32)


def example(i):
    f = {
        "dense": tf.train.Feature(float_list=tf.train.FloatList(value=dense[i])),
        "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids[i])),
        "pixels": tf.train.Feature(bytes_list=tf.train.BytesList(value=[pixels[i].tobytes()])),
        "raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[raw[i].tobytes()])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[labels[i]])),
    }
    if i % 3:
        f["w"] = tf.train.Feature(float_list=tf.train.FloatList(value=[weights[i]]))
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


spec = {
    "inputs": {
        "dense": {"kind": "float", "shape": [3]},
        "ids": {"kind": "int64", "varlen": True, "shape": [5], "pad": -1},
        "pixels": {"kind": "bytes", "dtype": "uint8", "shape": [4, 4]},
        "raw": {"kind": "bytes", "dtype": "float32", "shape": [2]},
    },
    "label": {"kind": "int64"},
    "weight": {"feature": "w", "kind": "float", "default": 1},
}
spec_path = os.path.join(work, "spec.json")
with open(spec_path, "w") as f:
    json.dump(spec, f)

# What TensorFlow parses.
parse = {
    "dense": tf.io.FixedLenFeature([3], tf.float32),
    "ids": tf.io.VarLenFeature(tf.int64),
    "pixels": tf.io.FixedLenFeature([], tf.string),
    "raw": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
    "w": tf.io.FixedLenFeature([], tf.float32, default_value=1.0),
}
records = [example(i) for i in range(N)]
want = {k: [] for k in ["dense", "ids", "pixels", "raw", "label", "weight"]}
for r in records:
    p = tf.io.parse_single_example(r, parse)
    want["dense"].append(p["dense"].numpy())
    v = tf.sparse.to_dense(p["ids"]).numpy()
    want["ids"].append(np.concatenate([v, np.full(5 - len(v), -1, np.int64)]))
    want["pixels"].append(tf.io.decode_raw(p["pixels"], tf.uint8).numpy().reshape(4, 4))
    want["raw"].append(tf.io.decode_raw(p["raw"], tf.float32).numpy())
    want["label"].append(p["label"].numpy())
    want["weight"].append(p["w"].numpy())
want = {k: np.stack(v) for k, v in want.items()}

for kind, options in [("plain", None), ("gzip", "GZIP"), ("zlib", "ZLIB")]:
    files = []
    for shard in range(2):
        path = os.path.join(work, f"{kind}-{shard}.tfrecord")
        with tf.io.TFRecordWriter(path, options=options) as w:
            for r in records[shard * N // 2:(shard + 1) * N // 2]:
                w.write(r)
        files.append(path)
    out = os.path.join(work, f"dump-{kind}")
    r = run([BIN + "/pscluster", "data", "dump", os.path.join(work, f"{kind}-*.tfrecord"),
             "--spec=" + spec_path, "--out=" + out])
    check(r.returncode == 0 and f"{N} records from 2 files" in r.stdout,
          f"{kind}: pscluster data dump read {N} records ({r.stdout.strip()} {r.stderr.strip()})")
    if r.returncode != 0:
        continue
    for name, array in want.items():
        got = np.load(os.path.join(out, name + ".npy"))
        same = got.dtype == array.dtype and got.shape == array.shape and \
            np.array_equal(got.view(np.uint8), array.view(np.uint8))
        check(same, f"{kind}: {name} {got.dtype}{got.shape} is TensorFlow's "
                    f"{array.dtype}{array.shape} bit for bit")

# Damage: a flipped data CRC in the plain file's third record, a truncated gzip file.
plain = open(os.path.join(work, "plain-0.tfrecord"), "rb").read()
offsets, at = [], 0
while at < len(plain):
    offsets.append(at)
    at += 12 + int.from_bytes(plain[at:at + 8], "little") + 4
third = offsets[2]
damaged = bytearray(plain)
damaged[third + 12] ^= 1
path = os.path.join(work, "damaged.tfrecord")
open(path, "wb").write(bytes(damaged))
r = run([BIN + "/pscluster", "data", "dump", path, "--spec=" + spec_path,
         "--out=" + os.path.join(work, "d1")])
check(r.returncode != 0 and f"{path}: bad data CRC in the record at offset {third}" in r.stderr,
      f"a flipped data CRC: an error naming the file and offset {third} ({r.stderr.strip()})")
r = run([BIN + "/pscluster", "data", "dump", path, "--spec=" + spec_path,
         "--out=" + os.path.join(work, "d2"), "--skip_corrupt_records"])
check(r.returncode == 0 and f"{N // 2 - 1} records from 1 file" in r.stdout and
      f"{path}: 1 skipped" in r.stdout,
      f"--skip_corrupt_records: the record skipped and counted ({r.stdout.strip()})")
gz = open(os.path.join(work, "gzip-0.tfrecord"), "rb").read()
path = os.path.join(work, "cut.tfrecord")
open(path, "wb").write(gz[:len(gz) // 2])
r = run([BIN + "/pscluster", "data", "dump", path, "--spec=" + spec_path,
         "--out=" + os.path.join(work, "d3")])
check(r.returncode != 0 and path in r.stderr and "offset" in r.stderr,
      f"a truncated gzip file: an error naming the file ({r.stderr.strip()})")

# The reverse: pscluster's gzip shards, read by tf.data.
xs = rng.normal(size=(20, 3)).astype(np.float32)
ys = rng.integers(0, 4, size=20)
np.savez(os.path.join(work, "d.npz"), x_train=xs, y_train=ys)
r = run([BIN + "/pscluster", "data", "convert", os.path.join(work, "d.npz"),
         os.path.join(work, "conv"), "--shards=3", "--compression=gzip"])
check(r.returncode == 0, f"pscluster data convert ({r.stderr.strip()})")
files = sorted(os.path.join(work, "conv", f) for f in os.listdir(os.path.join(work, "conv"))
               if f.startswith("train-"))
ds = tf.data.TFRecordDataset(files, compression_type="GZIP").map(
    lambda r: tf.io.parse_single_example(r, {"x": tf.io.FixedLenFeature([3], tf.float32),
                                             "y": tf.io.FixedLenFeature([], tf.int64)}))
got = list(ds.as_numpy_iterator())
check(len(got) == 20 and np.array_equal(np.stack([g["x"] for g in got]), xs) and
      np.array_equal(np.array([g["y"] for g in got]), ys),
      "tf.data reads pscluster's gzip shards: the .npz's values, in order")

shutil.rmtree(work, ignore_errors=True)
print(f"tfrecord_roundtrip: tensorflow {tf.__version__}: "
      + ("every check passed" if not failed else f"{len(failed)} failed"), flush=True)
sys.exit(1 if failed else 0)
