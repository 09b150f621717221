"""pscluster against Keras 3: models built in Keras, trained by pscluster,
back in Keras.

For each model pscluster runs:
  1. model.save() -> pscluster trains from it on a cluster (1 ps, 2 workers)
     with a checkpoint at step 0; `pscluster export --step=0` gives back the
     Keras initial weights bit for bit;
  2. one SGD step of `worker --standalone` (one replica) and one Keras
     train_on_batch from the same weights on the same batch: the same loss
     and the same updated weights within 1e-5 relative;
  3. the cluster's --export loads in Keras, and Keras's predict on held-out
     inputs equals `pscluster predict` within 1e-4.
Models whose layers pscluster does not run must be refused before anything
starts, naming the layer and its class (exit 2). Models with Dropout take
the step check with rate 0 (Keras draws other masks). With
BatchNormalization the step check covers the moving mean and variance as
Keras's train_on_batch updates them.
Prints one line per check; exits 1 on the first failure.
"""

import inspect
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import keras
from keras import layers

BIN = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="keras_interop-")
FAILED = []


def check(name, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + name + ("" if ok else ": " + detail), flush=True)
    if not ok:
        FAILED.append(name)


def run(argv, want_rc=0):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if r.returncode != want_rc:
        print(r.stdout[-3000:], r.stderr[-3000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"{argv[0]} exited {r.returncode}, want {want_rc}: {' '.join(argv)}")
    return r


def max_rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def seed_cnn():
    m = keras.Sequential([keras.Input((28, 28, 1))])
    for i, f in enumerate([32, 32, 64, 64, 128, 128]):
        m.add(layers.Conv2D(f, 3, padding="same", activation="relu"))
        if i % 2 == 1:
            m.add(layers.MaxPooling2D())
    m.add(layers.Flatten())
    m.add(layers.Dense(128, activation="relu"))
    m.add(layers.Dense(10))
    return m, (28, 28, 1), 10, True


def functional_cnn():
    # A functional chain with a separate ReLU layer, he_normal kernels,
    # average pooling and a softmax output (Keras's predict gives
    # probabilities).
    x = inp = keras.Input((12, 12, 2))
    x = layers.Conv2D(8, 3, padding="same", kernel_initializer="he_normal")(x)
    x = layers.ReLU()(x)
    x = layers.AveragePooling2D(2)(x)
    x = layers.Flatten()(x)
    out = layers.Dense(5, activation="softmax")(x)
    return keras.Model(inp, out), (12, 12, 2), 5, False


def tabular_mlp():
    m = keras.Sequential([keras.Input((20,)), layers.Dense(32, activation="relu"),
                          layers.Dense(16, activation="relu"), layers.Dense(3)])
    return m, (20,), 3, True


def strided_cnn():
    # Strides with "valid" padding, "same" average pooling whose windows run
    # past the border (Keras averages only what is inside), a 5x5 kernel
    # without bias, an overlapping max pool.
    m = keras.Sequential([keras.Input((28, 28, 1)),
                          layers.Conv2D(16, 3, strides=2, padding="valid", activation="relu"),
                          layers.AveragePooling2D(3, strides=2, padding="same"),
                          layers.Conv2D(8, 5, padding="same", use_bias=False, activation="relu"),
                          layers.MaxPooling2D(2, strides=1), layers.Flatten(), layers.Dense(10)])
    return m, (28, 28, 1), 10, True


def bn_dropout(dropout=0.5):
    # BatchNormalization of a convolution's channels (after a convolution
    # without bias, strides 2 with asymmetric "same" padding) and of a Dense
    # layer's units (momentum 0.9, no beta), Dropout between them.
    m = keras.Sequential([keras.Input((16, 16, 2)),
                          layers.Conv2D(8, 3, strides=2, padding="same", use_bias=False),
                          layers.BatchNormalization(), layers.ReLU(), layers.MaxPooling2D(),
                          layers.Flatten(), layers.Dropout(dropout),
                          layers.Dense(24, use_bias=False),
                          layers.BatchNormalization(momentum=0.9, center=False),
                          layers.Activation("relu"), layers.Dense(5)])
    return m, (16, 16, 2), 5, True


def mish_cnn():
    m = keras.Sequential([keras.Input((28, 28, 1)),
                          layers.Conv2D(8, 3, padding="same", activation="mish"),
                          layers.Flatten(), layers.Dense(10)])
    return m, 'activation "mish"'


def gap_head(dropout=0.3):
    # Global average pooling, Dropout, tanh and LeakyReLU, GlobalMaxPooling's
    # sibling in the MLP below.
    m = keras.Sequential([keras.Input((14, 14, 3)),
                          layers.Conv2D(16, 3, padding="same", activation="tanh"),
                          layers.LeakyReLU(negative_slope=0.1),
                          layers.Conv2D(16, 3, padding="same", activation="relu"),
                          layers.GlobalAveragePooling2D(), layers.Dropout(dropout),
                          layers.Dense(6)])
    return m, (14, 14, 3), 6, True


def dropout_mlp(dropout=0.25):
    m = keras.Sequential([keras.Input((20,)), layers.Dense(32, activation="sigmoid"),
                          layers.Dropout(dropout), layers.Dense(16, activation="leaky_relu"),
                          layers.Dense(3, activation="softmax")])
    return m, (20,), 3, False


def data(shape, classes, n, seed):
    # Learnable: each class is a fixed random template, plus noise.
    t = np.random.default_rng(0)
    templates = t.normal(size=(classes,) + shape)
    # A per-class offset of each channel too, which global pooling keeps.
    templates += t.normal(size=(classes,) + (1,) * (len(shape) - 1) + (shape[-1],))
    templates = templates.astype(np.float32)
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, size=n)
    x = templates[y] + rng.normal(scale=0.5, size=(n,) + shape).astype(np.float32)
    return x.astype(np.float32), y.astype(np.int64)


def trained_on_the_cluster(name, model, shape, classes, logits):
    path = os.path.join(WORK, name + ".keras")
    model.save(path)
    initial = model.get_weights()
    x, y = data(shape, classes, 1024, 1)
    xv, yv = data(shape, classes, 256, 2)
    xt, yt = data(shape, classes, 200, 3)
    npz = os.path.join(WORK, name + ".npz")
    np.savez(npz, x_train=x, y_train=y, x_val=xv, y_val=yv, x_test=xt, y_test=yt)
    ckpt = os.path.join(WORK, name + "-ckpt")
    trained = os.path.join(WORK, name + "-trained.keras")
    result = os.path.join(WORK, name + ".json")
    run([BIN + "/pscluster", "launch", "--ps=1", "--workers=2", "--", "--model=" + path,
         "--data=" + npz, "--nostandardize", "--batch_size=64", "--epochs=2",
         "--steps_per_epoch=8", "--optimizer=momentum", "--learning_rate=0.02",
         "--intra_op_threads=1", "--eval_threads=1", "--unit_steps=4",
         "--checkpoint_dir=" + ckpt, "--export=" + trained, "--metrics_out=" + result])

    # 1. The initial weights, through the servers and a checkpoint, bit for bit.
    untrained = os.path.join(WORK, name + "-untrained.keras")
    run([BIN + "/pscluster", "export", ckpt, "--step=0", "--model=" + path, "--out=" + untrained])
    back = keras.models.load_model(untrained).get_weights()
    check(f"{name}: the untrained export is Keras's initial weights bit for bit",
          len(back) == len(initial) and all(np.array_equal(a, b) for a, b in zip(back, initial)))

    # 3. The trained export in Keras: its predictions are pscluster's.
    m = keras.models.load_model(trained)
    want = m.predict(xt, verbose=0)
    pred = os.path.join(WORK, name + "-pred.npy")
    run([BIN + "/pscluster", "predict", "--model=" + trained, "--data=" + npz, "--x=x_test",
         "--out=" + pred])
    got = np.load(pred)
    check(f"{name}: Keras predicts on the export what pscluster does (within 1e-4)",
          got.shape == want.shape and np.max(np.abs(got - want)) <= 1e-4,
          f"shapes {got.shape} {want.shape}, max diff {np.max(np.abs(got - want)) if got.shape == want.shape else None}")
    r = json.load(open(result))
    accuracy = float(np.mean(want.argmax(-1) == yt))
    check(f"{name}: the model learned ({accuracy:.2f} held-out accuracy, chance {1 / classes:.2f})",
          accuracy > 1.5 / classes)
    check(f"{name}: the result file's test accuracy is Keras's",
          abs(r["test_accuracy"] - accuracy) < 1e-9, f"{r['test_accuracy']} vs {accuracy}")


def one_sgd_step(name, model, shape, classes, logits):
    # Compiled before saving: pscluster takes the optimizer, its learning
    # rate and the loss from the archive's compile_config (no flags given).
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=logits))
    path = os.path.join(WORK, name + "-step.keras")
    model.save(path)
    x, y = data(shape, classes, 32, 4)
    xv, yv = data(shape, classes, 32, 5)
    npz = os.path.join(WORK, name + "-step.npz")
    np.savez(npz, x_train=x, y_train=y, x_val=xv, y_val=yv)
    after = os.path.join(WORK, name + "-after.keras")
    result = os.path.join(WORK, name + "-step.json")
    run([BIN + "/worker", "--standalone", "--model=" + path, "--data=" + npz, "--nostandardize",
         "--batch_size=32", "--epochs=1", "--steps_per_epoch=1", "--intra_op_threads=1",
         "--export=" + after,
         "--metrics_out=" + result])
    k = keras.models.load_model(path)
    k.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=logits))
    loss = float(k.train_on_batch(x, y))
    ours = json.load(open(result))["epochs"][0]["loss"]
    check(f"{name}: one SGD step's loss is Keras's train_on_batch (within 1e-5)",
          abs(ours - loss) <= 1e-5 * abs(loss), f"{ours} vs {loss}")
    got = keras.models.load_model(after).get_weights()
    want = k.get_weights()
    worst = max(max_rel(a, b) for a, b in zip(got, want))
    check(f"{name}: the updated weights are Keras's (within 1e-5 relative; worst {worst:.1e})",
          worst <= 1e-5)


def refused(name, model, want):
    path = os.path.join(WORK, name + ".keras")
    model.save(path)
    r = run([BIN + "/chief", "--check_job", "--model=" + path], want_rc=2)
    check(f"{name}: refused before anything starts, naming the layer and why (exit 2)",
          want in r.stderr and "layer \"" in r.stderr, r.stderr)


def python_fit():
    # The Python entry point (python/pscluster): fit() as Keras users call it.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    import pscluster

    model, shape, classes, _ = tabular_mlp()
    x, y = data(shape, classes, 1024, 6)
    xv, yv = data(shape, classes, 256, 7)
    before = [w.copy() for w in model.get_weights()]
    best = os.path.join(WORK, "fit-best.keras")
    history = pscluster.fit(model, x, y, validation_data=(xv, yv), epochs=3, batch_size=64,
                            workers=2, ps=1, mode="async", optimizer="momentum",
                            learning_rate=0.05, bin_dir=BIN,
                            callbacks=[keras.callbacks.ModelCheckpoint(best, save_best_only=True),
                                       keras.callbacks.TerminateOnNaN()],
                            flags=["--intra_op_threads=1", "--eval_threads=1"], verbose=0)
    result = history.result
    accuracy = float(np.mean(model.predict(xv, verbose=0).argmax(-1) == yv))
    check("pscluster.fit: trains the model in place and returns Keras's History "
          f"(mode {result['mode']}, epochs {history.epoch}, {accuracy:.2f} accuracy)",
          isinstance(history, keras.callbacks.History) and result["mode"] == "async" and
          history.epoch == [0, 1, 2] and len(history.history["val_loss"]) == 3 and
          abs(history.history["val_accuracy"][-1] - accuracy) < 1e-9 and accuracy > 1.5 / classes
          and not all(np.array_equal(a, b) for a, b in zip(before, model.get_weights())),
          json.dumps(history.history))
    best_epoch = int(np.argmin(history.history["val_loss"]))
    best_accuracy = float(np.mean(
        keras.models.load_model(best).predict(xv, verbose=0).argmax(-1) == yv))
    check("pscluster.fit: ModelCheckpoint(save_best_only=True) holds the best epoch's model "
          f"(epoch {best_epoch + 1} by val_loss, val_accuracy {best_accuracy:.3f})",
          abs(best_accuracy - history.history["val_accuracy"][best_epoch]) < 1e-9,
          f"{best_accuracy} vs {history.history['val_accuracy']}")
    for kwargs, want in ((dict(class_weight={0: 1.0}, sample_weight=np.ones(len(x))),
                          "class_weight, sample_weight: not both at once"),
                         (dict(sample_weight=np.ones(3)), "sample_weight: shape (3,)"),
                         (dict(batch_size=0), "batch_size: 0 must be a positive integer"),
                         (dict(callbacks=[keras.callbacks.CSVLogger("x.csv")]),
                          "callbacks: CSVLogger is not supported"),
                         (dict(steps_per_epoch=10 ** 6), "steps_per_epoch")):
        try:
            pscluster.fit(model, x, y, validation_data=(xv, yv), bin_dir=BIN, verbose=0,
                          **kwargs)
            check(f"pscluster.fit: {list(kwargs)} raises PsclusterError", False, "no error")
        except pscluster.PsclusterError as e:
            check(f"pscluster.fit: {list(kwargs)} raises PsclusterError naming its own argument",
                  want in str(e) and "--" not in str(e) and "/tmp" not in str(e), str(e))
    # An Adam-compiled model through fit(): no optimizer argument, so the
    # compiled one runs, and the job ok line fit() shows says so.
    adam = keras.models.load_model(adam_model)
    import contextlib
    import io
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        pscluster.fit(adam, x, y, validation_data=(xv, yv), epochs=1, batch_size=64,
                      workers=2, ps=1, bin_dir=BIN, class_weight={0: 1.0, 1: 2.5},
                      flags=["--intra_op_threads=1", "--eval_threads=1"], verbose=True)
    check("pscluster.fit: an Adam-compiled model runs adam, lr 0.001 (the job ok line)",
          "optimizer adam, lr 0.001" in shown.getvalue(), shown.getvalue()[-600:])
    check("pscluster.fit: class_weight reaches the job (the job ok line)",
          "class_weight {0: 1, 1: 2.5}" in shown.getvalue(), shown.getvalue()[-600:])
    bad = keras.Sequential([keras.Input((20,)), layers.Dense(4), layers.UnitNormalization(),
                            layers.Dense(3)])
    try:
        pscluster.fit(bad, x, y, validation_data=(xv, yv), bin_dir=BIN, verbose=False)
        check("pscluster.fit: an unsupported model raises PsclusterError", False, "no error")
    except pscluster.PsclusterError as e:
        check("pscluster.fit: an unsupported model raises PsclusterError naming the layer",
              "(UnitNormalization)" in str(e), str(e))


def loss_options():
    # The loss's options and fit's weights: one step of pscluster equals
    # Keras's train_on_batch with the same ones (loss and updated weights,
    # 1e-5 relative): worker --standalone, and for reduction="sum" also a
    # sync cluster of 2 workers, whose servers must apply the sum over the
    # whole batch (each worker computes half of it).
    x, y = data((12,), 3, 32, 21)
    xv, yv = data((12,), 3, 16, 22)
    sw = np.random.default_rng(23).uniform(0, 3, size=32).astype(np.float32)
    onehot, onehot_v = np.eye(3, dtype=np.float32)[y], np.eye(3, dtype=np.float32)[yv]
    cce = keras.losses.CategoricalCrossentropy
    scce = keras.losses.SparseCategoricalCrossentropy
    cases = [
        ("label_smoothing=0.1", lambda: cce(from_logits=True, label_smoothing=0.1), True, {}, []),
        ('reduction="sum"', lambda: scce(from_logits=True, reduction="sum"), False, {}, []),
        ("class_weight", lambda: scce(from_logits=True), False,
         {"class_weight": {0: 0.5, 2: 3.0}}, ["--class_weight=0:0.5,2:3"]),
        ("sample_weight", lambda: scce(from_logits=True), False, {"sample_weight": sw},
         ["--sample_weight=sw"]),
        ('label_smoothing=0.2, reduction="sum", sample_weight',
         lambda: cce(from_logits=True, label_smoothing=0.2, reduction="sum"), True,
         {"sample_weight": sw}, ["--sample_weight=sw"]),
    ]
    for i, (name, loss, hot, fit_args, flags) in enumerate(cases):
        keras.utils.set_random_seed(30 + i)
        model = keras.Sequential([keras.Input((12,)), layers.Dense(8, activation="relu"),
                                  layers.Dense(3)])
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss=loss())
        path = os.path.join(WORK, f"loss{i}.keras")
        model.save(path)
        npz = os.path.join(WORK, f"loss{i}.npz")
        np.savez(npz, x_train=x, y_train=onehot if hot else y, x_val=xv,
                 y_val=onehot_v if hot else yv, sw=sw)
        k = keras.models.load_model(path)
        k.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss=loss())
        want_loss = float(k.train_on_batch(x, onehot if hot else y, **fit_args))
        want = k.get_weights()
        runs = [("worker --standalone", [BIN + "/worker", "--standalone"])]
        if "sum" in name:
            runs.append(("a sync cluster of 2 workers",
                         [BIN + "/pscluster", "launch", "--ps=1", "--workers=2", "--",
                          "--mode=sync", "--eval_threads=1"]))
        for where, argv in runs:
            after = os.path.join(WORK, f"loss{i}-after.keras")
            result = os.path.join(WORK, f"loss{i}.json")
            r = run(argv + ["--model=" + path, "--data=" + npz, "--nostandardize",
                            "--batch_size=32", "--epochs=1", "--steps_per_epoch=1",
                            "--intra_op_threads=1", "--export=" + after,
                            "--metrics_out=" + result] + flags)
            ours = json.load(open(result))["epochs"][0]["loss"]
            got = keras.models.load_model(after).get_weights()
            worst = max(max_rel(a, b) for a, b in zip(got, want))
            check(f"loss {name}, {where}: one step's loss ({ours:.6g}) and weights are Keras's "
                  f"train_on_batch (within 1e-5; worst {worst:.1e})",
                  abs(ours - want_loss) <= 1e-5 * abs(want_loss) and worst <= 1e-5,
                  f"loss {ours} vs {want_loss}, worst {worst}")
    # --noshuffle (fit(shuffle=False)): the first step is Keras's step on the
    # first rows; shuffled, it is not.
    x64, y64 = data((12,), 3, 64, 26)
    keras.utils.set_random_seed(36)
    model = keras.Sequential([keras.Input((12,)), layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    ordered = os.path.join(WORK, "ordered.keras")
    model.save(ordered)
    npz64 = os.path.join(WORK, "ordered.npz")
    np.savez(npz64, x_train=x64, y_train=y64, x_val=xv, y_val=yv)
    k = keras.models.load_model(ordered)
    k.train_on_batch(x64[:32], y64[:32])
    worst = {}
    for flag in ("--noshuffle", "--shuffle"):
        after = os.path.join(WORK, "ordered-after.keras")
        run([BIN + "/worker", "--standalone", "--model=" + ordered, "--data=" + npz64,
             "--nostandardize", "--batch_size=32", "--epochs=1", "--steps_per_epoch=1",
             "--intra_op_threads=1", "--export=" + after, flag])
        got = keras.models.load_model(after).get_weights()
        worst[flag] = max(max_rel(a, b) for a, b in zip(got, k.get_weights()))
    check(f"--noshuffle: the first step is Keras's on the first 32 rows (worst {worst['--noshuffle']:.1e}; "
          f"shuffled {worst['--shuffle']:.1e})",
          worst["--noshuffle"] <= 1e-5 and worst["--shuffle"] > 1e-3, str(worst))
    # Both weights at once: refused as Keras's fit refuses them.
    r = run([BIN + "/chief", "--check_job", "--model=" + path, "--data=" + npz,
             "--sample_weight=sw", "--class_weight=0:2"], want_rc=2)
    check("class_weight with sample_weight: exit 2, as Keras's fit refuses both",
          "--class_weight and --sample_weight together" in r.stderr, r.stderr)


def compiled_metrics():
    # Compiled metrics with one-hot labels: one step of worker --standalone
    # reports Keras's train_on_batch metrics (the step's forward pass), and
    # the validation metrics Keras's evaluate gives on the updated model;
    # a cluster's result file and test metrics are Keras's on its export.
    x, y = data((12,), 3, 32, 24)
    xv, yv = data((12,), 3, 40, 25)
    hot, hot_v = np.eye(3, dtype=np.float32)[y], np.eye(3, dtype=np.float32)[yv]
    metrics = ["mae", "mse", keras.metrics.Precision(), keras.metrics.Recall(),
               keras.metrics.AUC(num_thresholds=50, name="auc50"), "binary_accuracy"]
    for out in (None, "softmax"):
        keras.utils.set_random_seed(40)
        model = keras.Sequential([keras.Input((12,)), layers.Dense(8, activation="relu"),
                                  layers.Dense(3, activation=out)])
        loss = keras.losses.CategoricalCrossentropy(from_logits=out is None)
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss=loss,
                      metrics=metrics)
        path = os.path.join(WORK, f"metrics-{out}.keras")
        model.save(path)
        npz = os.path.join(WORK, "metrics.npz")
        np.savez(npz, x_train=x, y_train=hot, x_val=xv, y_val=hot_v, x_test=xv, y_test=hot_v)
        k = keras.models.load_model(path)
        want_train = k.train_on_batch(x, hot, return_dict=True)
        want_val = k.evaluate(xv, hot_v, verbose=0, return_dict=True)
        result = os.path.join(WORK, "metrics.json")
        run([BIN + "/worker", "--standalone", "--model=" + path, "--data=" + npz,
             "--nostandardize", "--batch_size=32", "--epochs=1", "--steps_per_epoch=1",
             "--intra_op_threads=1", "--metrics_out=" + result])
        epoch = json.load(open(result))["epochs"][0]
        names = ["mae", "mse", "precision", "recall", "auc50", "binary_accuracy"]
        worst = max(max(abs(epoch[n] - float(want_train[n])),
                        abs(epoch["val_" + n] - float(want_val[n]))) for n in names)
        check(f"compiled metrics ({'logits' if out is None else 'softmax'} outputs): one step's "
              f"training and validation values are Keras's (worst difference {worst:.1e})",
              worst <= 1e-5, f"ours {epoch}, Keras {dict(want_train)} {dict(want_val)}")
    # On a cluster: the result file's validation and test metrics are
    # Keras's evaluate of the export, and the progress lines show them.
    trained = os.path.join(WORK, "metrics-trained.keras")
    r = run([BIN + "/pscluster", "launch", "--ps=1", "--workers=2", "--", "--model=" + path,
             "--data=" + npz, "--nostandardize", "--batch_size=16", "--epochs=1",
             "--intra_op_threads=1", "--eval_threads=1", "--export=" + trained,
             "--metrics_out=" + result])
    res = json.load(open(result))
    want = keras.models.load_model(trained).evaluate(xv, hot_v, verbose=0, return_dict=True)
    worst = max(max(abs(res["epochs"][-1]["val_" + n] - float(want[n])),
                    abs(res["test_metrics"][n] - float(want[n]))) for n in names)
    check(f"compiled metrics on a cluster: the validation and test values are Keras's evaluate "
          f"of the export (worst {worst:.1e}), and the epoch line shows val_auc50",
          worst <= 1e-5 and " - val_auc50: " in r.stdout, f"{res['test_metrics']} {dict(want)}")


def raw_inputs():
    # The job's preprocessing travels in the export: Keras's predict on RAW
    # inputs equals pscluster predict on the same raw inputs, and a model's
    # own Normalization layer is what pscluster reads its examples through.
    keras.utils.set_random_seed(11)  # the models' initial weights: whatever ran before
    scales = np.logspace(-2, 3, 20).astype(np.float32)  # features of mixed scales
    x, y = data((20,), 3, 1024, 11)
    xv, yv = data((20,), 3, 256, 12)
    xt, yt = data((20,), 3, 200, 13)
    x, xv, xt = x * scales + 5, xv * scales + 5, xt * scales + 5
    npz = os.path.join(WORK, "raw.npz")
    np.savez(npz, x_train=x, y_train=y, x_val=xv, y_val=yv, x_test=xt, y_test=yt)
    cases = {
        "standardized per feature": (tabular_mlp()[0], [], "Normalization"),
        "own Normalization layer": (
            keras.Sequential([keras.Input((20,)),
                              layers.Normalization(mean=x.mean(0), variance=x.var(0)),
                              layers.Dense(32, activation="relu"), layers.Dense(3)]),
            [], "Normalization"),
        # Features from 1e-5 to 1 after the rescale: a faster rate to learn in 16 steps.
        "rescaled": (tabular_mlp()[0], ["--rescale=1/1000", "--learning_rate=0.01"],
                     "Rescaling"),
    }
    for name, (model, flags, first) in cases.items():
        slug = name.replace(" ", "_")
        path = os.path.join(WORK, slug + ".keras")
        model.save(path)
        trained = os.path.join(WORK, slug + "-trained.keras")
        result = os.path.join(WORK, slug + ".json")
        r = run([BIN + "/pscluster", "launch", "--ps=1", "--workers=2", "--", "--model=" + path,
                 "--data=" + npz, "--batch_size=64", "--epochs=2", "--steps_per_epoch=8",
                 "--optimizer=adam", "--intra_op_threads=1", "--eval_threads=1",
                 "--export=" + trained, "--metrics_out=" + result] + flags)
        m = keras.models.load_model(trained)
        kinds = [type(l).__name__ for l in m.layers]
        check(f"raw inputs, {name}: the export starts with one {first} layer ({kinds})",
              kinds[0] == first and kinds.count("Normalization") + kinds.count("Rescaling") == 1)
        want = m.predict(xt, verbose=0)
        pred = os.path.join(WORK, slug + "-pred.npy")
        run([BIN + "/pscluster", "predict", "--model=" + trained, "--data=" + npz,
             "--x=x_test", "--out=" + pred])
        got = np.load(pred)
        diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else None
        check(f"raw inputs, {name}: Keras's predict on raw inputs is pscluster predict's "
              f"(max diff {diff})", diff is not None and diff <= 1e-4 * max(1.0, np.max(np.abs(want))))
        res = json.load(open(result))
        accuracy = float(np.mean(want.argmax(-1) == yt))
        check(f"raw inputs, {name}: the result's test accuracy is the export's in Keras "
              f"({accuracy:.2f}, chance 0.33)",
              abs(res["test_accuracy"] - accuracy) < 1e-9 and accuracy > 0.4,
              f"result {res['test_accuracy']}, Keras {accuracy}, epochs {res['epochs']}")
        if name == "standardized per feature":
            pre = res["data"]["preprocessing"]
            check("raw inputs: --standardize on (N, features) data fits one mean and std per "
                  "feature, recorded",
                  pre["axis"] == "last" and len(pre["mean"]) == 20 and
                  np.allclose(pre["mean"], x.mean(0), rtol=1e-5) and
                  np.allclose(pre["std"], x.std(0), rtol=1e-4), json.dumps(pre)[:300])
        if name == "own Normalization layer":
            check("raw inputs: a model's own Normalization is recorded as the preprocessing",
                  res["data"]["preprocessing"].get("layer") == m.layers[0].name,
                  json.dumps(res["data"]["preprocessing"])[:300])


def compiled_optimizer_runs():
    # What the user compiled is what runs, and the console says so; a flag
    # given wins even at the value of its old default.
    model, shape, classes, logits = tabular_mlp()
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=logits),
                  metrics=["accuracy"])
    path = os.path.join(WORK, "adam.keras")
    model.save(path)
    x, y = data(shape, classes, 256, 21)
    npz = os.path.join(WORK, "adam.npz")
    np.savez(npz, x_train=x, y_train=y)
    base = [BIN + "/pscluster", "launch", "--ps=1", "--workers=2", "--dry_run", "--",
            "--model=" + path, "--data=" + npz, "--validation_split=0.25"]
    r = run(base)
    check("compiled Adam: pscluster launch's job ok line says adam, lr 0.001",
          "optimizer adam, lr 0.001 (beta_1 0.9, beta_2 0.999, epsilon 1e-07) from the model's "
          "compile_config" in r.stdout + r.stderr, (r.stdout + r.stderr)[-600:])
    # deploy/run_local.sh (the README's first command) passes only what it
    # is given (and --epochs, --metrics_out): the compiled Adam runs.
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    r = subprocess.run(["bash", os.path.join(root, "deploy", "run_local.sh"), "--dry_run", "--",
                        "--model=" + path, "--data=" + npz, "--validation_split=0.25"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PSC_SKIP_BUILD="1",
                                BUILD_DIR=os.path.dirname(os.path.abspath(BIN))))
    out = r.stdout + r.stderr
    chief_line = next((l for l in out.splitlines() if "/chief " in l), "")
    check("compiled Adam: deploy/run_local.sh's job ok line says adam, lr 0.001, and its chief "
          "gets no --optimizer, --learning_rate or --mode",
          r.returncode == 0 and "optimizer adam, lr 0.001 (beta_1 0.9" in out and chief_line and
          not any(f in chief_line for f in ("--optimizer=", "--learning_rate=", "--mode=")),
          out[-800:])
    r = run(base + ["--optimizer=sgd"])
    check("compiled Adam: --optimizer=sgd given wins (sgd, lr 0.01)",
          "optimizer sgd, lr 0.01 from --optimizer" in r.stdout + r.stderr,
          (r.stdout + r.stderr)[-600:])
    r = run(base + ["--learning_rate=0.01"])
    check("compiled Adam: --learning_rate=0.01 given wins",
          "optimizer adam, lr 0.01 (" in r.stdout + r.stderr, (r.stdout + r.stderr)[-600:])
    bad = keras.Sequential([keras.Input((20,)), layers.Dense(3)])
    bad.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["mae"])
    bad_path = os.path.join(WORK, "mae.keras")
    bad.save(bad_path)
    r = run([BIN + "/chief", "--check_job", "--model=" + bad_path], want_rc=2)
    check("mae on class ids (Keras cannot compute it either) is refused naming it (exit 2)",
          "the metrics entry mae needs one-hot labels" in r.stderr, r.stderr[-400:])
    mixed = keras.Sequential([keras.Input((20,)), layers.Dense(3, dtype="mixed_float16")])
    mixed_path = os.path.join(WORK, "mixed.keras")
    mixed.save(mixed_path)
    r = run([BIN + "/chief", "--check_job", "--model=" + mixed_path, "--data=" + npz,
             "--validation_split=0.25"])
    check("a mixed_float16 layer is read, and its loss scaled as Keras's auto_scale_loss does",
          "computing in float16" in r.stdout and
          "scaled dynamically (initial scale 32768, doubled after 2000 finite steps)" in r.stdout,
          r.stdout[-400:] + r.stderr[-400:])
    r = run([BIN + "/worker", "--standalone", "--model=" + mixed_path, "--data=" + npz,
             "--validation_split=0.25", "--epochs=1", "--steps_per_epoch=1"], want_rc=2)
    check("training it on a CPU worker is refused naming the policy (exit 2)",
          "the dtype policy mixed_float16 (float16) on a CPU worker" in r.stderr, r.stderr[-400:])
    scaled = keras.Sequential([keras.Input((20,)), layers.Dense(3)])
    scaled.compile(optimizer=keras.optimizers.LossScaleOptimizer(
        keras.optimizers.SGD(0.05), initial_scale=256.0, dynamic_growth_steps=100),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    scaled_path = os.path.join(WORK, "scaled.keras")
    scaled.save(scaled_path)
    r = run([BIN + "/chief", "--check_job", "--model=" + scaled_path, "--data=" + npz,
             "--validation_split=0.25"])
    check("a LossScaleOptimizer is read: its inner SGD and its scale",
          "optimizer sgd, lr 0.05" in r.stdout and
          "scaled dynamically (initial scale 256, doubled after 100 finite steps)" in r.stdout,
          r.stdout[-400:] + r.stderr[-400:])
    quantized = keras.Sequential([keras.Input((20,)), layers.Dense(3)])
    quantized.quantize("int8")
    quantized_path = os.path.join(WORK, "quantized.keras")
    quantized.save(quantized_path)
    r = run([BIN + "/chief", "--check_job", "--model=" + quantized_path], want_rc=2)
    check("a quantized layer is refused naming the layer (exit 2)",
          "layer \"dense" in r.stderr and "not supported" in r.stderr, r.stderr[-400:])
    return path, npz


def early_stopping():
    # --early_stopping_* and --restore_best_weights as Keras's EarlyStopping:
    # the epochs' logs replayed through Keras's own callback stop at the
    # same epoch with the same best epoch, and the export holds the best
    # epoch's weights (the checkpoint of that epoch's end, bit for bit).
    spe = 5
    ckpt = os.path.join(WORK, "es-ckpt")
    out = os.path.join(WORK, "es.keras")
    result = os.path.join(WORK, "es.json")
    r = run([BIN + "/pscluster", "launch", "--ps=1", "--workers=2", "--", "--model=mlp",
             "--epochs=30", f"--steps_per_epoch={spe}", "--batch_size=64",
             "--max_train_examples=2000", "--optimizer=sgd", "--learning_rate=0.5",
             "--early_stopping_monitor=val_accuracy", "--early_stopping_patience=1",
             "--restore_best_weights", "--export=" + out, "--metrics_out=" + result,
             "--checkpoint_dir=" + ckpt, f"--checkpoint_every_steps={spe}",
             "--intra_op_threads=1", "--eval_threads=1"])
    res = json.load(open(result))
    stopped = res["training_stopped"]
    es = keras.callbacks.EarlyStopping(monitor="val_accuracy", patience=1, mode="max",
                                       restore_best_weights=True)
    dummy = keras.Sequential([keras.Input((1,)), layers.Dense(1)])
    dummy.compile(optimizer="sgd", loss="mse", metrics=["accuracy"])
    es.set_model(dummy)
    es.on_train_begin()
    keras_stop = None
    for i, e in enumerate(res["epochs"]):
        es.on_epoch_end(i, {"loss": e["loss"], "accuracy": e["accuracy"],
                            "val_loss": e["val_loss"], "val_accuracy": e["val_accuracy"]})
        if dummy.stop_training:
            keras_stop = i + 1
            break
    check(f"early stopping: stopped after epoch {stopped.get('epoch')} of 30, as Keras's "
          f"EarlyStopping on the same logs (epoch {keras_stop}, best {es.best_epoch + 1})",
          stopped["early"] and stopped["epoch"] == keras_stop and
          stopped["best_epoch"] == es.best_epoch + 1 and len(res["epochs"]) == keras_stop,
          json.dumps(stopped))
    best = os.path.join(WORK, "es-best.keras")
    run([BIN + "/pscluster", "export", ckpt, f"--step={stopped['best_epoch'] * spe}",
         "--model=mlp", "--out=" + best])
    got = keras.models.load_model(out).get_weights()
    want = keras.models.load_model(best).get_weights()
    check("early stopping: --restore_best_weights exports the best epoch's weights bit for bit",
          len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want)))


def reduce_lr_on_plateau():
    # --reduce_lr_* as Keras's ReduceLROnPlateau: the epochs' logs replayed
    # through Keras's own callback give the rates each epoch trained at.
    result = os.path.join(WORK, "rlr.json")
    run([BIN + "/pscluster", "launch", "--ps=2", "--workers=2", "--", "--model=mlp",
         "--epochs=8", "--steps_per_epoch=4", "--batch_size=64", "--max_train_examples=2000",
         "--optimizer=sgd", "--learning_rate=0.4", "--reduce_lr_monitor=val_accuracy",
         "--reduce_lr_patience=1", "--reduce_lr_factor=0.5", "--reduce_lr_min_delta=0.002",
         "--metrics_out=" + result, "--intra_op_threads=1", "--eval_threads=1"])
    res = json.load(open(result))
    ours = [e["learning_rate"] for e in res["epochs"]]
    cb = keras.callbacks.ReduceLROnPlateau(monitor="val_accuracy", mode="max", patience=1,
                                           factor=0.5, min_delta=0.002)
    dummy = keras.Sequential([keras.Input((1,)), layers.Dense(1)])
    dummy.compile(optimizer=keras.optimizers.SGD(learning_rate=0.4), loss="mse")
    cb.set_model(dummy)
    cb.on_train_begin()
    keras_rates = []
    for i, e in enumerate(res["epochs"]):
        keras_rates.append(float(keras.ops.convert_to_numpy(dummy.optimizer.learning_rate)))
        cb.on_epoch_end(i, {"val_accuracy": e["val_accuracy"], "val_loss": e["val_loss"]})
    check(f"ReduceLROnPlateau: each epoch's rate is Keras's on the same logs ({ours})",
          len(ours) == len(keras_rates) and
          all(abs(a - b) <= 1e-7 * b for a, b in zip(ours, keras_rates)) and
          min(ours) < 0.4, f"ours {ours}, Keras {keras_rates}")


# Every option of Model.compile, of the losses and optimizers pscluster
# names, and of each supported layer class, walked from Keras's own
# signatures: set to a value other than its default, it is either honoured
# (the job is accepted; what it does is checked against Keras elsewhere in
# this file) or refused (exit 2 naming it). An option in neither list, or
# one Keras adds in a later version, fails the walk until it is classified.
HONOURED = {
    "compile": {"optimizer", "loss", "metrics", "run_eagerly", "steps_per_execution",
                "jit_compile", "auto_scale_loss"},
    "SGD": {"learning_rate", "momentum", "nesterov", "name", "ema_momentum",
            "ema_overwrite_frequency", "weight_decay", "clipnorm", "global_clipnorm",
            "clipvalue"},  # the ema ones act only with use_ema (refused)
    "Adam": {"learning_rate", "beta_1", "beta_2", "epsilon", "name", "ema_momentum",
             "ema_overwrite_frequency", "weight_decay", "clipnorm", "global_clipnorm", "clipvalue"},
    "AdamW": {"learning_rate", "beta_1", "beta_2", "epsilon", "name", "ema_momentum",
              "ema_overwrite_frequency", "weight_decay", "clipnorm", "global_clipnorm", "clipvalue"},
    "RMSprop": {"learning_rate", "rho", "momentum", "epsilon", "centered", "name",
                "ema_momentum", "ema_overwrite_frequency", "weight_decay", "clipnorm", "global_clipnorm",
                "clipvalue"},
    "Adagrad": {"learning_rate", "initial_accumulator_value", "epsilon", "name", "ema_momentum",
                "ema_overwrite_frequency", "weight_decay", "clipnorm", "global_clipnorm", "clipvalue"},
    "BinaryCrossentropy": {"from_logits", "label_smoothing", "name", "dtype", "reduction"},
    "MeanSquaredError": {"name", "dtype", "reduction"},
    "MeanAbsoluteError": {"name", "dtype", "reduction"},
    "Huber": {"name", "dtype", "reduction", "delta"},  # delta: not saved by Keras 3.15
    "SparseCategoricalCrossentropy": {"from_logits", "name", "dtype", "reduction"},
    "CategoricalCrossentropy": {"from_logits", "name", "dtype", "reduction", "label_smoothing"},
    "Conv2D": {"filters", "kernel_size", "strides", "padding", "activation", "use_bias",
               "kernel_initializer", "bias_initializer", "dilation_rate", "groups"},
    "SeparableConv2D": {"filters", "kernel_size", "strides", "padding", "depth_multiplier",
                        "dilation_rate", "activation", "use_bias", "depthwise_initializer",
                        "pointwise_initializer", "bias_initializer"},
    "Conv2DTranspose": {"filters", "kernel_size", "strides", "padding", "activation", "use_bias",
                        "kernel_initializer", "bias_initializer", "dilation_rate",
                        "output_padding"},
    "DepthwiseConv2D": {"kernel_size", "strides", "padding", "depth_multiplier",
                        "dilation_rate", "activation", "use_bias", "depthwise_initializer",
                        "bias_initializer"},
    "MaxPooling2D": {"pool_size", "strides", "padding", "name"},
    "AveragePooling2D": {"pool_size", "strides", "padding", "name"},
    "Flatten": set(),
    "Reshape": {"target_shape"},
    "ZeroPadding2D": {"padding"},
    "Cropping2D": {"cropping"},
    "UpSampling2D": {"size"},
    "Dense": {"units", "activation", "use_bias", "kernel_initializer", "bias_initializer",
              "lora_alpha"},  # lora_alpha acts only with lora_rank (refused)
    "ReLU": {"negative_slope", "max_value"},  # not both (refused, a unit test)
    "ELU": {"alpha"},
    "LeakyReLU": {"negative_slope"},
    "GlobalAveragePooling2D": set(),
    "GlobalMaxPooling2D": set(),
    "Dropout": {"rate", "seed"},  # masks come from --seed (documented)
    "BatchNormalization": {"momentum", "epsilon", "center", "scale", "beta_initializer",
                           "gamma_initializer", "moving_mean_initializer",
                           "moving_variance_initializer",
                           "renorm_momentum", "renorm_clipping"},  # act only with renorm (refused)
    "Activation": {"activation"},
    "Softmax": {"axis"},  # 1 is the last axis here; another is refused
    "Rescaling": {"scale", "offset"},
    "Normalization": {"mean", "variance", "axis"},  # 1 is the last axis here
}
# A valid value other than the default, per option.
OTHER = {
    "strides": 2, "padding": "same", "data_format": "channels_first", "dilation_rate": 2,
    "groups": 2, "activation": "tanh", "use_bias": False, "kernel_initializer": "he_normal",
    "bias_initializer": "ones", "kernel_regularizer": "l2", "bias_regularizer": "l2",
    "activity_regularizer": "l2", "kernel_constraint": "non_neg", "bias_constraint": "non_neg",
    "filters": 3, "kernel_size": 2, "pool_size": 3, "units": 5, "lora_rank": 2, "lora_alpha": 4,
    "quantization_config": None, "max_value": 6.0, "negative_slope": 0.1, "threshold": 0.5,
    "keepdims": True, "rate": 0.3, "noise_shape": (None, 1), "seed": 3, "axis": 1,
    "momentum": 0.9, "epsilon": 0.01, "center": False, "scale": False,
    "beta_initializer": "ones", "gamma_initializer": "zeros",
    "moving_mean_initializer": "ones", "moving_variance_initializer": "zeros",
    "beta_regularizer": "l2", "gamma_regularizer": "l2", "beta_constraint": "non_neg",
    "gamma_constraint": "non_neg", "renorm": True, "renorm_clipping": {"rmax": 2.0},
    "renorm_momentum": 0.9, "synchronized": True, "offset": 0.5, "mean": 1.0, "variance": 4.0,
    "invert": True, "learning_rate": 0.05, "nesterov": True, "weight_decay": 0.01,
    "clipnorm": 1.0, "clipvalue": 1.0, "global_clipnorm": 1.0, "use_ema": True,
    "ema_momentum": 0.9, "ema_overwrite_frequency": 5, "loss_scale_factor": 2.0,
    "gradient_accumulation_steps": 2, "name": "renamed", "beta_1": 0.8, "beta_2": 0.99,
    "amsgrad": True, "from_logits": True, "ignore_class": 1, "reduction": "sum",
    "label_smoothing": 0.1, "dtype": "float32", "loss_weights": [2.0], "metrics": ["accuracy"],
    "weighted_metrics": ["accuracy"], "run_eagerly": True, "steps_per_execution": 2,
    "jit_compile": False, "auto_scale_loss": False, "optimizer": "adam", "loss": None,
    "depth_multiplier": 2, "depthwise_initializer": "he_normal", "depthwise_regularizer": "l2",
    "depthwise_constraint": "non_neg", "size": 3, "interpolation": "bilinear", "output_padding": 1, "pointwise_initializer": "he_normal",
    "pointwise_regularizer": "l2", "pointwise_constraint": "non_neg",
    "alpha": 0.5, "target_shape": (8,), "delta": 2.0, "cropping": ((1, 0), (0, 2)), "rho": 0.8, "centered": True, "initial_accumulator_value": 0.2,
}


def options_walk():
    rng = np.random.default_rng(0)
    npz = {}
    for shape in ((8,), (8, 8, 2)):
        path = os.path.join(WORK, f"walk{len(shape)}.npz")
        np.savez(path, x_train=rng.normal(size=(16,) + shape).astype(np.float32),
                 y_train=rng.integers(0, 3, size=16))
        npz[shape] = path
    binary_npz = os.path.join(WORK, "walk_binary.npz")
    np.savez(binary_npz, x_train=rng.normal(size=(16, 8)).astype(np.float32),
             y_train=rng.integers(0, 2, size=16))

    def job_ok(model, compile_args=None):
        if compile_args is not None:
            model.compile(**compile_args)
        path = os.path.join(WORK, "walk.keras")
        model.save(path)
        data = npz[tuple(model.input_shape[1:])]
        if model.output_shape[-1] == 1:
            data = binary_npz
        r = subprocess.run([BIN + "/chief", "--check_job", "--model=" + path, "--data=" + data,
                            "--validation_split=0.25", "--batch_size=4"],
                           capture_output=True, text=True, timeout=120)
        return r.returncode, r.stderr

    # How a refusal names an option when not by its own name.
    ALIASES = {"kernel_size": "window", "pool_size": "window", "invert": "invert=True",
               "renorm_clipping": "renorm", "trainable": "trainable=False",
               "weighted_metrics": "weighted_metrics"}

    def verdict(where, option, rc, err, saved=True):
        honoured = option in HONOURED.get(where, set())
        if not saved:
            return "not saved"
        if rc == 0 and honoured:
            return "honoured"
        if rc == 2 and not honoured and (option in err or ALIASES.get(option, "\0") in err):
            return "refused"
        return (f"WRONG (exit {rc}, {'listed' if honoured else 'not listed'} as honoured: "
                f"{err.strip()[-240:]})")

    def params(cls):
        return [(k, v.default) for k, v in inspect.signature(cls).parameters.items()
                if k not in ("self", "kwargs") and v.kind != v.VAR_KEYWORD]

    wrong, counts = [], {"honoured": 0, "refused": 0, "not saved": 0}

    def record(where, option, v):
        if v.startswith("WRONG") or v.startswith("UNCLASSIFIED"):
            wrong.append(f"{where}.{option}: {v}")
        else:
            counts[v] += 1

    def dense_head(logits=True):
        return keras.Sequential([keras.Input((8,)), layers.Dense(3)])

    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for option, default in params(keras.Model.compile):
        if option not in OTHER:
            record("compile", option, "UNCLASSIFIED: no other value known")
            continue
        args = {"optimizer": "sgd", "loss": loss, option: OTHER[option]}
        if option == "optimizer":
            args[option] = "adam"
        if option == "loss":
            args[option] = keras.losses.CategoricalCrossentropy(from_logits=True)
        rc, err = job_ok(dense_head(), args)
        record("compile", option, verdict("compile", option, rc, err))
    for cls in (keras.optimizers.SGD, keras.optimizers.Adam, keras.optimizers.AdamW,
                keras.optimizers.RMSprop, keras.optimizers.Adagrad):
        for option, default in params(cls):
            if option not in OTHER:
                record(cls.__name__, option, "UNCLASSIFIED: no other value known")
                continue
            value = OTHER[option] if option != "momentum" else 0.5
            rc, err = job_ok(dense_head(), {"optimizer": cls(**{option: value}), "loss": loss})
            record(cls.__name__, option, verdict(cls.__name__, option, rc, err))
    for cls in (keras.losses.SparseCategoricalCrossentropy, keras.losses.CategoricalCrossentropy):
        for option, default in params(cls):
            if option not in OTHER:
                record(cls.__name__, option, "UNCLASSIFIED: no other value known")
                continue
            kwargs = {"from_logits": True, option: OTHER[option]}
            if option == "from_logits":  # the other value of a logits model is refused
                kwargs[option] = True
            saved = option in cls(**kwargs).get_config()
            rc, err = job_ok(dense_head(), {"optimizer": "sgd", "loss": cls(**kwargs)})
            record(cls.__name__, option, verdict(cls.__name__, option, rc, err, saved))
    # binary_crossentropy on one sigmoid unit (a logit for from_logits=True).
    for option, default in params(keras.losses.BinaryCrossentropy):
        if option not in OTHER:
            record("BinaryCrossentropy", option, "UNCLASSIFIED: no other value known")
            continue
        kwargs = {option: OTHER[option]}
        head = keras.Sequential([keras.Input((8,)), layers.Dense(
            1, activation="linear" if option == "from_logits" else "sigmoid")])
        saved = option in keras.losses.BinaryCrossentropy(**kwargs).get_config()
        rc, err = job_ok(head, {"optimizer": "sgd",
                                "loss": keras.losses.BinaryCrossentropy(**kwargs)})
        record("BinaryCrossentropy", option, verdict("BinaryCrossentropy", option, rc, err, saved))
    # The regression losses on one linear unit (the 0/1 labels are float
    # targets too).
    for cls in (keras.losses.MeanSquaredError, keras.losses.MeanAbsoluteError,
                keras.losses.Huber):
        for option, default in params(cls):
            if option not in OTHER:
                record(cls.__name__, option, "UNCLASSIFIED: no other value known")
                continue
            kwargs = {option: OTHER[option]}
            saved = option in cls(**kwargs).get_config()
            head = keras.Sequential([keras.Input((8,)), layers.Dense(1)])
            rc, err = job_ok(head, {"optimizer": "sgd", "loss": cls(**kwargs)})
            record(cls.__name__, option, verdict(cls.__name__, option, rc, err, saved))
    spatial = (layers.Conv2D, layers.DepthwiseConv2D, layers.SeparableConv2D,
               layers.Conv2DTranspose, layers.MaxPooling2D, layers.AveragePooling2D,
               layers.GlobalAveragePooling2D, layers.GlobalMaxPooling2D,
               layers.BatchNormalization, layers.Flatten, layers.ZeroPadding2D,
               layers.Cropping2D, layers.UpSampling2D)
    required = {"Conv2D": {"filters": 4, "kernel_size": 3}, "DepthwiseConv2D": {"kernel_size": 3},
                "SeparableConv2D": {"filters": 4, "kernel_size": 3},
                "Conv2DTranspose": {"filters": 4, "kernel_size": 3},
                "AveragePooling2D": {"pool_size": 2},
                "Dense": {"units": 4}, "Dropout": {"rate": 0.5},
                "Activation": {"activation": "relu"}, "Rescaling": {"scale": 0.5},
                "Normalization": {"mean": 0.0, "variance": 1.0}, "Reshape": {"target_shape": (8,)}}
    for cls in spatial + (layers.Dense, layers.ReLU, layers.LeakyReLU, layers.ELU, layers.Dropout,
                          layers.Activation, layers.Softmax, layers.Rescaling,
                          layers.Normalization, layers.Reshape):
        name = cls.__name__
        for option, default in params(cls):
            if option in ("name",) and name not in HONOURED:
                continue
            if option not in OTHER:
                record(name, option, "UNCLASSIFIED: no other value known")
                continue
            kwargs = dict(required.get(name, {}))
            kwargs[option] = {"Rescaling": {"scale": 0.25}, "ZeroPadding2D": {"padding": (1, 2)}}.get(
                name, {}).get(option, OTHER[option])
            if name == "Conv2DTranspose" and option == "output_padding":
                kwargs["strides"] = 2  # output_padding is below the strides
            if option == "quantization_config":
                continue  # needs a quantizer object: a quantized layer is refused by config key
            try:
                layer = cls(**kwargs)
            except Exception as e:  # noqa: BLE001 -- Keras refuses the value itself
                record(name, option, "not saved") if False else counts.__setitem__(
                    "not saved", counts["not saved"] + 1)
                continue
            if cls in spatial:
                body = [keras.Input((8, 8, 2)), layer]
                if cls not in (layers.Flatten, layers.GlobalAveragePooling2D,
                               layers.GlobalMaxPooling2D):
                    body.append(layers.Flatten())
                body.append(layers.Dense(3))
            elif cls is layers.Softmax:
                body = [keras.Input((8,)), layers.Dense(3), layer]
            else:
                body = [keras.Input((8,)), layer, layers.Dense(3)]
            try:
                model = keras.Sequential(body)
            except Exception:  # noqa: BLE001 -- a value Keras cannot build (e.g. channels_first on CPU)
                counts["not saved"] += 1
                continue
            rc, err = job_ok(model)
            record(name, option, verdict(name, option, rc, err))
    check(f"options walk over Keras's signatures: {counts['honoured']} honoured, "
          f"{counts['refused']} refused, {counts['not saved']} not saved or not buildable; "
          f"none silently ignored", not wrong, "; ".join(wrong))


def optimizer_state():
    # The export holds the optimizer's state in Keras's layout: after a sync
    # job, Keras's next train_on_batch from load_model equals pscluster's
    # next step on the same batch (the job resumed from its checkpoint for
    # one more step), per variable within 1e-3 of Keras's change.
    for opt, lr in (("adam", 0.01), ("momentum", 0.05)):
        model, shape, classes, logits = tabular_mlp()
        compiled = (keras.optimizers.Adam(lr) if opt == "adam" else
                    keras.optimizers.SGD(lr, momentum=0.9))
        model.compile(optimizer=compiled,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=logits))
        path = os.path.join(WORK, f"state-{opt}.keras")
        model.save(path)
        x, y = data(shape, classes, 64, 31)
        xv, yv = data(shape, classes, 64, 32)
        npz = os.path.join(WORK, f"state-{opt}.npz")
        np.savez(npz, x_train=x, y_train=y, x_val=xv, y_val=yv)
        ckpt = os.path.join(WORK, f"state-{opt}-ckpt")
        a, b = (os.path.join(WORK, f"state-{opt}-{n}.keras") for n in "ab")
        common = [BIN + "/pscluster", "launch", "--ps=1", "--workers=2", "--", "--model=" + path,
                  "--data=" + npz, "--nostandardize", "--batch_size=64", "--steps_per_epoch=1",
                  "--checkpoint_dir=" + ckpt, "--intra_op_threads=1", "--eval_threads=1"]
        run(common + ["--epochs=3", "--export=" + a])
        run(common + ["--epochs=4", "--export=" + b])  # resumes at step 3: one more step
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            k = keras.models.load_model(a)
        skipped = [str(w.message) for w in caught if "Skipping variable loading" in str(w.message)]
        iterations = int(keras.ops.convert_to_numpy(k.optimizer.iterations))
        before = k.get_weights()
        k.train_on_batch(x, y)
        keras_delta = [w1 - w0 for w1, w0 in zip(k.get_weights(), before)]
        ours = [w1 - w0 for w1, w0 in zip(keras.models.load_model(b).get_weights(), before)]
        worst = max(float(np.max(np.abs(o - kd)) / max(float(np.max(np.abs(kd))), 1e-30))
                    for o, kd in zip(ours, keras_delta))
        check(f"optimizer state ({opt}): the export loads in Keras with its state (iterations "
              f"{iterations}), and Keras's next step equals pscluster's (worst {worst:.1e} of "
              "Keras's change)",
              not skipped and iterations == 3 and worst <= 1e-3, f"{skipped} {worst}")


keras.utils.set_random_seed(7)
loss_options()
compiled_metrics()
optimizer_state()
options_walk()
reduce_lr_on_plateau()
early_stopping()
raw_inputs()
adam_model, adam_npz = compiled_optimizer_runs()
for build in (seed_cnn, functional_cnn, tabular_mlp, strided_cnn, bn_dropout, gap_head,
              dropout_mlp):
    model, shape, classes, logits = build()
    trained_on_the_cluster(build.__name__, model, shape, classes, logits)
    # Dropout off for the step check: Keras draws other masks.
    with_dropout = (gap_head, dropout_mlp, bn_dropout)
    model, shape, classes, logits = build(dropout=0.0) if build in with_dropout else build()
    one_sgd_step(build.__name__, model, shape, classes, logits)
for build in (mish_cnn,):
    model, want = build()
    refused(build.__name__, model, want)
python_fit()

print(f"keras {keras.__version__}, backend {keras.backend.backend()}: "
      f"{len(FAILED)} check(s) failed" if FAILED else
      f"keras {keras.__version__}, backend {keras.backend.backend()}: every check passed")
sys.exit(1 if FAILED else 0)
