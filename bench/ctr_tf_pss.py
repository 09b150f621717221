#!/usr/bin/env python3
"""TensorFlow 2.21 ParameterServerStrategy on the click-through job (bench/click_through.sh).

Built as ../shared/anchors/tf_pss.py builds the reference job: tf_keras (TF_USE_LEGACY_KERAS=1),
the legacy Adagrad (lr 0.01, initial_accumulator_value 0.1, as Keras 3's), a custom loop
scheduled by a ClusterCoordinator (asynchronous: whichever worker is free runs the next step,
which applies its gradients on the ps). The model is bench/ctr_data.py's DLRM (26 tables of
bench/ctr_data.py's sizes, dim 16, bottom MLP 13 -> 64 -> 16, Dot(axes=(2, 2)) of the 27 rows, top
MLP 64 -> 1, binary cross-entropy), the tables split over the ps tasks by the strategy's
variable_partitioner: MinSizePartitioner(256 KiB, at most one shard per ps), the rule pscluster
places variables by. Each worker reads the training split's raw arrays (train_ids.bin, ...) in
its own dataset function, shuffled (buffer 10,000), batches of --batch.

Every task is its own process, on the testbed host PSC_TF_HOSTS names (tests/netsim/testbed.sh
exec) at the address PSC_TF_CLUSTER gives, or on 127.0.0.1 without PSC_TESTBED. The timed window
is --steps scheduled steps after --warmup ones (each window ends with coord.join()); around it,
with PSC_TESTBED, the bytes every host's eth0 sent (ip -s link). At the end, each process's peak
RSS (VmHWM). Prints one JSON line and writes it to --out.

    VENV/bin/python3 bench/ctr_tf_pss.py --data DIR --steps 600 --out tf.json
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTBED = os.path.join(HERE, "..", "tests", "netsim", "testbed.sh")
FEATURES, DENSE, DIM = 26, 13, 16


def thread_env(threads, inter):
    env = dict(os.environ)
    env.update({"TF_NUM_INTRAOP_THREADS": str(threads), "TF_NUM_INTEROP_THREADS": str(inter),
                "OMP_NUM_THREADS": str(threads), "TF_CPP_MIN_LOG_LEVEL": "2",
                "TF_USE_LEGACY_KERAS": "1", "CUDA_VISIBLE_DEVICES": ""})
    env.pop("TF_CONFIG", None)
    return env


def vm_hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def tx_bytes(testbed, hosts):
    """Bytes each testbed host's eth0 has sent so far."""
    out = {}
    for h in hosts:
        j = json.loads(subprocess.check_output(
            ["ip", "-n", f"psc-{testbed}-h{h}", "-s", "-j", "link", "show", "dev", "eth0"]))
        out[h] = j[0]["stats64"]["tx"]["bytes"]
    return out


def serve(args):
    import tensorflow as tf
    job, index = args.serve.split(":")
    cluster = json.loads(args.cluster)
    cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=args.threads,
                                   inter_op_parallelism_threads=args.server_inter_op)
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=job,
                                  task_index=int(index), protocol="grpc", config=cfg, start=True)
    server.join()


def log(msg):
    print(f"[ctr_tf_pss {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build_model(keras, sizes):
    L = keras.layers
    cats = [keras.Input((1,), dtype="int32", name=f"c{i}") for i in range(FEATURES)]
    dense = keras.Input((DENSE,), name="values")
    bottom = L.Dense(16, activation="relu")(L.Dense(64, activation="relu")(dense))
    rows = [L.Embedding(sizes[i], DIM, name=f"table{i}")(c) for i, c in enumerate(cats)]
    stack = L.Concatenate(axis=1)(rows + [L.Reshape((1, DIM))(bottom)])
    pairs = L.Flatten()(L.Dot(axes=(2, 2))([stack, stack]))
    top = L.Dense(64, activation="relu")(L.Concatenate()([bottom, pairs]))
    return keras.Model(cats + [dense], L.Dense(1, activation="sigmoid")(top))


def run_chief(args, cluster, procs):
    import tensorflow as tf
    import tf_keras as keras

    meta = json.load(open(os.path.join(args.data, "meta.json")))
    sizes, n_train = meta["table_sizes"], meta["train"]
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.chief_inter_op)
    t_start = time.perf_counter()
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
    partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=256 * 1024, max_shards=len(cluster["ps"]))
    strategy = tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
    coord = tf.distribute.coordinator.ClusterCoordinator(strategy)
    data, batch = os.path.abspath(args.data), args.batch

    def dataset_fn():
        # Runs on each worker: the raw arrays read there.
        ids = tf.reshape(tf.io.decode_raw(tf.io.read_file(data + "/train_ids.bin"), tf.int32),
                         [n_train, FEATURES])
        dense = tf.reshape(tf.io.decode_raw(tf.io.read_file(data + "/train_dense.bin"),
                                            tf.float32), [n_train, DENSE])
        labels = tf.reshape(tf.io.decode_raw(tf.io.read_file(data + "/train_labels.bin"),
                                             tf.float32), [n_train, 1])
        ds = tf.data.Dataset.from_tensor_slices((ids, dense, labels)).shuffle(10000).repeat()
        return ds.batch(batch, drop_remainder=True).prefetch(2)

    with strategy.scope():
        model = build_model(keras, sizes)
        opt = keras.optimizers.legacy.Adagrad(0.01)
    log("model built")
    it = iter(coord.create_per_worker_dataset(dataset_fn))
    loss_fn = keras.losses.BinaryCrossentropy(reduction="none")

    @tf.function
    def step(iterator):
        def replica(ids, dense, labels):
            inputs = [ids[:, i:i + 1] for i in range(FEATURES)] + [dense]
            with tf.GradientTape() as tape:
                pred = model(inputs, training=True)
                loss = tf.nn.compute_average_loss(loss_fn(labels, pred))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        ids, dense, labels = next(iterator)
        return strategy.run(replica, args=(ids, dense, labels))

    res = {"system": "tf_pss", "tensorflow": tf.__version__, "workers": len(cluster["worker"]),
           "ps": len(cluster["ps"]), "batch_per_worker": batch, "rows": sum(sizes),
           "model_params": model.count_params()}
    for _ in range(args.warmup):
        coord.schedule(step, args=(it,))
    coord.join()
    res["startup_and_warmup_s"] = round(time.perf_counter() - t_start, 2)
    testbed, hosts = os.environ.get("PSC_TESTBED"), sorted(set(json.loads(
        os.environ.get("PSC_TF_HOSTS", "{}")).values()) | {4})
    before = tx_bytes(testbed, hosts) if testbed else None
    t0 = time.perf_counter()
    outs = [coord.schedule(step, args=(it,)) for _ in range(args.steps)]
    coord.join()
    dt = time.perf_counter() - t0
    if testbed:
        after = tx_bytes(testbed, hosts)
        sent = {str(h): after[h] - before[h] for h in hosts}
        res["bytes_sent_per_host"] = sent
        res["bytes_per_worker_step"] = round(sum(sent.values()) / args.steps)
    losses = [float(o.fetch()) for o in outs[-50:]]
    res.update({"timed_steps": args.steps, "wall_s": round(dt, 3),
                "examples_per_s": round(args.steps * batch / dt, 1),
                "last_50_steps_loss": round(sum(losses) / len(losses), 4)})
    res["peak_rss_kib"] = {"chief": vm_hwm_kib(os.getpid()),
                           **{k: vm_hwm_kib(p.pid) for k, p in procs.items()}}
    return res


def chief(args):
    if os.environ.get("PSC_TESTBED"):
        cluster = json.loads(os.environ["PSC_TF_CLUSTER"])
        hosts = json.loads(os.environ["PSC_TF_HOSTS"])
    else:
        socks = [socket.socket() for _ in range(args.workers + args.ps + 1)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        ports = [s.getsockname()[1] for s in socks]
        for s in socks:
            s.close()
        cluster = {"worker": [f"127.0.0.1:{p}" for p in ports[:args.workers]],
                   "ps": [f"127.0.0.1:{p}" for p in ports[args.workers:-1]],
                   "chief": [f"127.0.0.1:{ports[-1]}"]}
        hosts = None
    env = thread_env(args.threads, args.server_inter_op)
    procs = {}
    try:
        for job in ("ps", "worker"):
            for i in range(len(cluster[job])):
                cmd = [sys.executable, os.path.abspath(__file__), "--serve", f"{job}:{i}",
                       "--cluster", json.dumps(cluster), "--threads", str(args.threads),
                       "--server-inter-op", str(args.server_inter_op)]
                if hosts is not None:
                    # testbed.sh execs `ip netns exec`, which execs the
                    # interpreter: the pid is the task's.
                    cmd = ["bash", TESTBED, "exec", os.environ["PSC_TESTBED"],
                           str(hosts[f"{job}:{i}"])] + cmd
                procs[f"{job}:{i}"] = subprocess.Popen(cmd, env=env)
        os.environ.update({k: env[k] for k in (
            "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS",
            "TF_CPP_MIN_LOG_LEVEL", "TF_USE_LEGACY_KERAS", "CUDA_VISIBLE_DEVICES")})
        return run_chief(args, cluster, procs)
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    # A SIGTERM (click_through.sh's timeout) ends the chief through its
    # finally blocks, which stop the ps and worker tasks.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="bench/ctr_data.py's output directory")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ps", type=int, default=2)
    ap.add_argument("--batch", type=int, default=512, help="per-worker batch")
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--steps", type=int, default=600, help="timed scheduled steps, all workers")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--server-inter-op", dest="server_inter_op", type=int, default=2)
    ap.add_argument("--chief-inter-op", dest="chief_inter_op", type=int, default=2)
    ap.add_argument("--out", default="ctr_tf_pss.json")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--cluster", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(args)
    res = chief(args)
    line = json.dumps(res)
    print(line, flush=True)
    with open(args.out, "w") as f:
        f.write(line + "\n")


if __name__ == "__main__":
    main()
