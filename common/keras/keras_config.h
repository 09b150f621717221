// A Keras model's architecture, as `model.to_json()` writes it and as the
// config.json of a `.keras` archive holds it, read into a Model. Sequential
// models, and functional ones of one input and one output whose layers
// branch and merge (a layer's output may feed several layers; Add sums
// two or more), read in a topological order (the config's, when it is
// one, as Keras writes it), of the layers the backends run today:
//
//   InputLayer    batch_shape (Keras 3) or batch_input_shape (Keras 2)
//   Conv2D        any kernel_size, strides, dilation_rate and groups,
//                 padding "same" or "valid", with or without bias
//   DepthwiseConv2D  the same with any depth_multiplier (a convolution of
//                 C groups; its kernel [KH, KW, C, depth_multiplier])
//   SeparableConv2D  that depthwise convolution, then a 1x1 one (two
//                 layers here, named "<name>" and "<name>/pointwise")
//   Conv2DTranspose  any kernel_size, strides and dilation_rate, "same" or
//                 "valid", output_padding below the strides (its bias and
//                 activation a layer "<name>/bias" after it)
//   UpSampling2D  any size, interpolation "nearest"
//   MaxPooling2D, AveragePooling2D  any pool_size and strides, "same" or
//                 "valid"
//   GlobalAveragePooling2D, GlobalMaxPooling2D  (keepdims=False)
//   Flatten
//   Dense         with or without bias
//   BatchNormalization  over the last axis, any momentum and epsilon,
//                 center/scale; not synchronized, not renorm; of
//                 (height, width, channels) or of a Dense's, a global
//                 pooling's or a (features,) input's output
//   Dropout       rate in [0, 1), no noise_shape; training only
//   Activation, ReLU (negative_slope: leaky), LeakyReLU  relu (fused into a
//                 Conv2D or Dense right before without activation), sigmoid,
//                 tanh, leaky_relu (Keras's slope 0.2 by name; the layer's)
//   Softmax, Activation("softmax")  anywhere, over the last axis; one that
//                 ends the model (the last Dense's activation, or right after
//                 a Dense without one) is folded into the cross-entropy
//   Add, Multiply, Average  two or more inputs of one shape; Subtract,
//                 Maximum, Minimum two
//   Concatenate   along any axis but the batch's
// Conv2D and Dense take every activation above (relu fused; gelu and silu a
// layer of their own after them; softmax over the last axis).
//
// Kernel and bias initializers: glorot_uniform, glorot_normal, he_uniform,
// he_normal, zeros, ones, constant, random_normal, random_uniform (and
// BatchNormalization's gamma, beta and moving-statistic initializers, of the
// same list). A layer with trainable=False is frozen (LayerSpec::trainable).
// Anything else is INVALID_ARGUMENT naming the layer, its class and what is
// supported. Pure; thread-safe.
#ifndef PSC_COMMON_KERAS_KERAS_CONFIG_H_
#define PSC_COMMON_KERAS_KERAS_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/compute/model.h"

namespace psc {
namespace keras {

// The model of `config_json` (the whole to_json() object: {"class_name":
// "Sequential", "config": {...}}). `what` names the source in messages
// ("model.keras: config.json"). The model's name is the config's.
absl::StatusOr<compute::Model> ModelFromKerasConfig(absl::string_view config_json,
                                                    absl::string_view what);

// A built-in model, read from its Keras config (builtin_models.h) like any
// user's: "seed_cnn" (models/seed_cnn.json: six 3x3 "same" ReLU
// convolutions (32, 32, 64, 64, 128, 128), a 2x2 max pool after each pair
// (28 -> 14 -> 7 -> 3), flatten (1152), Dense 128 ReLU, Dense 10 (logits;
// softmax is in the loss): 435,306 parameters) or "mlp" (models/mlp.json:
// flatten (784), Dense 128 ReLU, Dense 10: 101,770). INVALID_ARGUMENT
// naming the built-in models for anything else.
absl::StatusOr<compute::Model> BuiltinModel(const std::string& name);

// What ModelFromKerasConfig accepts, as its errors list it.
inline constexpr char kSupportedKerasLayers[] =
    "InputLayer, Rescaling and Normalization (with its mean and variance) as the first layer, "
    "Conv2D (any kernel_size, strides, dilation_rate and groups, padding \"same\" or "
    "\"valid\", with or without bias), DepthwiseConv2D and SeparableConv2D (also any "
    "depth_multiplier), Conv2DTranspose (output_padding below the strides), MaxPooling2D and "
    "AveragePooling2D (any pool_size and strides, \"same\" or \"valid\"), Conv1D (also "
    "padding \"causal\"), MaxPooling1D, AveragePooling1D, "
    "GlobalAveragePooling2D, GlobalMaxPooling2D, GlobalAveragePooling1D, GlobalMaxPooling1D, "
    "Flatten, Reshape (to (features,), (steps, features) or (height, width, channels)), "
    "Permute, RepeatVector, "
    "Embedding (of a model input of ids; mask_zero), Masking, MultiHeadAttention, LSTM, GRU "
    "and SimpleRNN (return_sequences, go_backwards), Bidirectional, ZeroPadding2D, Cropping2D, "
    "UpSampling2D "
    "(nearest), Dense (on the last axis, with or without bias), EinsumDense (the input's last "
    "axes contracted with the kernel's first), BatchNormalization (last axis), "
    "LayerNormalization (last axes), Dropout, Activation / ReLU / LeakyReLU (relu, "
    "sigmoid, tanh, leaky_relu, ...), Softmax (any axis) / Activation(\"softmax\"), Add, "
    "Multiply, Average, Subtract, Maximum, Minimum (of inputs of one shape), Concatenate (any "
    "axis but the batch), Dot (of two (K,) or two rank-2 inputs)";

}  // namespace keras
}  // namespace psc

#endif  // PSC_COMMON_KERAS_KERAS_CONFIG_H_
