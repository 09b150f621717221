"""tf.data's side of bench/record_read.sh: records per second of
TFRecordDataset(files).batch(512).map(parse_example) on one thread
(private_threadpool_size=1, max_intra_op_parallelism=1), drained inside the
dataset (reduce), so no Python runs per batch. Prints one JSON object.

Usage: tf_record_read.py KIND COMPRESSION FILE...   (KIND: click or fashion)
"""

import json
import sys
import time

import tensorflow as tf

kind, compression, files = sys.argv[1], sys.argv[2], sys.argv[3:]
if kind == "click":
    spec = {"cat": tf.io.FixedLenFeature([26], tf.int64),
            "dense": tf.io.FixedLenFeature([13], tf.float32),
            "y": tf.io.FixedLenFeature([], tf.int64)}
else:
    spec = {"x": tf.io.FixedLenFeature([], tf.string), "y": tf.io.FixedLenFeature([], tf.int64)}
options = tf.data.Options()
options.threading.private_threadpool_size = 1
options.threading.max_intra_op_parallelism = 1
ds = (tf.data.TFRecordDataset(files, compression_type="GZIP" if compression == "gzip" else "")
      .batch(512).map(lambda b: tf.io.parse_example(b, spec)).with_options(options))
count = lambda: ds.reduce(tf.constant(0, tf.int64),
                          lambda n, b: n + tf.shape(b["y"], out_type=tf.int64)[0])
count()  # the first pass builds the graph (and warms the page cache)
start = time.perf_counter()
n = int(count())
seconds = time.perf_counter() - start
print(json.dumps({"records": n, "seconds": seconds, "records_per_second": n / seconds,
                  "tensorflow": tf.__version__}))
