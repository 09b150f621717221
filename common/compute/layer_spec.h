// One layer of a model as the executor runs it: its kind and options, the
// initializers of its variables, and the tensors it takes. The Keras reader
// (common/keras/keras_config.h) makes them; LayerGraph (layer_graph.h) checks them and
// infers every tensor's shape.
#ifndef PSC_COMMON_COMPUTE_LAYER_SPEC_H_
#define PSC_COMMON_COMPUTE_LAYER_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/compute/backend.h"
#include "common/compute/dtype.h"
#include "common/tensor/initializer.h"

namespace psc {
namespace compute {

// How a variable's first values are drawn (common/tensor/initializer.h).
using Initializer = tensor::Initializer;

struct LayerSpec {
  // The merges, of two or more sources: kAdd (Keras's Add: the elementwise
  // sum), kMultiply (the product), kAverage (the sum over the count),
  // kSubtract (of exactly two: the first minus the second), all of one
  // shape; kConcat (Keras's Concatenate) along `axis`.
  enum Kind {
    kConv,
    kPool,
    kDense,
    kActivation,
    kGlobalPool,
    kDropout,
    kBatchNorm,
    kAdd,
    kMultiply,
    kAverage,
    kSubtract,
    kConcat,
    kMaximum,  // of two (the reader folds more into a chain, as Keras computes it)
    kMinimum,
    // Its source's values, row-major, with another shape: `target`, or
    // (features,) without one. A Reshape, or a Flatten whose output a layer
    // other than Dense takes (a Dense flattens its input itself).
    kFlatten,
    // One of a model's several inputs (keras.Input x N): the model's input
    // tensor holds every input's values of an example packed in the
    // model's input order (Model::inputs()); this takes its `target`-shaped
    // block from element `offset` on. Its source is the model's input.
    kInput,
    // Keras's ZeroPadding2D and Cropping2D of an (H, W, C) input by `pads`:
    // zeros added around it, or rows and columns taken off its edges.
    kZeroPad,
    kCrop,
    // Keras's UpSampling2D (interpolation "nearest"): each value of an
    // (H, W, C) input repeated over a `window.height` x `window.width`
    // block. Its window is that block as kernel and strides ("valid", C
    // groups): the layer is the data gradient of a depthwise convolution of
    // ones, and its gradient that convolution (the block's sum).
    kUpSample,
    // Keras's Conv2DTranspose of `inputs` to `outputs` channels over
    // `window` (dilated or not): the data gradient of the window's
    // convolution from the output's extent to the input's, with the kernel
    // [KH, KW, outputs, inputs] Keras holds; no bias or activation (a
    // kBiasAdd after it has them). The output's extent is
    // Window::Transposed*, or with Keras's output_padding (`pads`: rows,
    // columns) (in - 1) x stride + span - 2 x pad + output_padding, pad
    // span / 2 for "same" and 0 for "valid" (ConvTransposeExtent).
    kConvTranspose,
    // y = x + bias per channel of an (H, W, C) input, then `relu` or
    // `activation` (a Conv2DTranspose's bias, "<name>/bias"): a 1x1
    // depthwise convolution of ones with that bias, so every backend adds it
    // and sums its gradient.
    kBiasAdd,
    // Keras's Embedding of `inputs` rows (input_dim) of `outputs` values
    // (output_dim): each id of its source, a model input or a kInput layer
    // of ids (whole numbers held in float32, checked in range when the data
    // is read), replaced by its row of the table "<name>/embeddings"
    // [inputs, outputs], initialized by `kernel_init`. The output is the
    // input's shape and one more axis of `outputs`. No gradient goes to the
    // ids.
    kEmbedding,
    // Keras's Dot of its two sources, both (K,) or both rank 2, summed over
    // example axis `dot_axes[0]` of the first and `dot_axes[1]` of the
    // second (0 is the first after the batch): (K,)·(K,) is (1,); (M, K)
    // and (N, K) over (1, 1) are (M, N), Keras's batch_dot (DotGeometry).
    kDot,
    // Keras's LayerNormalization over the example's last `axis` axes (1:
    // the last; Keras's axis list, sorted, is those trailing axes), with
    // its epsilon: y = (x - mean) / sqrt(variance + epsilon) x gamma + beta
    // per example and step, gamma ("<name>/gamma", scale) and beta
    // ("<name>/beta", center) of those axes' shape.
    kLayerNorm,
    // Keras's Permute: output axis i is input axis perm[i] (0 the first
    // after the batch).
    kPermute,
    // Keras's RepeatVector: a (F,) input repeated `outputs` times, (outputs,
    // F).
    kRepeat,
    // y = `alpha` x (MultiHeadAttention's query scaled by 1 / sqrt(key_dim)).
    kScale,
    // MultiHeadAttention's mask on its scores (heads, T, S): -1e9 in place
    // of a score whose key may not be attended to, as Keras's masked
    // softmax writes it, the same for every head: a key after the query when
    // `causal`, and where a second source, a model input of (T, S), holds 0
    // (1 where attending is allowed; the data check refuses other values);
    // then, with `query_mask` and `value_mask`, the Keras masks of the
    // query (T,) and of the value (S,) as further sources, in that order
    // (query t attends to key s where both are kept).
    // y = x keep + (keep - 1) 1e9; dx = g keep. No gradient goes to the
    // masks.
    kMask,
    // Keras's LSTM of `outputs` units over a (steps, `inputs`) sequence, its
    // default activations (tanh, sigmoid gates i, f, c, o): its variables
    // "<name>/lstm_cell/kernel" [inputs, 4 outputs], ".../recurrent_kernel"
    // [outputs, 4 outputs] (`recurrent_init`), ".../bias" [4 outputs]; its
    // output every step's h (return_sequences) or the last, the steps taken
    // in reverse with go_backwards (the sequence then in that order).
    kLSTM,
    // Keras's GRU of `outputs` units, as kLSTM: its variables
    // "<name>/gru_cell/kernel" [inputs, 3 outputs], ".../recurrent_kernel"
    // [outputs, 3 outputs], ".../bias" [2, 3 outputs] (the input's bias,
    // then the recurrent one) with `reset_after` (Keras 3's default), else
    // [3 outputs] (the reset gate applied to h_prev before its product with
    // the recurrent kernel).
    kGRU,
    // Keras's SimpleRNN of `outputs` units, as kLSTM: h = activation(x W +
    // b + h_prev U) (`activation`, any of Activate's; none: linear); its
    // variables
    // "<name>/simple_rnn_cell/kernel" [inputs, outputs],
    // ".../recurrent_kernel" [outputs, outputs], ".../bias" [outputs].
    kSimpleRNN,
    // A Keras mask (1 a kept step, 0 a masked one) of a sequence: of an
    // Embedding's ids (T,) (mask_zero=True: kept where the id is not 0;
    // `inputs` 1), or of a (T, `inputs`) sequence (Masking: kept where any
    // feature differs from `alpha`, its mask_value). Output (T,); no
    // gradient goes through it. A layer that takes a mask takes it as its
    // last source (the recurrent kinds, kMaskRows, kMaskedMean; kMask's
    // above).
    kSequenceMask,
    // Keras's Masking's output: its first source's steps where the mask
    // (its second) keeps them, else zeros.
    kMaskRows,
    // Keras's GlobalAveragePooling1D of a masked (T, C) sequence: the mean
    // over the kept steps, (C,).
    kMaskedMean,
  };
  Kind kind;
  std::string name;     // Keras name: "conv2d", "conv2d_1", "dense", ...
  int64_t inputs = 0;   // conv: input channels; dense: input features
  int64_t outputs = 0;  // conv: filters; dense: units
  bool relu = false;    // conv, dense: a fused ReLU
  Initializer kernel_init;
  Initializer bias_init{Initializer::Kind::kZeros};
  // kActivation's function; on a conv or dense, an activation other than
  // relu, applied to its output in place.
  std::optional<Activation> activation;
  float alpha = 0;      // leaky_relu's slope; kScale's factor
  bool causal = false;  // kMask
  // kMask: whether the query's and the value's masks are sources.
  bool query_mask = false, value_mask = false;
  // kLSTM, kGRU, kSimpleRNN with a mask (their second source): a masked step keeps the
  // state, and its output is the previous step's (Keras's default) or, with
  // `zero_masked` (a Bidirectional's layers returning sequences), zeros.
  bool zero_masked = false;
  // It computes a Keras mask (a kSequenceMask, the OR of a merge's masks):
  // its output may go unused, where Keras drops the mask (a layer that
  // does not support masking).
  bool keras_mask = false;
  // kLSTM, kGRU, kSimpleRNN: Keras's return_sequences and go_backwards; `unreverse`: with
  // go_backwards, the output sequence in the input's step order (the
  // backward layer of a Bidirectional, which Keras flips back).
  bool return_sequences = false, go_backwards = false, unreverse = false;
  bool reset_after = true;  // kGRU
  Initializer recurrent_init{Initializer::Kind::kOrthogonal, 1.0};
  // kGlobalPool, and kPool's window: kMax (MaxPooling2D) or kAverage.
  GlobalPooling pooling = GlobalPooling::kMax;
  double rate = 0;  // kDropout, in (0, 1)
  // kConv: the kernel's size, strides and padding; kPool: the pool window.
  Window window = kConv3x3Same;
  bool bias = true;  // kConv, kDense: use_bias
  // kConv: a DepthwiseConv2D (window.groups = inputs, outputs = inputs x
  // depth_multiplier), whose kernel variable has Keras's shape [KH, KW, C,
  // depth_multiplier] (the memory of the grouped [KH, KW, 1, C x
  // depth_multiplier] kernel the backends take).
  bool depthwise = false;
  // kConv, kDense: the variables' names where they are not "<name>/kernel"
  // and "<name>/bias" (a SeparableConv2D, read as a depthwise and a 1x1
  // convolution, names its three variables as Keras does under the
  // layer's name: depthwise_kernel, pointwise_kernel, bias).
  std::string kernel_variable, bias_variable;
  // kBatchNorm (over the last axis; inputs = outputs = its channels):
  // Keras's epsilon and momentum, whether it has gamma (scale) and beta
  // (center), and the four initializers.
  double epsilon = 1e-3;
  float momentum = 0.99f;
  bool scale = true, center = true;
  Initializer gamma_init{Initializer::Kind::kOnes};
  Initializer beta_init{Initializer::Kind::kZeros};
  Initializer moving_mean_init{Initializer::Kind::kZeros};
  Initializer moving_variance_init{Initializer::Kind::kOnes};
  // The tensors it takes, in order (LayerGraph's ids: 0 the model's input,
  // i + 1 layer i's output), each an earlier one; empty: the previous
  // layer's output (the model's input for the first layer), as in a chain.
  // kAdd takes two or more; every other kind one.
  std::vector<int> sources;
  // Keras's trainable=False: its variables never change (Model makes them
  // moving averages of momentum 1), its weight gradients are not computed
  // (their "gradients" stay 0), and a BatchNormalization normalizes with its
  // moving statistics in training too, as Keras runs a frozen one.
  bool trainable = true;
  // The dtype its policy computes in (keras/dtype_policy.h): its output and
  // that output's gradient are held in it (float32, bfloat16, float16); its
  // variables stay float32.
  DType compute = DType::kFloat32;
  // kConcat: the axis of one example's shape (0 is the first after the
  // batch).
  int axis = 0;
  // kFlatten: the example's shape after it (a Reshape's target_shape);
  // empty: (features,). kInput: the input's example shape.
  std::vector<int64_t> target;
  // kInput: where the input's values start in a packed example.
  int64_t offset = 0;
  // kDot: the example axis of each source its product sums over, and
  // whether each source's vectors along it are L2-normalized first
  // (Keras's normalize=True: the cosine proximity).
  std::vector<int> dot_axes;
  bool dot_normalize = false;
  // kPermute's permutation of the example's axes.
  std::vector<int> perm;
  // kDense on the last axes of its input (Keras's Dense on a sequence,
  // EinsumDense): the output's example shape (empty: (outputs,), the
  // input flattened). `inputs` is then the product of the input's trailing
  // axes it contracts (Dense: the last; EinsumDense "abcd,cde->abe": the
  // last two) and `outputs` the product of the output's axes the kernel
  // makes, which end `target`: the rest of `target` is the input's
  // uncontracted axes. `axis` is then how many of the input's last axes it
  // contracts (0: as many as `inputs` needs, the fewest).
  // kConv, kDense: the kernel's and the bias's shapes as Keras holds them,
  // where not the backends' ([KH, KW, C / groups, K]; [inputs, outputs] and
  // [outputs]), of the same elements: Conv1D's [K, C, F], EinsumDense's [D,
  // H, K] and [H, K].
  std::vector<int64_t> kernel_shape, bias_shape;
  // kZeroPad, kCrop: rows at the top and bottom, columns at the left and
  // right. kConvTranspose: Keras's output_padding (rows, columns), or
  // empty for none.
  std::vector<int64_t> pads;
};

// Whether a layer of `kind` applies its `relu` or `activation` to its own
// output, in place (the executor's backward pass undoes it first).
inline bool AppliesActivation(LayerSpec::Kind kind) {
  return kind == LayerSpec::kConv || kind == LayerSpec::kDense || kind == LayerSpec::kBiasAdd;
}

// Whether `kind` is a recurrent layer (its steps in a loop; a Keras mask
// as its optional second source).
inline bool IsRecurrentKind(LayerSpec::Kind kind) {
  return kind == LayerSpec::kLSTM || kind == LayerSpec::kGRU || kind == LayerSpec::kSimpleRNN;
}

// Whether `kind` is a merge (several sources).
inline bool IsMergeKind(LayerSpec::Kind kind) {
  return kind == LayerSpec::kAdd || kind == LayerSpec::kMultiply || kind == LayerSpec::kAverage ||
         kind == LayerSpec::kSubtract || kind == LayerSpec::kConcat ||
         kind == LayerSpec::kMaximum || kind == LayerSpec::kMinimum;
}

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_LAYER_SPEC_H_
