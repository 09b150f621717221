"""One Keras model of a graph's shape against pscluster (issue 37's checks).

Usage: keras_models.py BIN_DIR MODEL, MODEL one of the builders below.

  1. The step check: one SGD step of `worker --standalone` and Keras's
     train_on_batch from the same weights on the same batch. Per variable,
     with D = w_after - w_before: max|D_ours - D_keras| <= 1e-3 max|D_keras|,
     and max|D_keras| > 0 (every variable here is trained); the weights also
     agree within 1e-5 relative. BatchNormalization's moving statistics
     move as Keras's train_on_batch moves them. The step runs with
     --conv_algorithm=direct: the default's Winograd convolutions round
     differently enough (about 1e-6 relative) to flip a few ReLUs of a deep
     BatchNormalization network, whose batch statistics spread the flip
     over the channel; the default's worst is printed beside (docs/guide/
     your-model.md, "How close to Keras").
  2. A short sync cluster run (1 ps, 2 workers, 3 epochs of 10 steps, within
     60 s) on learnable data: the last epoch's mean loss <= 0.7 x the first
     epoch's (its first 10 steps), validation accuracy >= chance + 0.2.
  3. Keras's predict on the cluster's export equals `pscluster predict`
     within 1e-4.
Prints one line per check; exits 1 if any failed.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import keras
from keras import layers

# Run: BIN_DIR and MODEL. Imported (bench/resnet_vs_keras_fit.sh takes the
# builders): neither.
BIN, MODEL = (sys.argv[1], sys.argv[2]) if __name__ == "__main__" else (None, None)
WORK = tempfile.mkdtemp(prefix="keras_models-") if __name__ == "__main__" else None
FAILED = []


def check(name, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + name + ("" if ok else ": " + detail), flush=True)
    if not ok:
        FAILED.append(name)


def run(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"{argv[0]} exited {r.returncode}: {' '.join(argv)}")
    return r


def resnet():
    """A small ResNet: 32x32x3, three stages of two basic blocks (16, 32, 64
    filters), strided 1x1 projections where the shape changes, BN (momentum
    0.9, so that the moving statistics of a 30-step run are the model's)."""
    inp = keras.Input((32, 32, 3))
    x = layers.Conv2D(16, 3, padding="same", use_bias=False)(inp)
    x = layers.BatchNormalization(momentum=0.9)(x)
    x = layers.ReLU()(x)
    for stage, filters in enumerate((16, 32, 64)):
        for block in range(2):
            strides = 2 if stage > 0 and block == 0 else 1
            shortcut = x
            y = layers.Conv2D(filters, 3, strides=strides, padding="same", use_bias=False)(x)
            y = layers.BatchNormalization(momentum=0.9)(y)
            y = layers.Activation("relu")(y)
            y = layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
            y = layers.BatchNormalization(momentum=0.9)(y)
            if strides != 1 or shortcut.shape[-1] != filters:
                shortcut = layers.Conv2D(filters, 1, strides=strides, use_bias=False)(shortcut)
                shortcut = layers.BatchNormalization(momentum=0.9)(shortcut)
            x = layers.Add()([y, shortcut])
            x = layers.Activation("relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, layers.Dense(10)(x), name="resnet"), (32, 32, 3), 10


def residual_mlp():
    """Tabular: a Dense block whose input is added to its output, then a
    three-way Add of branches of one tensor."""
    inp = keras.Input((20,))
    h = layers.Dense(32, activation="relu")(inp)
    y = layers.Dense(32, activation="relu")(h)
    y = layers.Dense(32)(y)
    x = layers.Activation("relu")(layers.Add()([h, y]))
    a = layers.Dense(16, activation="tanh")(x)
    b = layers.Dense(16)(x)
    x = layers.Add()([a, b, a])
    return keras.Model(inp, layers.Dense(4)(x), name="residual_mlp"), (20,), 4


def activations():
    """Keras 3's activations, fused (activation=) and as layers, on branches
    joined by an Add: elu, relu6 (ReLU(max_value=6), MobileNet's),
    hard_sigmoid, ELU(alpha), softplus, softsign, selu, exponential; gelu
    and silu (swish), whose gradients need their input: unfused, as a
    convolution's, a Dense's and a layer of their own."""
    inp = keras.Input((8, 8, 3))
    x = layers.Conv2D(8, 3, padding="same", activation="elu")(inp)
    a = layers.ReLU(max_value=6.0)(layers.Conv2D(8, 3, padding="same")(x))
    b = layers.Activation("hard_sigmoid")(layers.Conv2D(8, 1, activation="relu6")(x))
    c = layers.ELU(alpha=0.5)(x)
    d = layers.Conv2D(8, 1, activation="gelu")(x)
    y = layers.Flatten()(layers.Add()([a, b, c, d]))
    y = layers.Dense(16, activation="softplus")(y)
    y = layers.Dense(16, activation="softsign")(y)
    z = layers.Dense(16, activation="selu")(y)
    z = layers.Activation("exponential")(layers.Dense(16, activation="tanh")(z))
    z = layers.Activation("silu")(layers.Dense(16, activation="swish")(z))
    return keras.Model(inp, layers.Dense(5)(z), name="activations"), (8, 8, 3), 5


def merges():
    """Every merge: Concatenate of two branches along the channels and of
    pooled features, Multiply (a gate), Subtract, a three-way Average,
    Maximum, and Minimum of two ReLU outputs. (Ties, which split the
    gradient, are checked by the conformance suite: here the ReLUs pass
    nothing back where both are 0.)"""
    inp = keras.Input((12, 12, 3))
    a = layers.Conv2D(6, 3, padding="same", activation="relu")(inp)
    b = layers.Conv2D(4, 1, activation="tanh")(inp)
    x = layers.Concatenate()([a, b])                       # (12, 12, 10)
    g = layers.Conv2D(10, 3, padding="same", activation="sigmoid")(x)
    x = layers.Multiply()([x, g])                          # gated
    y = layers.Conv2D(10, 3, padding="same")(x)
    d = layers.Subtract()([y, x])
    x = layers.Average()([x, y, d])
    hi = layers.Maximum()([x, y])
    lo = layers.Minimum()([layers.ReLU()(d), layers.ReLU()(x)])
    x = layers.Add()([hi, lo])
    x = layers.MaxPooling2D()(x)                           # (6, 6, 10)
    p = layers.GlobalAveragePooling2D()(x)
    q = layers.GlobalMaxPooling2D()(x)
    x = layers.Concatenate(axis=-1)([p, q, p])             # (30,)
    x = layers.Dense(16, activation="relu")(x)
    return keras.Model(inp, layers.Dense(5)(x), name="merges"), (12, 12, 3), 5


def flatten_branches():
    """Two convolution branches, each flattened, concatenated and
    normalized (a BatchNormalization of flattened features), then Dense."""
    inp = keras.Input((10, 10, 2))
    a = layers.Flatten()(layers.Conv2D(4, 3, activation="relu")(inp))
    b = layers.Flatten()(layers.MaxPooling2D()(layers.Conv2D(3, 1, activation="tanh")(inp)))
    x = layers.BatchNormalization(momentum=0.9)(layers.Concatenate()([a, b]))
    x = layers.Dense(16, activation="relu")(x)
    return keras.Model(inp, layers.Dense(4)(x), name="flatten_branches"), (10, 10, 2), 4


def frozen_base():
    """Fine-tuning: a frozen convolutional base (a Conv2D, a
    BatchNormalization, which Keras then runs in inference mode, and a
    second Conv2D) under a trainable Conv2D and head, as after
    base.trainable = False. The base's weights come from a Keras fit, so
    the moving statistics are not their initial values."""
    inp = keras.Input((16, 16, 3))
    x = layers.Conv2D(8, 3, padding="same", name="base_conv")(inp)
    x = layers.BatchNormalization(name="base_bn")(x)
    x = layers.Activation("relu")(x)
    x = layers.Conv2D(8, 3, padding="same", activation="relu", name="base_conv2")(x)
    x = layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inp, layers.Dense(4)(x), name="frozen_base")
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    xs, ys = data((16, 16, 3), 4, 128, 9)
    model.fit(xs, ys, epochs=1, batch_size=32, verbose=0)  # moving statistics off their start
    for name in ("base_conv", "base_bn", "base_conv2"):
        model.get_layer(name).trainable = False
    return model, (16, 16, 3), 4


def binary():
    """A binary classifier: one sigmoid unit under binary_crossentropy with
    label_smoothing, on a Dense network with a BatchNormalization; labels
    0/1 as int64 (N,), which Keras expands to the output's (N, 1)."""
    inp = keras.Input((12,))
    x = layers.Dense(16, activation="relu")(inp)
    x = layers.BatchNormalization(momentum=0.9)(x)
    x = layers.Dense(8, activation="tanh")(x)
    return keras.Model(inp, layers.Dense(1, activation="sigmoid")(x), name="binary"), (12,), 2


def reshape():
    """Reshape both ways: features made an image for convolutions, and the
    convolutions' output made features again for a BatchNormalization."""
    inp = keras.Input((16,))
    x = layers.Dense(48, activation="relu")(inp)
    x = layers.Reshape((4, 4, 3))(x)
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    # No bias before the BatchNormalization: its gradient would be zero but
    # for rounding (the batch mean takes any constant away), too small to
    # compare a change with.
    x = layers.Conv2D(4, 3, strides=2, padding="same", use_bias=False)(x)
    x = layers.Reshape((-1,))(x)
    x = layers.BatchNormalization(momentum=0.9)(x)
    x = layers.Dense(16, activation="relu")(x)
    return keras.Model(inp, layers.Dense(4)(x), name="reshape"), (16,), 4


def two_inputs():
    """Two inputs joined by Concatenate: an image through a convolution and
    a global pooling, and features through a Dense; given to Keras in
    another order than the config lists the layers (input_layers decides),
    fed from the arrays x_train/<input name>."""
    image = keras.Input((8, 8, 2), name="image")
    features = keras.Input((5,), name="features")
    x = layers.Conv2D(6, 3, padding="same", activation="relu")(image)
    x = layers.GlobalAveragePooling2D()(x)
    f = layers.Dense(8, activation="tanh")(features)
    z = layers.Concatenate()([f, x])
    z = layers.Dense(12, activation="relu")(z)
    return (keras.Model([features, image], layers.Dense(3)(z), name="two_inputs"),
            {"features": (5,), "image": (8, 8, 2)}, 3)


class Ids(tuple):
    """The shape of an input of ids: (length,) of ids below `vocab`."""

    def __new__(cls, length, vocab):
        t = super().__new__(cls, (length,))
        t.vocab = vocab
        return t


def embeddings():
    """Issue 38's first model: two inputs of ids (int32, as keras.Input
    declares them: a user id, and a bag of 3 item ids with repeats), each
    through an Embedding, flattened or averaged (GlobalAveragePooling1D),
    concatenated with an input of values into Dense layers."""
    user = keras.Input((1,), dtype="int32", name="user")
    items = keras.Input((3,), dtype="int32", name="items")
    values = keras.Input((2,), name="values")
    u = layers.Flatten()(layers.Embedding(40, 4, name="user_emb")(user))
    i = layers.GlobalAveragePooling1D()(layers.Embedding(60, 4, name="item_emb")(items))
    z = layers.Concatenate()([u, i, values])
    z = layers.Dense(12, activation="tanh")(z)
    return (keras.Model([user, items, values], layers.Dense(3)(z), name="embeddings"),
            {"user": Ids(1, 40), "items": Ids(3, 60), "values": (2,)}, 3)


def dlrm():
    """A small DLRM: three categorical inputs of ids, each through its own
    Embedding to a (1, 4) row, and a bottom MLP of the dense input reshaped
    to (1, 4); the four rows concatenated along the steps (4, 4) and dotted
    with themselves, Dot(axes=(2, 2)), the pairwise interactions (4, 4)
    flattened beside the bottom MLP's output into the top MLP."""
    cats = [keras.Input((1,), dtype="int32", name=f"c{i}") for i in range(3)]
    dense = keras.Input((4,), name="values")
    bottom = layers.Dense(4)(layers.Dense(8, activation="relu")(dense))
    rows = [layers.Embedding(30, 4, name=f"table{i}")(c) for i, c in enumerate(cats)]
    stack = layers.Concatenate(axis=1)(rows + [layers.Reshape((1, 4))(bottom)])
    pairs = layers.Flatten()(layers.Dot(axes=(2, 2))([stack, stack]))
    z = layers.Dense(8, activation="relu")(layers.Concatenate()([bottom, pairs]))
    shape = {f"c{i}": Ids(1, 30) for i in range(3)}
    shape["values"] = (4,)
    return keras.Model(cats + [dense], layers.Dense(3)(z), name="dlrm"), shape, 3


def mf():
    """Matrix factorization, as item 7's MovieLens model: a user's and an
    item's Embedding rows dotted, Dot(axes=1), the model's output a
    regression's one value (no Dense after it)."""
    user = keras.Input((1,), dtype="int32", name="user")
    item = keras.Input((1,), dtype="int32", name="item")
    u = layers.Flatten()(layers.Embedding(12, 6, name="users")(user))
    i = layers.Flatten()(layers.Embedding(16, 6, name="items")(item))
    return (keras.Model([user, item], layers.Dot(axes=1)([u, i]), name="mf"),
            {"user": Ids(1, 12), "item": Ids(1, 16)}, 0)


def cosine():
    """Dot(normalize=True), Keras's cosine proximity: a user's row scored
    against a bag of 3 items' rows, Dot(axes=(2, 2)) of (1, 4) and (3, 4),
    and the bag's rows dotted with themselves over the items, Dot(axes=(1,
    1)), whose operands are normalized along the stored rows (the
    transposed layout), into a classifier."""
    user = keras.Input((1,), dtype="int32", name="user")
    items = keras.Input((3,), dtype="int32", name="items")
    u = layers.Embedding(20, 4, name="users")(user)
    i = layers.Embedding(30, 4, name="item_table")(items)
    score = layers.Flatten()(layers.Dot(axes=(2, 2), normalize=True)([u, i]))
    cols = layers.Flatten()(layers.Dot(axes=(1, 1), normalize=True)([i, i]))
    z = layers.Concatenate()([score, cols])
    return (keras.Model([user, items], layers.Dense(3)(z), name="cosine"),
            {"user": Ids(1, 20), "items": Ids(3, 30)}, 3)


def padding():
    """ZeroPadding2D and Cropping2D, asymmetric, one of each on a residual
    branch: the cropped tensor also feeds the Add, so its gradient is the
    sum of the padded-back branch's and the Add's."""
    inp = keras.Input((10, 10, 2))
    p = layers.ZeroPadding2D(((1, 2), (0, 1)))(inp)
    x = layers.Conv2D(4, 3, activation="relu")(p)
    y = layers.Cropping2D(((1, 0), (2, 1)))(x)
    z = layers.Conv2D(4, 3, padding="same", activation="tanh")(y)
    w = layers.ZeroPadding2D(((1, 0), (2, 1)))(z)
    a = layers.Add()([x, w])
    g = layers.GlobalAveragePooling2D()(a)
    return keras.Model(inp, layers.Dense(3)(g), name="padding"), (10, 10, 2), 3


def mobilenet():
    """A MobileNet-like network (issue 37's): a strided stem, then
    inverted-residual blocks of a 1x1 expansion, a DepthwiseConv2D (relu6
    as MobileNet's ReLU(max_value=6); one strided, one with
    depth_multiplier 2) and a 1x1 projection, added to the block's input
    where the shapes agree; then an UpSampling2D, a SeparableConv2D
    and a dilated, grouped Conv2D before the head."""
    inp = keras.Input((16, 16, 3))
    x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inp)
    x = layers.BatchNormalization(momentum=0.9)(x)
    x = layers.ReLU(max_value=6.0)(x)
    for expand, out, strides, multiplier in ((32, 16, 1, 1), (32, 24, 2, 1), (48, 24, 1, 2)):
        y = layers.Conv2D(expand, 1, use_bias=False)(x)
        y = layers.BatchNormalization(momentum=0.9)(y)
        y = layers.ReLU(max_value=6.0)(y)
        y = layers.DepthwiseConv2D(3, strides=strides, padding="same", use_bias=False,
                                   depth_multiplier=multiplier)(y)
        y = layers.BatchNormalization(momentum=0.9)(y)
        y = layers.Activation("relu6")(y)
        y = layers.Conv2D(out, 1, use_bias=False)(y)
        y = layers.BatchNormalization(momentum=0.9)(y)
        x = layers.Add()([x, y]) if strides == 1 and x.shape[-1] == out else y
        # After each block, a relu6: MobileNetV2's linear block output would
        # make the next block's BatchNormalization statistics (a 1x1
        # convolution of a zero-mean tensor) and this one's beta gradient
        # (through a BatchNormalization's zero-sum data gradient) zero but
        # for rounding, which no step check can compare.
        x = layers.ReLU(max_value=6.0)(x)
    x = layers.UpSampling2D(2)(x)
    x = layers.SeparableConv2D(32, 3, padding="same", depth_multiplier=2, activation="relu")(x)
    x = layers.Conv2D(32, 3, padding="same", dilation_rate=2, groups=4, activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, layers.Dense(10)(x), name="mobilenet"), (16, 16, 3), 10


def transposed():
    """Conv2DTranspose as a decoder uses it: "same" with stride 2 and a
    fused relu, "valid" with an even kernel and no bias (each input spread
    over its own 2x2 block), a dilated one under tanh, and an UpSampling2D
    between; a branch with output_padding, "valid" with strides (2, 3) and
    "same" with a fused relu; the encoder's output also feeds the head, so
    its gradient is the sum of three."""
    inp = keras.Input((8, 8, 3))
    e = layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(inp)
    d = layers.Conv2DTranspose(6, 3, strides=2, padding="same", activation="relu")(e)
    d = layers.Conv2DTranspose(4, 2, strides=2, padding="valid", use_bias=False)(d)
    d = layers.UpSampling2D((1, 2))(d)
    d = layers.Conv2DTranspose(4, 3, dilation_rate=2, padding="same", activation="tanh")(d)
    o = layers.Conv2DTranspose(3, 3, strides=(2, 3), padding="valid", output_padding=(1, 2))(e)
    o = layers.Conv2DTranspose(2, 3, strides=2, padding="same", output_padding=1,
                               activation="relu")(o)
    z = layers.Concatenate()([layers.GlobalAveragePooling2D()(d),
                              layers.GlobalAveragePooling2D()(e),
                              layers.GlobalAveragePooling2D()(o)])
    return keras.Model(inp, layers.Dense(3)(z), name="transposed"), (8, 8, 3), 3


def regression():
    """A regression MLP of two float targets (classes 0: no classes), its
    step checked under mean_squared_error, mean_absolute_error and huber."""
    inp = keras.Input((8,))
    x = layers.Dense(16, activation="relu")(inp)
    x = layers.Dense(16, activation="tanh")(x)
    return keras.Model(inp, layers.Dense(2)(x), name="regression"), (8,), 0


# Each model's loss (default: sparse categorical cross-entropy of logits)
# and the metrics its cluster run compiles (beside the accuracy, for a
# classifier).
LOSSES = {"binary": lambda: keras.losses.BinaryCrossentropy(label_smoothing=0.1),
          "regression": lambda: keras.losses.MeanSquaredError(),
          "bigru": lambda: keras.losses.MeanSquaredError(),
          "mf": lambda: keras.losses.MeanSquaredError()}
METRICS = {"binary": lambda: [keras.metrics.AUC(name="auc")],
           "regression": lambda: ["mae", keras.metrics.RootMeanSquaredError()],
           "bigru": lambda: ["mae"],
           "mf": lambda: ["mae"]}
# The cluster run's learning rate where 0.02 is too slow for 30 steps: the
# MobileNet-like network's loss falls by a third in 30 steps of Keras's own
# fit (SGD, momentum 0.9, batch 64) at 0.1, and by 1% at 0.02.
CLUSTER_LEARNING_RATE = {"mobilenet": 0.1, "mf": 0.5, "causal_conv": 0.05, "transformer": 0.001,
                         "causal_attention": 0.003, "lstm": 0.003, "bilstm": 0.003,
                         "bigru": 0.003, "masked_lstm": 0.003, "masked_attention": 0.003}
# Where set, the loss step_check compiles instead of the model's.
LOSS_OVERRIDE = None


def softmax_gates():
    """softmax anywhere: over a convolution's channels (activation=, in
    place), a Softmax layer gating a branch through a Multiply, a Dense's
    softmax, an Activation("softmax") and a Softmax over a Flatten's
    features feeding later layers. (The output
    softmax folded into the loss is the unit tests': compile_model's loss
    takes logits.)"""
    inp = keras.Input((8, 8, 3))
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    s = layers.Conv2D(8, 1, activation="softmax")(x)
    g = layers.Softmax()(layers.Conv2D(8, 1)(x))
    y = layers.Add()([layers.Multiply()([x, g]), s])
    y = layers.Flatten()(layers.MaxPooling2D()(y))
    y = layers.Add()([y, layers.Softmax()(y)])  # over all 128 flattened features
    h = layers.Dense(16, activation="softmax")(y)
    a = layers.Activation("softmax")(layers.Dense(16)(y))
    z = layers.Concatenate()([layers.Dense(16, activation="relu")(y), h, a])
    return keras.Model(inp, layers.Dense(5)(z), name="softmax_gates"), (8, 8, 3), 5


def order_data(n, seed, steps=24):
    """Issue 40's task that needs order: two channels of noise, a spike in
    channel 0 at step a and one in channel 1 at step b != a; the label is
    whether a comes before b (balanced: chance 0.5)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=0.1, size=(n, steps, 2)).astype(np.float32)
    a = rng.integers(0, steps, size=n)
    b = rng.integers(0, steps - 1, size=n)
    b = np.where(b >= a, b + 1, b)
    x[np.arange(n), a, 0] += 1.0
    x[np.arange(n), b, 1] += 1.0
    return x, (a < b).astype(np.int64)


def causal_conv():
    """A causal, dilated Conv1D stack (a WaveNet-like receptive field over
    all 24 steps) and the global max over the steps."""
    inp = keras.Input((24, 2))
    x = inp
    for d in (1, 2, 4, 8):
        x = layers.Conv1D(16, 3, padding="causal", dilation_rate=d, activation="relu")(x)
    x = layers.GlobalMaxPooling1D()(x)
    return keras.Model(inp, layers.Dense(2)(x), name="causal_conv"), (24, 2), 2


def sequence_layers():
    """The other sequence layers of issue 40 in one model: a Dense on each
    step, LayerNormalization (over the last axis and over two), EinsumDense
    in MultiHeadAttention's two forms, Permute, a Softmax over the steps,
    strided Conv1D "same" with the 1-D poolings, RepeatVector. (No Dropout:
    its masks are not Keras's, so no step check could hold.)"""
    inp = keras.Input((24, 2))
    x = layers.Dense(16, activation="tanh")(inp)
    x = layers.LayerNormalization()(x)
    h = layers.EinsumDense("abc,cde->abde", output_shape=(24, 2, 8), bias_axes="de",
                           activation="tanh")(x)
    x = layers.Add()([x, layers.EinsumDense("abcd,cde->abe", output_shape=(24, 16),
                                            bias_axes="e")(h)])
    x = layers.LayerNormalization(axis=[-2, -1], center=False)(x)
    w = layers.Permute((2, 1))(layers.Dense(4, use_bias=False)(x))  # a bias: no gradient
    w = layers.Permute((2, 1))(layers.Softmax(axis=-1)(w))  # over the steps
    x = layers.Concatenate()([x, w])
    x = layers.Conv1D(16, 3, strides=2, padding="same", activation="relu")(x)
    m = layers.GlobalMaxPooling1D()(layers.MaxPooling1D(2)(x))
    a = layers.GlobalAveragePooling1D()(layers.AveragePooling1D(3, strides=1)(x))
    r = layers.Flatten()(layers.Dense(4, activation="tanh")(layers.RepeatVector(3)(a)))
    x = layers.Concatenate()([m, a, r])
    return keras.Model(inp, layers.Dense(2)(x), name="sequence_layers"), (24, 2), 2


def token_order_data(n, seed, steps=16, vocab=20):
    """The order task over tokens: a marker token 1 at step a and 2 at step
    b != a among random tokens 3..vocab-1; the label is whether a < b. With
    the steps' positions (0..steps-1) as a second input of ids, for the
    position embedding."""
    rng = np.random.default_rng(seed)
    x = rng.integers(3, vocab, size=(n, steps))
    a = rng.integers(0, steps, size=n)
    b = rng.integers(0, steps - 1, size=n)
    b = np.where(b >= a, b + 1, b)
    x[np.arange(n), a] = 1
    x[np.arange(n), b] = 2
    positions = np.tile(np.arange(steps), (n, 1))
    return ({"tokens": x.astype(np.int32), "positions": positions.astype(np.int32)},
            (a < b).astype(np.int64))


def transformer():
    """Issue 40's small Transformer encoder classifier: token and position
    embeddings added, two encoder blocks (MultiHeadAttention, residual Add,
    LayerNormalization, a gelu feed-forward, Add, LayerNormalization), the
    mean over the steps."""
    steps, vocab, d = 16, 20, 32
    tokens = keras.Input((steps,), dtype="int32", name="tokens")
    positions = keras.Input((steps,), dtype="int32", name="positions")
    x = layers.Add()([layers.Embedding(vocab, d)(tokens), layers.Embedding(steps, d)(positions)])
    for _ in range(2):
        a = layers.MultiHeadAttention(num_heads=2, key_dim=16)(x, x)
        x = layers.LayerNormalization()(layers.Add()([x, a]))
        f = layers.Dense(d)(layers.Dense(64, activation="gelu")(x))
        x = layers.LayerNormalization()(layers.Add()([x, f]))
    x = layers.GlobalAveragePooling1D()(x)
    return (keras.Model([tokens, positions], layers.Dense(2)(x), name="transformer"),
            {"tokens": Ids(steps, vocab), "positions": Ids(steps, steps)}, 2)


def causal_attention():
    """Causal self-attention over a float sequence (use_causal_mask=True),
    and cross-attention of it over its own first half through a mask input
    to an output_shape of its own. (value_dim is key_dim's: with no dropout,
    Keras 3.15 on JAX runs jax.nn.dot_product_attention, which refuses
    another.)"""
    x_in = keras.Input((12, 4), name="x")
    mask = keras.Input((12, 6), name="mask")
    h = layers.Dense(8, activation="tanh")(x_in)
    a = layers.MultiHeadAttention(num_heads=2, key_dim=4)(h, h, use_causal_mask=True)
    h = layers.LayerNormalization()(layers.Add()([h, a]))
    first = layers.Dense(5)(layers.Reshape((6, 16))(h))  # (6, 5): half the steps
    c = layers.MultiHeadAttention(num_heads=3, key_dim=2, output_shape=6)(
        h, first, attention_mask=mask)
    x = layers.GlobalMaxPooling1D()(c)
    return (keras.Model([x_in, mask], layers.Dense(2)(x), name="causal_attention"),
            {"x": (12, 4), "mask": (12, 6)}, 2)


def attention_data(n, seed):
    """causal_attention's data: the order task's spikes, and a mask that lets
    query t attend to the first half's steps up to t // 2 (never none)."""
    x, y = order_data(n, seed, steps=12)
    x = np.concatenate([x, np.zeros((n, 12, 2), np.float32)], axis=2)
    mask = (np.arange(6)[None, :] <= np.arange(12)[:, None] // 2).astype(np.float32)
    return {"x": x, "mask": np.broadcast_to(mask, (n, 12, 6)).copy()}, y


def lstm():
    """An LSTM classifier over tokens (the order task's markers among random
    tokens), two LSTMs, the first returning its sequence and its state,
    whose h the head takes beside the second's output."""
    tokens = keras.Input((16,), dtype="int32", name="tokens")
    x = layers.Embedding(20, 16)(tokens)
    x, h, _ = layers.LSTM(24, return_sequences=True, return_state=True)(x)
    x = layers.Concatenate()([layers.LSTM(24)(x), h])
    return keras.Model(tokens, layers.Dense(2)(x), name="lstm"), Ids(16, 20), 2


def bilstm():
    """A Bidirectional LSTM over a float sequence (the spikes' order task),
    a SimpleRNN over its sequence, and an LSTM going backwards."""
    inp = keras.Input((24, 2))
    x = layers.Bidirectional(layers.LSTM(12, return_sequences=True))(inp)
    x = layers.SimpleRNN(12, return_sequences=True)(x)
    x = layers.LSTM(12, go_backwards=True)(x)
    return keras.Model(inp, layers.Dense(2)(x), name="bilstm"), (24, 2), 2


def bigru():
    """Issue 40's bidirectional GRU regressor over a time series: how far
    apart the two spikes are, (b - a) / 24, from a Bidirectional GRU's
    sequence and a GRU over it (reset_after=False), of a length the data
    fixes."""
    inp = keras.Input((None, 2))  # the length from the data
    x = layers.Bidirectional(layers.GRU(12, return_sequences=True))(inp)
    x = layers.GRU(8, reset_after=False)(x)  # the original GRU (TF1's default)
    return keras.Model(inp, layers.Dense(1)(x), name="bigru"), (24, 2), 0


def masked_order_data(n, seed, steps=16, vocab=20):
    """The order task over tokens of varying length (6 to 16), 0-padded at
    the end: the markers 1 and 2 among the first `length` steps."""
    rng = np.random.default_rng(seed)
    x = rng.integers(3, vocab, size=(n, steps))
    length = rng.integers(6, steps + 1, size=n)
    a = (rng.random(n) * length).astype(np.int64)
    b = (rng.random(n) * (length - 1)).astype(np.int64)
    b = np.where(b >= a, b + 1, b)
    x[np.arange(n), a] = 1
    x[np.arange(n), b] = 2
    x[np.arange(steps)[None, :] >= length[:, None]] = 0
    return x.astype(np.int32), (a < b).astype(np.int64)


def masked_lstm():
    """Issue 40's LSTM classifier with a mask: Embedding(mask_zero=True) over
    0-padded tokens of a length the data fixes (keras.Input((None,))), an LSTM returning its sequence and one that does not
    (each keeping its state over the padding), the mask through a Dense."""
    tokens = keras.Input((None,), dtype="int32", name="tokens")  # the length from the data
    x = layers.Embedding(20, 16, mask_zero=True)(tokens)
    x = layers.LSTM(24, return_sequences=True)(x)
    x = layers.Dense(24, activation="tanh")(x)
    x = layers.LSTM(24)(x)
    return keras.Model(tokens, layers.Dense(2)(x), name="masked_lstm"), Ids(16, 20), 2


def masked_attention():
    """Two blocks of causal self-attention over 0-padded tokens (no
    positions: the causal mask gives the order): the Embedding's mask as the
    first attention's query's and value's; Keras's runtime then clears the
    masks of the tensors an attention took, so the residual Add's is none and
    the second attention unmasked (Handle::runtime_mask), while the mean
    over the kept steps takes the mask Keras's saved graph records for it."""
    tokens = keras.Input((16,), dtype="int32", name="tokens")
    x = layers.Embedding(20, 16, mask_zero=True)(tokens)
    for _ in range(2):  # Keras's runtime: the second block's attention is unmasked
        a = layers.MultiHeadAttention(num_heads=2, key_dim=8)(x, x, use_causal_mask=True)
        x = layers.LayerNormalization()(layers.Add()([x, a]))
    x = layers.GlobalAveragePooling1D()(x)
    return keras.Model(tokens, layers.Dense(2)(x), name="masked_attention"), Ids(16, 20), 2


def spike_distance(n, seed):
    x, _ = order_data(n, seed)
    a = np.argmax(x[:, :, 0], axis=1)
    b = np.argmax(x[:, :, 1], axis=1)
    return x, ((b - a) / 24.0).astype(np.float32)[:, None]


def tokens_only(n, seed):
    x, y = token_order_data(n, seed)
    return x["tokens"], y


# Sequence models whose data is order_data, and their cluster run: more
# steps than the graph models' 30, and validation accuracy >= 0.9.
# (sequence_layers, a check of each layer's step against Keras's, trains on
# the graph models' class templates: neither it nor Keras's own fit learns
# the order task in 160 steps.)
ORDER_MODELS = {"causal_conv", "transformer", "causal_attention", "lstm", "bilstm", "bigru",
                "masked_lstm", "masked_attention"}
ORDER_DATA = {"causal_conv": order_data, "transformer": token_order_data,
              "causal_attention": attention_data, "lstm": tokens_only, "bilstm": order_data,
              "bigru": spike_distance, "masked_lstm": masked_order_data,
              "masked_attention": masked_order_data}
# The cluster run's optimizer where momentum SGD does not learn the task in
# its steps (Keras's own fit: the attention and LSTM models need Adam, 0.9 to
# 0.98 after 80 to 120 steps; with momentum they stall near 0.5).
CLUSTER_OPTIMIZER = {"transformer": "adam", "causal_attention": "adam", "lstm": "adam",
                     "bilstm": "adam", "bigru": "adam", "masked_lstm": "adam",
                     "masked_attention": "adam"}


def compile_model(model, metrics=False):
    loss = LOSS_OVERRIDE or LOSSES.get(
        MODEL, lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    extra = METRICS.get(MODEL, lambda: [])() if metrics else []
    accuracy = [] if MODEL in ("regression", "mf", "bigru") else ["accuracy"]
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss=loss(),
                  metrics=(accuracy + extra) if metrics else None)


def regression_data(shape, n, seed):
    # Learnable: two smooth functions of the features, plus a little noise.
    t = np.random.default_rng(0)
    w1 = t.normal(size=(shape[0], 6)) / np.sqrt(shape[0])
    w2 = t.normal(size=(6, 2))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n,) + shape)
    y = np.tanh(x @ w1) @ w2 + rng.normal(scale=0.05, size=(n, 2))
    return x.astype(np.float32), y.astype(np.float32)


def arrays(prefix, x):
    """The .npz arrays of examples x: one, or "<prefix>/<input>" for each
    input of a model of several (x a dict)."""
    if isinstance(x, dict):
        return {f"{prefix}/{name}": v for name, v in x.items()}
    return {prefix: x}


def head(x, n):
    return {k: v[:n] for k, v in x.items()} if isinstance(x, dict) else x[:n]


def data(shape, classes, n, seed):
    if MODEL in ORDER_MODELS:
        return ORDER_DATA[MODEL](n, seed)
    if classes == 0 and isinstance(shape, dict) and all(isinstance(s, Ids) for s in shape.values()):
        # Ratings: the dot of hidden factors of each input's id, plus noise.
        t = np.random.default_rng(0)
        factors = {name: t.normal(size=(s.vocab, 2)) for name, s in shape.items()}
        rng = np.random.default_rng(seed)
        xs = {name: rng.integers(0, s.vocab, size=(n,) + tuple(s)).astype(np.int32)
              for name, s in shape.items()}
        (a, fa), (b, fb) = [(xs[name][:, 0], factors[name]) for name in shape]
        y = np.sum(fa[a] * fb[b], axis=1, keepdims=True) + rng.normal(scale=0.05, size=(n, 1))
        return xs, y.astype(np.float32)
    if isinstance(shape, dict):  # several inputs: each learnable on its own
        xs, y = {}, None
        for i, (name, s) in enumerate(shape.items()):
            xs[name], y = data(s, classes, n, seed)  # the same labels for each seed
        return xs, y
    if classes == 0:
        return regression_data(shape, n, seed)
    if isinstance(shape, Ids):
        # Learnable: class c draws its ids mostly from its own band of the
        # vocabulary (a band of vocab / classes ids), now and then any.
        rng = np.random.default_rng(seed)
        y = rng.integers(0, classes, size=n)
        band = shape.vocab // classes
        own = y[:, None] * band + rng.integers(0, band, size=(n,) + tuple(shape))
        anywhere = rng.integers(0, shape.vocab, size=(n,) + tuple(shape))
        x = np.where(rng.random((n,) + tuple(shape)) < 0.8, own, anywhere)
        return x.astype(np.int32), y.astype(np.int64)
    # Learnable: each class is a fixed random template, plus noise.
    t = np.random.default_rng(0)
    templates = t.normal(size=(classes,) + shape)
    # A per-class offset of each channel too, which global pooling keeps.
    templates += t.normal(size=(classes,) + (1,) * (len(shape) - 1) + (shape[-1],))
    templates = templates.astype(np.float32)
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, size=n)
    x = templates[y] + rng.normal(scale=0.7, size=(n,) + shape).astype(np.float32)
    return x.astype(np.float32), y.astype(np.int64)


def step_check(model, shape, classes, conv="direct", checked=True):
    compile_model(model)
    path = os.path.join(WORK, "step.keras")
    model.save(path)
    x, y = data(shape, classes, 32, 4)
    if os.environ.get("PSC_DEBUG_STEP"):
        print("frozen layers:", [l.name for l in model.layers if not l.trainable])
    xv, yv = data(shape, classes, 32, 5)
    npz = os.path.join(WORK, "step.npz")
    np.savez(npz, y_train=y, y_val=yv, **arrays("x_train", x), **arrays("x_val", xv))
    after = os.path.join(WORK, "after.keras")
    result = os.path.join(WORK, "step.json")
    run([BIN + "/worker", "--standalone", "--model=" + path, "--data=" + npz, "--nostandardize",
         "--batch_size=32", "--epochs=1", "--steps_per_epoch=1", "--intra_op_threads=1",
         "--conv_algorithm=" + conv, "--export=" + after, "--metrics_out=" + result])
    k = keras.models.load_model(path)
    before = [np.array(w) for w in k.get_weights()]
    loss = float(k.train_on_batch(x, y))
    ours_loss = json.load(open(result))["epochs"][0]["loss"]
    if checked:
      check(f"{MODEL}: one SGD step's loss is Keras's train_on_batch (within 1e-5)",
            abs(ours_loss - loss) <= 1e-5 * abs(loss), f"{ours_loss} vs {loss}")
    ours = keras.models.load_model(after).get_weights()
    want = k.get_weights()
    names = [v.path for v in k.weights]
    frozen = {w.path for layer in k.layers if not layer.trainable for w in layer.weights}
    worst_delta, worst_weight, unmoved, moved_frozen = 0.0, 0.0, [], []
    worst_name = ""
    # A variable whose true gradient is 0 (MultiHeadAttention's key bias,
    # which adds one constant to a softmax's row; a bias before a softmax
    # over the steps) changes by float noise only, in Keras as here: below
    # 1e-5 of the step's largest change and not within 1e-3 of Keras's, it
    # is checked against that floor, not relative to the noise.
    largest = max((float(np.max(np.abs(kw - w0))) for name, w0, kw in zip(names, before, want)
                   if name not in frozen and w0.size), default=0.0)
    floor = 1e-5 * largest
    noise, noisy = [], []
    for name, w0, o, kw in zip(names, before, ours, want):
        d_ours, d_keras = o - w0, kw - w0
        if name in frozen:  # frozen: exactly unchanged, here as in Keras
            if np.any(o != w0) or np.any(kw != w0):
                moved_frozen.append(name)
            continue
        scale = float(np.max(np.abs(d_keras)))
        if scale == 0:
            unmoved.append(name)
            continue
        delta = float(np.max(np.abs(d_ours - d_keras))) / scale
        if scale < floor and delta > 1e-3:
            noise.append(name)
            if float(np.max(np.abs(d_ours))) >= floor:
                noisy.append(name)
            continue
        if os.environ.get("PSC_DEBUG_STEP"):
            print(f"  {name} {tuple(w0.shape)}: change within {delta:.1e} of Keras's")
        if delta > worst_delta:
            worst_delta, worst_name = delta, name
        # A variable that starts at zero (a bias, a BatchNormalization's
        # beta) is its change: the change check above holds it, to 1e-3 of
        # it. Its sum over the batch and every position cancels, so the
        # order of float32's roundings shows (up to 7e-4 of it on an AVX2
        # CPU, whose direct kernels sum in another order than AVX-512's).
        if np.any(w0 != 0):
            worst_weight = max(worst_weight,
                               float(np.max(np.abs(o - kw)) / max(float(np.max(np.abs(kw))), 1e-30)))
    if not checked:
        print(f"info  {MODEL}: with --conv_algorithm={conv}, the worst variable's change is "
              f"{worst_delta:.1e} of Keras's, the worst weight {worst_weight:.1e} relative",
              flush=True)
        return
    check(f"{MODEL}: {len(names) - len(frozen)} variables, each moved by Keras's step ({conv} "
          "convolutions)", len(ours) == len(want) and not unmoved, f"unmoved: {unmoved}")
    if noise:
        check(f"{MODEL}: the {len(noise)} variables Keras's step moves by float noise only (below "
              f"1e-5 of its largest change: {', '.join(noise)}) move by less here too",
              not noisy, f"moved: {noisy}")
    if frozen:
        check(f"{MODEL}: the {len(frozen)} frozen variables are exactly unchanged, as in Keras",
              not moved_frozen, f"moved: {moved_frozen}")
    check(f"{MODEL}: each variable's change is Keras's within 1e-3 of it (worst {worst_delta:.1e})",
          worst_delta <= 1e-3, f"worst: {worst_name}")
    # 1e-4: the change check's 1e-3 where a step moves a weight by up to a
    # tenth of its largest (an AVX2 CPU's direct kernels: 2.3e-5; AVX-512's
    # below 1e-5).
    check(f"{MODEL}: the updated weights (of the variables not starting at zero) are Keras's "
          f"within 1e-4 relative (worst {worst_weight:.1e})", worst_weight <= 1e-4)


def cluster_run(model, shape, classes):
    compile_model(model, metrics=True)  # its optimizer is replaced by the flags below
    path = os.path.join(WORK, "cluster.keras")
    model.save(path)
    order = MODEL in ORDER_MODELS
    epochs, steps = (4, 40) if order else (3, 10)
    x, y = data(shape, classes, epochs * steps * 64 if order else 1280, 1)
    xv, yv = data(shape, classes, 512 if order else 256, 2)
    npz = os.path.join(WORK, "cluster.npz")
    np.savez(npz, y_train=y, y_val=yv, y_test=yv[:64], **arrays("x_train", x),
             **arrays("x_val", xv), **arrays("x_test", head(xv, 64)))
    trained = os.path.join(WORK, "trained.keras")
    result = os.path.join(WORK, "cluster.json")
    start = time.monotonic()
    run([BIN + "/pscluster", "launch", "--ps=1", "--workers=2", "--", "--model=" + path,
         "--data=" + npz, "--nostandardize", "--mode=sync", "--batch_size=64", f"--epochs={epochs}",
         f"--steps_per_epoch={steps}", f"--optimizer={CLUSTER_OPTIMIZER.get(MODEL, 'momentum')}",
         f"--learning_rate={CLUSTER_LEARNING_RATE.get(MODEL, 0.02)}",
         "--intra_op_threads=1", "--eval_threads=1", "--export=" + trained,
         "--metrics_out=" + result])
    took = time.monotonic() - start
    r = json.load(open(result))
    first, last = r["epochs"][0]["loss"], r["epochs"][-1]["loss"]
    accuracy = r["epochs"][-1].get("val_accuracy")
    check(f"{MODEL}: a sync cluster run (2 workers, {epochs * steps} steps) in {took:.0f} s "
          "(<= 60)", took <= 60)
    check(f"{MODEL}: it learns: last epoch's loss {last:.3f} <= 0.7 x the first 10 steps' "
          f"{first:.3f}", last <= 0.7 * first)
    if classes == 0:
        # A regression has no accuracy; it beats predicting the mean.
        variance = float(np.mean(np.var(yv, axis=0)))
        val_loss = r["epochs"][-1]["val_loss"]
        check(f"{MODEL}: no accuracy is reported ({accuracy}, test {r['test_accuracy']})",
              accuracy is None and r["test_accuracy"] is None)
        check(f"{MODEL}: validation mse {val_loss:.3f} <= 0.5 x the targets' variance "
              f"{variance:.3f}", val_loss <= 0.5 * variance)
    else:
        want = 0.9 if order else 1 / classes + 0.2
        check(f"{MODEL}: validation accuracy {accuracy:.2f} >= {want:.2f} (chance "
              f"{1 / classes:.2f})", accuracy >= want)
    for m in METRICS.get(MODEL, lambda: [])():
        name = m if isinstance(m, str) else m.name
        value = r["epochs"][-1].get("val_" + name)
        bounded = classes == 0 or (value is not None and value <= 1 + 1e-9)
        check(f"{MODEL}: the compiled metric val_{name} is reported ({value})",
              value is not None and value >= -1e-9 and bounded)
    if classes == 0:
        # Keras's evaluate on the export gives the test split's mae as ours.
        m = keras.models.load_model(trained)
        keras_mae = float(np.mean(np.abs(m.predict(head(xv, 64), verbose=0) - yv[:64])))
        ours_mae = r["test_metrics"].get("mae")
        check(f"{MODEL}: the test split's mae {ours_mae} is Keras's on the export "
              f"({keras_mae:.6f}, within 1e-5)",
              ours_mae is not None and abs(ours_mae - keras_mae) <= 1e-5 * max(1, keras_mae))
    m = keras.models.load_model(trained)
    frozen = [layer.name for layer in model.layers if not layer.trainable]
    if frozen:
        same = all(np.array_equal(a, b) for name in frozen
                   for a, b in zip(model.get_layer(name).get_weights(),
                                   m.get_layer(name).get_weights()))
        check(f"{MODEL}: the servers kept the frozen layers' variables bit for bit ({frozen})",
              same)
    want = m.predict(head(xv, 64), verbose=0)
    pred = os.path.join(WORK, "pred.npy")
    run([BIN + "/pscluster", "predict", "--model=" + trained, "--data=" + npz, "--x=x_test",
         "--out=" + pred])
    got = np.load(pred)
    diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else None
    check(f"{MODEL}: Keras predicts on the export what pscluster does (within 1e-4; {diff})",
          diff is not None and diff <= 1e-4, f"shapes {got.shape} {want.shape}")
    if any(d is None for i in model.inputs for d in i.shape[1:]):
        # An open length (keras.Input((None, ...))): the job ran the data's,
        # and its export declares it; `pscluster predict` fixes it from its
        # data too, on the trained weights in the open model.
        declared = [tuple(i.shape[1:]) for i in m.inputs]
        check(f"{MODEL}: the export declares the data's length {declared}",
              all(None not in d for d in declared))
        model.set_weights(m.get_weights())
        opened = os.path.join(WORK, "open.keras")
        model.save(opened)
        run([BIN + "/pscluster", "predict", "--model=" + opened, "--data=" + npz, "--x=x_test",
             "--out=" + pred])
        got = np.load(pred)
        diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else None
        check(f"{MODEL}: pscluster predict on the open model fixes the length from its data "
              f"and predicts Keras's (within 1e-4; {diff})", diff is not None and diff <= 1e-4)


def rows_check(model, shape, classes):
    """Issue 38's row-sparse exchange: the same sync job (2 ps, 2 workers)
    with the tables' rows pulled and pushed, and with the tables whole
    (--dense_embeddings), ends in the same variables, bit for bit: under
    Adagrad, whose update of the rows pushed is its whole update, and under
    Adam, whose update moves every row (the servers apply it densely)."""
    compile_model(model)
    path = os.path.join(WORK, "rows.keras")
    model.save(path)
    x, y = data(shape, classes, 1280, 1)
    xv, yv = data(shape, classes, 256, 2)
    npz = os.path.join(WORK, "rows.npz")
    np.savez(npz, y_train=y, y_val=yv, **arrays("x_train", x), **arrays("x_val", xv))
    for optimizer in ("adagrad", "adam"):
        sha = {}
        for name, extra in (("rows", []), ("whole", ["--dense_embeddings"])):
            result = os.path.join(WORK, f"rows-{optimizer}-{name}.json")
            run([BIN + "/pscluster", "launch", "--ps=2", "--workers=2", "--", "--model=" + path,
                 "--data=" + npz, "--nostandardize", "--mode=sync", "--batch_size=64",
                 "--epochs=1", "--steps_per_epoch=10", "--optimizer=" + optimizer,
                 "--learning_rate=0.05", "--intra_op_threads=1", "--eval_threads=1",
                 "--metrics_out=" + result] + extra)
            sha[name] = json.load(open(result))["final_variables_sha256"]
        check(f"{MODEL}: {optimizer}: the tables' rows pulled and pushed train bit for bit as the "
              "tables whole (--dense_embeddings)", sha["rows"] == sha["whole"], str(sha))


def embedding_steps_check():
    """Issue 38, item 8: 3 consecutive steps of `worker --standalone` against
    Keras's train_on_batch, whose batches touch different ids, under SGD,
    Adagrad and Adam (Keras's semantics: every row's moments decay each
    step). After each step every variable's change is Keras's within 1e-3
    of it; a row touched only in step 1 stays put in steps 2-3 under SGD and
    Adagrad and keeps moving under Adam, in Keras and here alike."""
    model, shape, classes = embeddings()
    x, y = data(shape, classes, 96, 4)
    npz = os.path.join(WORK, "emb-steps.npz")
    np.savez(npz, y_train=y, y_val=y[:32], **arrays("x_train", x), **arrays("x_val", head(x, 32)))
    users = x["user"][:, 0]
    only_first = sorted(set(users[:32]) - set(users[32:]))
    optimizers = {"sgd": lambda: keras.optimizers.SGD(0.1),
                  "adagrad": lambda: keras.optimizers.Adagrad(0.1),
                  "adam": lambda: keras.optimizers.Adam(0.01)}
    for name, make in optimizers.items():
        keras.utils.set_random_seed(5)
        model, _, _ = embeddings()
        model.compile(optimizer=make(),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        path = os.path.join(WORK, f"emb-steps-{name}.keras")
        model.save(path)
        k = keras.models.load_model(path)
        before = [np.array(w) for w in k.get_weights()]
        table = [i for i, v in enumerate(k.weights) if v.path.endswith("user_emb/embeddings")][0]
        worst, rows = 0.0, {}
        for steps in (1, 2, 3):
            batch = slice((steps - 1) * 32, steps * 32)
            k.train_on_batch({n: v[batch] for n, v in x.items()}, y[batch])
            after = os.path.join(WORK, f"emb-steps-{name}-{steps}.keras")
            run([BIN + "/worker", "--standalone", "--model=" + path, "--data=" + npz,
                 "--nostandardize", "--noshuffle", "--batch_size=32", "--epochs=1",
                 f"--steps_per_epoch={steps}", "--intra_op_threads=1", "--export=" + after])
            ours = keras.models.load_model(after).get_weights()
            for w0, o, kw in zip(before, ours, k.get_weights()):
                scale = float(np.max(np.abs(kw - w0)))
                if scale > 0:
                    worst = max(worst, float(np.max(np.abs((o - w0) - (kw - w0)))) / scale)
            rows[steps] = (ours[table][only_first], k.get_weights()[table][only_first])
        check(f"embeddings: {name}, 3 steps touching different ids: each variable's change is "
              f"Keras's within 1e-3 of it after each step (worst {worst:.1e})", worst <= 1e-3)
        keras_moved = bool(np.any(rows[3][1] != rows[1][1]))
        ours_moved = bool(np.any(rows[3][0] != rows[1][0]))
        want = name == "adam"
        check(f"embeddings: {name}: the {len(only_first)} rows touched only in step 1 "
              f"{'keep moving' if want else 'stay put'} in steps 2-3, in Keras and here",
              len(only_first) > 0 and keras_moved == want and ours_moved == want,
              f"Keras moved {keras_moved}, ours {ours_moved}")
        if name != "adam":
            continue
        # On a cluster the table travels by rows: Keras's Adam there too, and
        # --lazy_adam (only the rows pushed move), which differs from Keras.
        for lazy in (False, True):
            out = os.path.join(WORK, f"emb-steps-cluster-{lazy}.keras")
            run([BIN + "/pscluster", "launch", "--ps=1", "--workers=1", "--", "--model=" + path,
                 "--data=" + npz, "--nostandardize", "--noshuffle", "--mode=sync",
                 "--batch_size=32", "--epochs=1", "--steps_per_epoch=3", "--intra_op_threads=1",
                 "--eval_threads=1", "--export=" + out] + (["--lazy_adam"] if lazy else []))
            got = keras.models.load_model(out).get_weights()[table][only_first]
            first, third = rows[1][1], rows[3][1]
            if lazy:
                check("embeddings: adam --lazy_adam on a cluster: the rows touched only in step 1 "
                      "stay where step 1 left them, unlike Keras's",
                      np.allclose(got, first, rtol=1e-4, atol=1e-6) and
                      not np.allclose(got, third, rtol=1e-4, atol=1e-6))
            else:
                check("embeddings: adam on a cluster (rows pulled and pushed): the rows touched "
                      "only in step 1 are where Keras's 3 steps leave them",
                      np.allclose(got, third, rtol=1e-4, atol=1e-6))


def fit_check(model, shape, classes):
    """pscluster.fit as Keras users call it: x as a list (the model's input
    order) and validation x as a dict for a model of several inputs; a
    regression's History without an accuracy."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    import pscluster
    compile_model(model, metrics=True)
    x, y = data(shape, classes, 512, 11)
    xv, yv = data(shape, classes, 128, 12)
    train_x = [x[n] for n in ("features", "image")] if isinstance(x, dict) else x
    history = pscluster.fit(model, train_x, y, validation_data=(xv, yv), epochs=2, batch_size=64,
                            workers=2, ps=1, optimizer="momentum", learning_rate=0.02,
                            bin_dir=BIN, flags=["--intra_op_threads=1", "--eval_threads=1"],
                            verbose=0)
    keys = sorted(history.history)
    want = (["loss", "mae", "root_mean_squared_error", "val_loss", "val_mae",
             "val_root_mean_squared_error"] if classes == 0
            else ["accuracy", "loss", "val_accuracy", "val_loss"])
    check(f"{MODEL}: pscluster.fit trains it and returns Keras's History keys ({keys})",
          keys == want and len(history.history["val_loss"]) == 2, f"want {want}")
    if isinstance(x, dict):
        try:
            pscluster.fit(model, [x["image"]], y, validation_data=(xv, yv), bin_dir=BIN,
                          verbose=0)
            check(f"{MODEL}: one array for two inputs raises PsclusterError", False, "no error")
        except pscluster.PsclusterError as e:
            check(f"{MODEL}: one array for two inputs raises PsclusterError naming them ({e})",
                  "features, image" in str(e), str(e))


def optimizer_check():
    """RMSprop (momentum, centered), Adagrad, AdamW and Ftrl, each with weight
    decay, clipvalue and clipnorm (small enough to clip), and the schedules PiecewiseConstantDecay, CosineDecay (with
    warmup) and ExponentialDecay, whose rates differ at each step, over 3
    consecutive steps: after each, every variable's change
    from the start is Keras's train_on_batch's within 1e-3 of it. Then a
    1-worker sync cluster of 3 steps exports its optimizer's slots, which
    must be Keras's optimizer variables after the same 3 steps, in Keras's
    order (RMSprop's are slot by slot, Adam's variable by variable)."""
    schedules = keras.optimizers.schedules
    optimizers = {
        "rmsprop": lambda: keras.optimizers.RMSprop(learning_rate=0.01, rho=0.8, momentum=0.5,
                                                    centered=True, weight_decay=0.05),
        # A rate that differs at each of the 3 steps: 0.05 at step 0, 0.02
        # at step 1, 0.01 after (PiecewiseConstantDecay: step <= 0, <= 1, > 1).
        "adagrad_piecewise": lambda: keras.optimizers.Adagrad(
            learning_rate=schedules.PiecewiseConstantDecay([0, 1], [0.05, 0.02, 0.01]),
            weight_decay=0.05, initial_accumulator_value=0.2, clipvalue=0.02),
        # Warmup from 0.005 to 0.02 over 1 step, then a cosine decay; the
        # global norm clipped (Adam's step hardly shows a scale: the SGD
        # below is where the clip is seen).
        "adamw_cosine": lambda: keras.optimizers.AdamW(
            learning_rate=schedules.CosineDecay(0.005, decay_steps=4, alpha=0.1,
                                                warmup_target=0.02, warmup_steps=1),
            weight_decay=0.1, global_clipnorm=0.05),
        "momentum_global_clipnorm": lambda: keras.optimizers.SGD(
            learning_rate=0.1, momentum=0.5, weight_decay=0.05, global_clipnorm=0.05),
        "momentum_exponential": lambda: keras.optimizers.SGD(
            learning_rate=schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5),
            momentum=0.9, nesterov=True, weight_decay=0.05, clipnorm=0.1),
        # The click-through classic, every term of its update on.
        "ftrl": lambda: keras.optimizers.Ftrl(
            learning_rate=0.1, learning_rate_power=-0.6, initial_accumulator_value=0.2,
            l1_regularization_strength=0.001, l2_regularization_strength=0.01,
            l2_shrinkage_regularization_strength=0.02, beta=0.3),
    }
    x, y = data((10,), 3, 96, 4)
    npz = os.path.join(WORK, "opt.npz")
    np.savez(npz, x_train=x, y_train=y, x_val=x[:32], y_val=y[:32])

    def build():
        keras.utils.set_random_seed(3)
        inp = keras.Input((10,))
        h = layers.Dense(12, activation="tanh")(inp)
        h = layers.BatchNormalization(momentum=0.9)(h)
        return keras.Model(inp, layers.Dense(3)(h))

    for name, make in optimizers.items():
        model = build()
        model.compile(optimizer=make(),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        path = os.path.join(WORK, f"opt-{name}.keras")
        model.save(path)
        k = keras.models.load_model(path)
        before = [np.array(w) for w in k.get_weights()]
        trainable = {v.path for v in k.trainable_weights}
        paths = [v.path for v in k.weights]
        worst = 0.0
        for steps in (1, 2, 3):
            k.train_on_batch(x[(steps - 1) * 32:steps * 32], y[(steps - 1) * 32:steps * 32])
            after = os.path.join(WORK, f"opt-{name}-{steps}.keras")
            run([BIN + "/worker", "--standalone", "--model=" + path, "--data=" + npz,
                 "--nostandardize", "--noshuffle", "--batch_size=32", "--epochs=1",
                 f"--steps_per_epoch={steps}", "--intra_op_threads=1", "--export=" + after])
            ours = keras.models.load_model(after).get_weights()
            for p, w0, o, kw in zip(paths, before, ours, k.get_weights()):
                if p not in trainable:
                    continue
                scale = float(np.max(np.abs(kw - w0)))
                worst = max(worst, float(np.max(np.abs((o - w0) - (kw - w0)))) / scale)
        check(f"optimizers: {name}, 3 steps: each variable's change is Keras's within 1e-3 of it "
              f"after each step (worst {worst:.1e})", worst <= 1e-3)
        if name == "momentum_global_clipnorm":
            # The clip is on: without it Keras's first step is another.
            plain = build()
            plain.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.5,
                                                         weight_decay=0.05),
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            plain.set_weights(before)
            plain.train_on_batch(x[:32], y[:32])
            clipped = build()
            clipped.compile(optimizer=make(),
                            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            clipped.set_weights(before)
            clipped.train_on_batch(x[:32], y[:32])
            ratio = max(float(np.max(np.abs(c - w0))) / float(np.max(np.abs(p - w0)))
                        for c, p, w0, v in zip(clipped.get_weights(), plain.get_weights(), before,
                                               paths) if v in trainable)
            check(f"optimizers: {name}: the clip is on (Keras's clipped change is {ratio:.2f} "
                  "of the unclipped one, < 0.9)", ratio < 0.9)
        # The cluster's export carries the optimizer's state in Keras's order.
        trained = os.path.join(WORK, f"opt-{name}-cluster.keras")
        run([BIN + "/pscluster", "launch", "--ps=2", "--workers=1", "--", "--model=" + path,
             "--data=" + npz, "--nostandardize", "--noshuffle", "--mode=sync", "--batch_size=32",
             "--epochs=1", "--steps_per_epoch=3", "--intra_op_threads=1", "--eval_threads=1",
             "--export=" + trained])
        m = keras.models.load_model(trained)
        # In order: the variables' paths name other layer instances here.
        theirs = [(v.path, np.array(v)) for v in k.optimizer.variables]
        mine = [np.array(v) for v in m.optimizer.variables]
        worst_slot, wrong = 0.0, []
        for (p, want), got in zip(theirs, mine):
            if got.shape != want.shape:
                wrong.append(f"{p} {got.shape} vs {want.shape}")
                continue
            worst_slot = max(worst_slot, float(np.max(np.abs(got - want))) /
                             max(float(np.max(np.abs(want))), 1e-30))
        check(f"optimizers: {name}: the cluster's export holds Keras's {len(theirs)} optimizer "
              f"variables after 3 steps, in its order (worst {worst_slot:.1e} relative)",
              len(mine) == len(theirs) and not wrong and worst_slot <= 1e-3,
              f"{len(mine)} variables; misshapen: {wrong}")


BUILDERS = {"resnet": resnet, "residual_mlp": residual_mlp, "activations": activations,
            "frozen_base": frozen_base, "merges": merges, "flatten_branches": flatten_branches,
            "binary": binary, "reshape": reshape, "regression": regression,
            "two_inputs": two_inputs, "padding": padding, "mobilenet": mobilenet,
            "transposed": transposed, "softmax_gates": softmax_gates, "embeddings": embeddings,
            "dlrm": dlrm, "mf": mf, "cosine": cosine, "causal_conv": causal_conv,
            "sequence_layers": sequence_layers, "transformer": transformer,
            "causal_attention": causal_attention, "lstm": lstm, "bilstm": bilstm,
            "bigru": bigru, "masked_lstm": masked_lstm, "masked_attention": masked_attention}
def main():
    global LOSS_OVERRIDE
    keras.utils.set_random_seed(7)
    if MODEL == "optimizers":
        optimizer_check()
        print(f"keras {keras.__version__}: {MODEL}: " +
              (f"{len(FAILED)} check(s) failed" if FAILED else "every check passed"))
        sys.exit(1 if FAILED else 0)
    model, shape, classes = BUILDERS[MODEL]()
    step_check(model, shape, classes)
    if MODEL == "regression":
        for LOSS_OVERRIDE in (keras.losses.MeanAbsoluteError, keras.losses.Huber):
            print(f"info  {MODEL}: the step under {LOSS_OVERRIDE.__name__}", flush=True)
            model, shape, classes = BUILDERS[MODEL]()
            step_check(model, shape, classes)
        LOSS_OVERRIDE = None
    model, shape, classes = BUILDERS[MODEL]()
    step_check(model, shape, classes, conv="auto", checked=False)
    model, shape, classes = BUILDERS[MODEL]()
    cluster_run(model, shape, classes)
    if MODEL in ("two_inputs", "regression"):
        model, shape, classes = BUILDERS[MODEL]()
        fit_check(model, shape, classes)
    if MODEL in ("embeddings", "dlrm", "mf"):
        model, shape, classes = BUILDERS[MODEL]()
        rows_check(model, shape, classes)
    if MODEL == "embeddings":
        embedding_steps_check()
    print(f"keras {keras.__version__}: {MODEL}: " +
          (f"{len(FAILED)} check(s) failed" if FAILED else "every check passed"))
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
