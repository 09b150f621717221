#include "common/keras/keras_config.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/compute/layer_graph.h"
#include "common/keras/builtin_models.h"
#include "common/keras/dtype_policy.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace keras {
namespace {

using compute::Activation;
using compute::ActivationName;
using compute::GlobalPooling;
using compute::GradientFromInput;
using compute::Initializer;
using compute::InputTransform;
using compute::LayerGraph;
using compute::LayerSpec;
using compute::Model;
using compute::ModelInput;
using compute::Padding;
using compute::Shape;
using compute::ShapeSize;
using compute::ShapeText;
using compute::SummaryRow;
using compute::Window;
using Json = nlohmann::json;

// The values of one example over all of a model's inputs.
constexpr int64_t kMaxPackedInput = int64_t{1} << 30;

// A member of `object`, or nullptr (never throws, unlike operator[]).
const Json* Find(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool IsNull(const Json* j) { return j == nullptr || j->is_null(); }

// The keys of a recurrent layer's config (KnownKeys): SimpleRNN's, with
// `more` (its kind's own).
std::set<std::string> Recurrent(std::set<std::string> more) {
  more.insert({"units",
               "activation",
               "use_bias",
               "kernel_initializer",
               "recurrent_initializer",
               "bias_initializer",
               "kernel_regularizer",
               "recurrent_regularizer",
               "bias_regularizer",
               "activity_regularizer",
               "kernel_constraint",
               "recurrent_constraint",
               "bias_constraint",
               "dropout",
               "recurrent_dropout",
               "seed",
               "return_sequences",
               "return_state",
               "go_backwards",
               "stateful",
               "unroll",
               "zero_output_for_mask"});
  return more;
}

// Every key a supported layer's config may hold (Keras 3.15's get_config,
// and Keras 2's where it differs), each honoured or checked by the reader
// below; a key not listed is refused, never ignored. Keys common to every
// layer: the name, trainable (checked), the dtype policy (checked) and the
// input declarations.
const std::set<std::string>& KnownKeys(const std::string& cls) {
  static const auto* kKeys = new std::map<std::string, std::set<std::string>>{
      {"InputLayer", {"batch_shape", "optional", "ragged", "sparse"}},
      {"Conv2D",
       {"activation", "activity_regularizer", "bias_constraint", "bias_initializer",
        "bias_regularizer", "data_format", "dilation_rate", "filters", "groups",
        "kernel_constraint", "kernel_initializer", "kernel_regularizer", "kernel_size", "padding",
        "strides", "use_bias", "lora_rank", "lora_alpha"}},
      {"DepthwiseConv2D",
       {"activation", "activity_regularizer", "bias_constraint", "bias_initializer",
        "bias_regularizer", "data_format", "depth_multiplier", "depthwise_constraint",
        "depthwise_initializer", "depthwise_regularizer", "dilation_rate", "kernel_size", "padding",
        "strides", "use_bias", "groups"}},
      {"SeparableConv2D",
       {"activation",
        "activity_regularizer",
        "bias_constraint",
        "bias_initializer",
        "bias_regularizer",
        "data_format",
        "depth_multiplier",
        "depthwise_constraint",
        "depthwise_initializer",
        "depthwise_regularizer",
        "dilation_rate",
        "filters",
        "kernel_size",
        "padding",
        "pointwise_constraint",
        "pointwise_initializer",
        "pointwise_regularizer",
        "strides",
        "use_bias",
        "groups"}},
      {"Conv2DTranspose",
       {"activation", "activity_regularizer", "bias_constraint", "bias_initializer",
        "bias_regularizer", "data_format", "dilation_rate", "filters", "groups",
        "kernel_constraint", "kernel_initializer", "kernel_regularizer", "kernel_size",
        "output_padding", "padding", "strides", "use_bias"}},
      {"MaxPooling2D", {"data_format", "padding", "pool_size", "strides"}},
      {"AveragePooling2D", {"data_format", "padding", "pool_size", "strides"}},
      {"Flatten", {"data_format"}},
      {"Reshape", {"target_shape"}},
      {"ZeroPadding2D", {"data_format", "padding"}},
      {"Cropping2D", {"data_format", "cropping"}},
      {"UpSampling2D", {"data_format", "interpolation", "size"}},
      {"Embedding",
       {"input_dim", "output_dim", "embeddings_initializer", "embeddings_regularizer",
        "activity_regularizer", "embeddings_constraint", "mask_zero", "input_length", "sparse",
        "lora_rank", "lora_alpha", "quantization_config"}},
      {"Dense",
       {"activation", "activity_regularizer", "bias_constraint", "bias_initializer",
        "bias_regularizer", "kernel_constraint", "kernel_initializer", "kernel_regularizer",
        "quantization_config", "units", "use_bias", "lora_rank", "lora_alpha"}},
      {"ReLU", {"max_value", "negative_slope", "threshold"}},
      {"LeakyReLU", {"negative_slope", "alpha"}},
      {"ELU", {"alpha"}},
      {"GlobalAveragePooling2D", {"data_format", "keepdims"}},
      {"GlobalMaxPooling2D", {"data_format", "keepdims"}},
      {"GlobalAveragePooling1D", {"data_format", "keepdims"}},
      {"GlobalMaxPooling1D", {"data_format", "keepdims"}},
      {"Dropout", {"noise_shape", "rate", "seed"}},
      {"BatchNormalization",
       {"axis",
        "beta_constraint",
        "beta_initializer",
        "beta_regularizer",
        "center",
        "epsilon",
        "gamma_constraint",
        "gamma_initializer",
        "gamma_regularizer",
        "momentum",
        "moving_mean_initializer",
        "moving_variance_initializer",
        "renorm",
        "renorm_clipping",
        "renorm_momentum",
        "scale",
        "synchronized",
        "adjustment",
        "virtual_batch_size",
        "fused"}},
      {"Activation", {"activation"}},
      {"Softmax", {"axis"}},
      {"Rescaling", {"scale", "offset"}},
      {"Normalization", {"axis", "invert", "mean", "variance"}},
      {"Conv1D",
       {"activation", "activity_regularizer", "bias_constraint", "bias_initializer",
        "bias_regularizer", "data_format", "dilation_rate", "filters", "groups",
        "kernel_constraint", "kernel_initializer", "kernel_regularizer", "kernel_size", "padding",
        "strides", "use_bias", "lora_rank", "lora_alpha"}},
      {"MaxPooling1D", {"data_format", "padding", "pool_size", "strides"}},
      {"AveragePooling1D", {"data_format", "padding", "pool_size", "strides"}},
      {"LayerNormalization",
       {"axis", "beta_constraint", "beta_initializer", "beta_regularizer", "center", "epsilon",
        "gamma_constraint", "gamma_initializer", "gamma_regularizer", "rms_scaling", "scale"}},
      {"EinsumDense",
       {"activation", "activity_regularizer", "bias_axes", "bias_constraint", "bias_initializer",
        "bias_regularizer", "equation", "kernel_constraint", "kernel_initializer",
        "kernel_regularizer", "output_shape", "quantization_config", "lora_rank", "lora_alpha"}},
      {"Permute", {"dims"}},
      {"SimpleRNN", Recurrent({"time_major"})},  // Keras 2's RNN writes it
      {"LSTM",
       Recurrent({"recurrent_activation", "unit_forget_bias", "implementation", "time_major"})},
      {"GRU", Recurrent({"recurrent_activation", "reset_after", "implementation", "time_major"})},
      {"Bidirectional", {"layer", "backward_layer", "merge_mode"}},
      {"MultiHeadAttention",
       {"num_heads", "key_dim", "value_dim", "dropout", "use_bias", "use_gate", "output_shape",
        "attention_axes", "sliding_window", "kernel_initializer", "bias_initializer",
        "kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
        "bias_constraint", "seed"}},
      {"RepeatVector", {"n"}},
      {"Masking", {"mask_value"}},
      {"Add", {}},
      {"Multiply", {}},
      {"Average", {}},
      {"Subtract", {}},
      {"Concatenate", {"axis"}},
      {"Dot", {"axes", "normalize"}},
      {"Maximum", {}},
      {"Minimum", {}},
  };
  static const auto* kNone = new std::set<std::string>();
  const auto it = kKeys->find(cls);
  return it == kKeys->end() ? *kNone : it->second;
}

// Merges: layers of several inputs.
bool IsMerge(const std::string& cls) {
  return cls == "Add" || cls == "Multiply" || cls == "Average" || cls == "Subtract" ||
         cls == "Concatenate" || cls == "Maximum" || cls == "Minimum";
}

bool CommonKey(const std::string& key) {
  return key == "name" || key == "trainable" || key == "dtype" || key == "batch_input_shape" ||
         key == "batch_shape" || key == "input_shape" || key == "input_dtype";
}

// The dtype policy's name in every form Keras writes it: a string,
// {"class_name": "DTypePolicy" | "FloatDTypePolicy" | "Policy", "config":
// {"name": ...}}; "" for another class (a quantized policy), "float32"
// when absent.
std::string PolicyName(const Json* dtype, std::string* cls) {
  *cls = "";
  if (IsNull(dtype)) return "float32";
  if (dtype->is_string()) return dtype->get<std::string>();
  const Json* c = Find(*dtype, "class_name");
  if (c != nullptr && c->is_string()) *cls = c->get<std::string>();
  if (*cls != "DTypePolicy" && *cls != "FloatDTypePolicy" && *cls != "Policy") return "";
  const Json* config = Find(*dtype, "config");
  const Json* name = config == nullptr ? nullptr : Find(*config, "name");
  return name != nullptr && name->is_string() ? name->get<std::string>() : "";
}

// Reads one Keras layer's config; every message names the layer.
class LayerReader {
 public:
  LayerReader(const Json& config, std::string prefix) : c_(config), prefix_(std::move(prefix)) {}

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(prefix_, ": ", what));
  }
  absl::Status Unsupported(absl::string_view what) const {
    return Error(absl::StrCat(what, " is not supported (supported: ", kSupportedKerasLayers, ")"));
  }

  absl::StatusOr<int64_t> Int(const char* key) const {
    const Json* j = Find(c_, key);
    if (j == nullptr || !j->is_number_integer() || j->get<int64_t>() < 1) {
      return Error(absl::StrCat("'", key, "' must be a positive integer"));
    }
    return j->get<int64_t>();
  }
  // A pair such as kernel_size: [a, b] or a single integer a (both a).
  absl::StatusOr<std::pair<int64_t, int64_t>> Pair(const char* key) const {
    const Json* j = Find(c_, key);
    if (j != nullptr && j->is_number_integer())
      return std::make_pair(j->get<int64_t>(), j->get<int64_t>());
    if (j != nullptr && j->is_array() && j->size() == 2 && (*j)[0].is_number_integer() &&
        (*j)[1].is_number_integer()) {
      return std::make_pair((*j)[0].get<int64_t>(), (*j)[1].get<int64_t>());
    }
    return Error(absl::StrCat("'", key, "' must be an integer or a pair of integers"));
  }
  // A 1-D layer's size such as Conv1D's kernel_size: an integer or [a]; `fallback`
  // where the key is absent or null (0: required).
  absl::StatusOr<int64_t> Single(const char* key, int64_t fallback = 0) const {
    const Json* j = Find(c_, key);
    if (IsNull(j) && fallback > 0) return fallback;
    if (j != nullptr && j->is_array() && j->size() == 1) j = &(*j)[0];
    constexpr int64_t kMax = int64_t{1} << 20;
    if (j == nullptr || !j->is_number_integer() || j->get<int64_t>() < 1 ||
        j->get<int64_t>() > kMax) {
      return Error(
          absl::StrCat("'", key, "' must be an integer (or a list of one) in [1, ", kMax, "]"));
    }
    return j->get<int64_t>();
  }
  std::string String(const char* key, const std::string& fallback) const {
    const Json* j = Find(c_, key);
    return j != nullptr && j->is_string() ? j->get<std::string>() : fallback;
  }
  bool Bool(const char* key, bool fallback) const {
    const Json* j = Find(c_, key);
    return j != nullptr && j->is_boolean() ? j->get<bool>() : fallback;
  }
  // The activation's name: "relu", "linear", ...; a serialized function
  // object ({"class_name": "function", "config": "relu"}) too.
  absl::StatusOr<std::string> Activation(const char* key = "activation") const {
    const Json* j = Find(c_, key);
    if (IsNull(j)) return std::string("linear");
    if (j->is_string()) return j->get<std::string>();
    if (const Json* cfg = Find(*j, "config"); cfg != nullptr && cfg->is_string()) {
      return cfg->get<std::string>();
    }
    return Error(absl::StrCat("'", key, "' is not an activation name"));
  }
  // The things a layer may carry that we would silently ignore: refused.
  absl::Status NoExtras(std::initializer_list<const char*> keys) const {
    for (const char* key : keys) {
      if (!IsNull(Find(c_, key))) return Unsupported(absl::StrCat("'", key, "'"));
    }
    return absl::OkStatus();
  }
  absl::Status ChannelsLast() const {
    const std::string f = String("data_format", "channels_last");
    if (f != "channels_last") return Unsupported(absl::StrCat("data_format \"", f, "\""));
    return absl::OkStatus();
  }
  absl::StatusOr<Initializer> Init(const char* key, Initializer fallback) const;
  const Json* Get(const char* key) const { return Find(c_, key); }
  double Num(const char* key, double fallback) const;

 private:
  const Json& c_;
  const std::string prefix_;
};

double Number(const Json* config, const char* key, double fallback) {
  const Json* j = config == nullptr ? nullptr : Find(*config, key);
  return j != nullptr && j->is_number() ? j->get<double>() : fallback;
}

double LayerReader::Num(const char* key, double fallback) const {
  return Number(&c_, key, fallback);
}

absl::StatusOr<Initializer> LayerReader::Init(const char* key, Initializer fallback) const {
  const Json* j = Find(c_, key);
  if (IsNull(j)) return fallback;
  std::string name;
  const Json* config = nullptr;
  if (j->is_string()) {
    name = j->get<std::string>();
  } else if (const Json* cls = Find(*j, "class_name"); cls != nullptr && cls->is_string()) {
    name = cls->get<std::string>();
    config = Find(*j, "config");
  } else {
    return Error(absl::StrCat("'", key, "' is not an initializer"));
  }
  using K = Initializer::Kind;
  static const std::map<std::string, K>* kKinds = new std::map<std::string, K>{
      {"GlorotUniform", K::kGlorotUniform},
      {"glorot_uniform", K::kGlorotUniform},
      {"GlorotNormal", K::kGlorotNormal},
      {"glorot_normal", K::kGlorotNormal},
      {"HeUniform", K::kHeUniform},
      {"he_uniform", K::kHeUniform},
      {"HeNormal", K::kHeNormal},
      {"he_normal", K::kHeNormal},
      {"Zeros", K::kZeros},
      {"zeros", K::kZeros},
      {"Ones", K::kOnes},
      {"ones", K::kOnes},
      {"Constant", K::kConstant},
      {"constant", K::kConstant},
      {"RandomNormal", K::kRandomNormal},
      {"random_normal", K::kRandomNormal},
      {"RandomUniform", K::kRandomUniform},
      {"random_uniform", K::kRandomUniform},
      {"uniform", K::kRandomUniform},  // Keras's alias, an Embedding's default
      {"normal", K::kRandomNormal},
      {"Orthogonal", K::kOrthogonal},  // a recurrent kernel's default
      {"orthogonal", K::kOrthogonal},
  };
  const auto it = kKinds->find(name);
  if (it == kKinds->end()) {
    return Error(absl::StrCat(key, " ", name,
                              " is not supported (supported: glorot_uniform, glorot_normal, "
                              "he_uniform, he_normal, zeros, ones, constant, random_normal, "
                              "random_uniform, orthogonal)"));
  }
  Initializer init{it->second};
  switch (init.kind) {
    case K::kConstant:
      init.a = Number(config, "value", 0);
      break;
    case K::kRandomNormal:
      init.a = Number(config, "mean", 0);
      init.b = Number(config, "stddev", 0.05);
      break;
    case K::kRandomUniform:
      init.a = Number(config, "minval", -0.05);
      init.b = Number(config, "maxval", 0.05);
      break;
    case K::kOrthogonal:
      init.a = Number(config, "gain", 1.0);
      if (!std::isfinite(init.a)) return Error(absl::StrCat(key, " Orthogonal: 'gain' not finite"));
      break;
    default:
      break;
  }
  return init;
}

// The example shape a batch shape [null, d...] gives.
absl::StatusOr<Shape> ExampleShape(const Json& batch_shape, absl::string_view what) {
  Shape shape;
  if (!batch_shape.is_array() || batch_shape.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the input shape ", batch_shape.dump(), " is not [batch, dims...]"));
  }
  for (size_t i = 1; i < batch_shape.size(); ++i) {
    if (batch_shape[i].is_null()) {  // FixOpenInputDims sets them where there is data
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the input shape ", batch_shape.dump(),
                       " has a None dimension, which pscluster fixes from the data when a job "
                       "or `pscluster predict` starts; here there is none"));
    }
    if (!batch_shape[i].is_number_integer() || batch_shape[i].get<int64_t>() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": the input shape ", batch_shape.dump(),
                                                     " needs every dimension but the batch"));
    }
    shape.push_back(batch_shape[i].get<int64_t>());
  }
  return shape;
}

// The input shape a layer's config declares, if any.
std::optional<Json> DeclaredInput(const Json& layer) {
  const Json* config = Find(layer, "config");
  if (config == nullptr) return std::nullopt;
  for (const char* key : {"batch_shape", "batch_input_shape"}) {
    if (const Json* j = Find(*config, key); !IsNull(j)) return *j;
  }
  return std::nullopt;
}

// The model read one layer at a time: a Sequential's in order, a functional
// model's in a topological order, each with the handles of its inputs.
void InboundNames(const Json& j, std::vector<std::string>* names,
                  std::vector<int>* indexes = nullptr);

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string model_what) : what_(std::move(model_what)) {}

  absl::Status SetInput(const Json& batch_shape) {
    PSC_ASSIGN_OR_RETURN(input_, ExampleShape(batch_shape, what_));
    if (input_.size() > 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": input shape ", ShapeText(input_),
                       " is not (height, width, channels), (steps, features) or (features,)"));
    }
    cur_ = input_;
    matrix_ = true;  // the input tensor is of its own shape
    return absl::OkStatus();
  }
  bool has_input() const { return !input_.empty(); }

  // Several inputs, by name, with their batch_shapes, in the model's input
  // order: the model's input is every input's values of an example packed
  // in that order, and each InputLayer becomes a kInput layer taking its
  // block.
  absl::Status SetInputs(const std::vector<std::pair<std::string, Json>>& inputs) {
    int64_t total = 0;
    for (const auto& [name, batch_shape] : inputs) {
      PSC_RETURN_IF_ERROR(SetInput(batch_shape));
      const int64_t size = ShapeSize(input_);
      if (size > kMaxPackedInput - total) {
        return absl::InvalidArgumentError(
            absl::StrCat(what_, ": the inputs hold over ", kMaxPackedInput, " values per example"));
      }
      inputs_.push_back({name, input_, total});
      total += size;
    }
    input_ = cur_ = {total};
    matrix_ = true;
    return absl::OkStatus();
  }

  // A Keras tensor as the builder holds it: the LayerGraph tensor behind it
  // (a Flatten, a linear or fused activation, a rate-0 Dropout and an input
  // transform make none of their own), its shape as Keras sees it, and the
  // flags of cur_ below.
  struct Handle {
    int tensor = 0;
    Shape shape;
    bool matrix = false;
    int mask = -1;  // its Keras mask (T,), a tensor of 1 and 0 (kSequenceMask); -1: none
    // The output of one of the ops Keras's saved graph computes a mask with
    // (NotEqual, Any, LogicalOr, ExpandDims, ...), passed as a layer's
    // mask=: the reader has that mask already, propagated as Keras does.
    bool mask_op = false;
    // Its mask as Keras's runtime sees it, which a MultiHeadAttention reads:
    // `mask` but where an earlier MultiHeadAttention took this tensor (Keras
    // clears the masks of its query, value and key: a later layer sees
    // none). The layers with a mask= argument read `mask`, which the saved
    // graph records for them.
    int runtime_mask = -1;
  };

  // The next layer of a Sequential model: it takes the previous one's output.
  absl::Status Add(const Json& layer) {
    src_ = out_;
    in_masks_ = {out_mask_};
    in_runtime_masks_ = {out_runtime_mask_};
    return Read(layer, {});
  }

  // A layer of a functional model, taking `inputs` (none for an InputLayer).
  // The handle of its output.
  absl::StatusOr<Handle> AddNode(const Json& layer, const std::vector<Handle>& inputs) {
    const Json* cls = Find(layer, "class_name");
    const std::string c = cls != nullptr && cls->is_string() ? cls->get<std::string>() : "";
    const Json* module = Find(layer, "module");
    const bool op_layer = module != nullptr && module->is_string() &&
                          absl::StartsWith(module->get<std::string>(), "keras.src.ops");
    if (op_layer || c == "NotEqual" || c == "Any" || c == "LogicalOr" || c == "LogicalAnd") {
      Handle h;
      h.mask_op = true;
      return h;
    }
    // A mask= from those ops: the layers that take one (Keras records the
    // mask it propagated to them), which use the mask the reader holds.
    std::vector<Handle> data;
    bool given_mask = false;
    for (const Handle& h : inputs) {
      if (h.mask_op) {
        given_mask = true;
      } else {
        data.push_back(h);
      }
    }
    if (given_mask) {
      const bool takes = c == "LSTM" || c == "GRU" || c == "SimpleRNN" || c == "Bidirectional" ||
                         c == "GlobalAveragePooling1D";
      if (!takes || data.empty() || data[0].mask < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            what_, ": a ", c, " layer takes a tensor computed by a Keras op layer (",
            "NotEqual, Any, ...)", takes ? " where no Keras mask reaches its input" : "",
            ": not supported (masks come from Embedding(mask_zero=True) and Masking)"));
      }
    }
    src_ = out_ = 0;
    in_masks_.clear();
    in_runtime_masks_.clear();
    if (!data.empty()) {
      src_ = out_ = data[0].tensor;
      cur_ = data[0].shape;
      matrix_ = data[0].matrix;
    }
    for (const Handle& h : data) {
      in_masks_.push_back(h.mask);
      in_runtime_masks_.push_back(h.runtime_mask);
    }
    PSC_RETURN_IF_ERROR(Read(layer, data));
    return Handle{out_, cur_, matrix_, out_mask_, false, out_runtime_mask_};
  }

  // How many layers take the model's input (an input transform needs it
  // to be one).
  void set_input_consumers(int n) { input_consumers_ = n; }
  // The config is Keras 2's (tf.keras): hard_sigmoid is its own.
  void set_keras2(bool keras2) { keras2_ = keras2; }
  // A functional model's: its layers' outputs are taken by index, so a
  // recurrent layer may return its state (StateOf).
  void set_functional() { functional_ = true; }

  // Output `index` of layer `name` where it is not 0: the final state h of a recurrent layer with
  // return_state (1), the last step of its sequence (the step the loop ends on, in the order it
  // writes them), or its output itself without return_sequences. An LSTM's cell state c (2) is exit
  // 2; any other is INVALID_ARGUMENT.
  absl::StatusOr<Handle> StateOf(const std::string& name, int index) {
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what_, ": a layer takes an output of layer \"", name,
          "\" whose index (keras_history's third entry) is not an integer in [0, 1024)"));
    }
    const auto it = states_.find(name);
    if (it == states_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": output ", index, " of layer \"", name,
                       "\" is taken; it has one output (a recurrent layer has more with "
                       "return_state=True)"));
    }
    const RecurrentState& st = it->second;
    if (index == 2 && st.cls == "LSTM") {
      return absl::InvalidArgumentError(absl::StrCat(
          what_, ": layer \"", name,
          "\" (LSTM): its cell state c (return_state's third output) is taken: not supported "
          "yet (its state h, the second, is)"));
    }
    if (index != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": output ", index, " of layer \"", name, "\" (", st.cls,
                       ") is taken; it has outputs 0 to ", st.cls == "LSTM" ? 2 : 1));
    }
    Handle h;
    h.shape = {st.units};
    h.matrix = true;
    if (!st.sequences) {
      h.tensor = st.tensor;
      return h;
    }
    if (const auto made = state_tensors_.find(name); made != state_tensors_.end()) {
      h.tensor = made->second;
      return h;
    }
    // (T, U) held as (1, T, U): cropped to its last step, flattened.
    LayerSpec view{LayerSpec::kFlatten, name + "/state/sequence"};
    view.sources = {st.tensor};
    view.target = {1, st.steps, st.units};
    LayerSpec crop{LayerSpec::kCrop, name + "/state/last_step"};
    crop.sources = {static_cast<int>(layers_.size()) + 1};
    crop.pads = {0, 0, st.steps - 1, 0};
    LayerSpec flat{LayerSpec::kFlatten, name + "/state"};
    flat.sources = {static_cast<int>(layers_.size()) + 2};
    for (LayerSpec* l : {&view, &crop, &flat}) {
      l->trainable = false;
      l->compute = st.compute;
      layers_.push_back(std::move(*l));
    }
    h.tensor = static_cast<int>(layers_.size());
    state_tensors_[name] = h.tensor;
    return h;
  }

 private:
  // The layer, then its output's Keras mask (out_mask_) as Keras computes
  // it: the layers that take a mask set their own (mask_set_); those that
  // pass it on (supports_masking, compute_mask the default) pass the first
  // input's; every other layer drops it, as Keras does (with a warning).
  absl::Status Read(const Json& layer, const std::vector<Handle>& inputs) {
    out_mask_ = out_runtime_mask_ = -1;
    mask_set_ = runtime_set_ = false;
    std::string cls;
    PSC_RETURN_IF_ERROR(ReadLayer(layer, inputs, &cls));
    static const std::set<std::string> kPassMask = {
        "Dense", "Dropout", "Activation", "ReLU", "ELU", "LeakyReLU", "LayerNormalization"};
    const bool pass = !mask_set_ && kPassMask.count(cls) != 0;
    if (pass) out_mask_ = in_mask();
    // At runtime a layer that made its own mask (from its mask= or its
    // ids) gives that; one that passes its input's passes the runtime one.
    if (!runtime_set_) out_runtime_mask_ = pass ? in_runtime_mask() : out_mask_;
    return absl::OkStatus();
  }

  int in_runtime_mask() const { return in_runtime_masks_.empty() ? -1 : in_runtime_masks_[0]; }

  // The first input's Keras mask, or -1.
  int in_mask() const { return in_masks_.empty() ? -1 : in_masks_[0]; }

  absl::Status ReadLayer(const Json& layer, const std::vector<Handle>& inputs,
                         std::string* cls_out) {
    out_ = src_;
    const Json* cls_json = Find(layer, "class_name");
    const Json* config_json = Find(layer, "config");
    if (cls_json == nullptr || !cls_json->is_string() || config_json == nullptr ||
        !config_json->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": a layer without class_name and config: ", layer.dump()));
    }
    const std::string cls = cls_json->get<std::string>();
    *cls_out = cls;
    const Json& config = *config_json;
    std::string name = "?";
    if (const Json* n = Find(config, "name"); n != nullptr && n->is_string()) {
      name = n->get<std::string>();
    }
    LayerReader r(config, absl::StrCat(what_, ": layer \"", name, "\" (", cls, ")"));
    // trainable=False: a frozen layer (LayerSpec::trainable), as Keras
    // fine-tunes.
    trainable_ = r.Bool("trainable", true);
    // Nothing silently ignored: every key is one the reader honours or
    // checks; the dtype policy is read below (dtype_policy.h).
    if (!KnownKeys(cls).empty() || IsMerge(cls)) {
      for (const auto& [key, value] : config.items()) {
        if (!CommonKey(key) && KnownKeys(cls).count(key) == 0) {
          return r.Unsupported(absl::StrCat("the option '", key, "' (pscluster does not know it, ",
                                            "and would otherwise ignore it)"));
        }
      }
    }
    {
      std::string policy_class;
      const std::string policy = PolicyName(Find(config, "dtype"), &policy_class);
      // An input may hold integers: the ids an Embedding takes (which the
      // data check reads from integer arrays, whatever the input's dtype).
      const bool integer_input = cls == "InputLayer" && (absl::StartsWith(policy, "int") ||
                                                         absl::StartsWith(policy, "uint"));
      compute_ = compute::DType::kFloat32;
      if (!integer_input && cls == "InputLayer" && policy != "float32") {
        return r.Error(absl::StrCat("the input dtype \"", policy,
                                    "\" is not supported (float32, or integers for ids)"));
      }
      if (!integer_input && cls != "InputLayer") {
        if (policy.empty()) {
          return r.Error(absl::StrCat("the dtype policy ", policy_class,
                                      " is not supported (supported: ", kSupportedDtypePolicies,
                                      "; quantized policies are not)"));
        }
        absl::StatusOr<compute::DType> dtype = PolicyComputeDtype(policy);
        if (!dtype.ok()) return r.Error(dtype.status().message());
        compute_ = *dtype;
      }
    }
    if (!IsNull(Find(config, "quantization_config"))) return r.Unsupported("a quantized layer");
    if (cls == "BatchNormalization") {
      PSC_RETURN_IF_ERROR(r.NoExtras({"virtual_batch_size", "adjustment"}));
    }
    if (Number(&config, "lora_rank", 0) != 0) return r.Unsupported("LoRA (lora_rank)");
    if (cls == "InputLayer") {
      if (r.Bool("sparse", false) || r.Bool("ragged", false) || r.Bool("optional", false)) {
        return r.Unsupported("a sparse, ragged or optional input");
      }
      if (!inputs_.empty()) return PackedInput(r, name);
      if (has_input()) return r.Error("a second input");
      input_name_ = name;
      const std::optional<Json> shape = DeclaredInput(layer);
      if (!shape.has_value()) return r.Error("declares no batch_shape");
      return SetInput(*shape);
    }
    if (!has_input()) {
      const std::optional<Json> shape = DeclaredInput(layer);
      if (!shape.has_value()) {
        return r.Error("the model declares no input shape (an InputLayer or batch_input_shape)");
      }
      PSC_RETURN_IF_ERROR(SetInput(*shape));
    }
    if (in_mask() >= 0 && (cls == "BatchNormalization" || cls == "Softmax")) {
      return r.Unsupported(
          "a Keras mask (from Embedding(mask_zero=True) or Masking) reaching this layer, which "
          "Keras would use");
    }
    if (IsMerge(cls)) return Merge(r, name, cls, inputs);
    if (cls == "MultiHeadAttention") return AttentionLayer(r, name, layer, inputs);
    if (cls == "Dot") return DotLayer(r, name, inputs);
    if (inputs.size() > 1 && (cls == "LSTM" || cls == "GRU" || cls == "SimpleRNN")) {
      return r.Unsupported(absl::StrCat("a call with ", inputs.size() - 1,
                                        " more tensor(s) (initial_state, constants): the state "
                                        "starts at zeros here"));
    }
    if (inputs.size() > 1) {
      return r.Error(absl::StrCat("takes ", inputs.size(), " inputs; it takes one"));
    }
    if (cls == "Rescaling" || cls == "Normalization") return Transform(r, name, cls, config);
    if (cls == "Conv2D" || cls == "DepthwiseConv2D" || cls == "SeparableConv2D") {
      return Conv(r, name, cls);
    }
    if (cls == "MaxPooling2D") return Pool(r, name, cls, compute::GlobalPooling::kMax);
    if (cls == "AveragePooling2D") return Pool(r, name, cls, compute::GlobalPooling::kAverage);
    if (cls == "Flatten") {
      PSC_RETURN_IF_ERROR(r.ChannelsLast());
      if (cur_.size() != 1) matrix_ = false;  // still the 4-D tensor, seen flat
      cur_ = {ShapeSize(cur_)};
      rows_.push_back({name, cls, cur_, 0});
      return absl::OkStatus();
    }
    if (cls == "Dense") return DenseLayer(r, name);
    if (cls == "Embedding") return EmbeddingLayer(r, name);
    if (cls == "Reshape") return ReshapeLayer(r, name, cls);
    if (cls == "ZeroPadding2D") return PadLayer(r, name, cls, "padding", LayerSpec::kZeroPad);
    if (cls == "Cropping2D") return PadLayer(r, name, cls, "cropping", LayerSpec::kCrop);
    if (cls == "UpSampling2D") return UpSampleLayer(r, name);
    if (cls == "Conv2DTranspose") return ConvTranspose(r, name);
    if (cls == "ReLU") {
      if (Number(&config, "threshold", 0) != 0) return r.Unsupported("ReLU with a threshold");
      const double slope = Number(&config, "negative_slope", 0);
      if (const Json* max = Find(config, "max_value"); !IsNull(max)) {
        if (!max->is_number() || !(max->get<double>() > 0) || !std::isfinite(max->get<double>())) {
          return r.Error("'max_value' must be a number > 0");
        }
        if (slope != 0) return r.Unsupported("ReLU with both max_value and negative_slope");
        Standalone(name, cls, compute::Activation::kClippedRelu,
                   static_cast<float>(max->get<double>()));
        return absl::OkStatus();
      }
      if (slope != 0) {
        Standalone(name, cls, compute::Activation::kLeakyRelu, static_cast<float>(slope));
        return absl::OkStatus();
      }
      return Activation(r, name, cls, "relu");
    }
    if (cls == "ELU") {  // the layer's alpha (default 1)
      Standalone(name, cls, compute::Activation::kElu,
                 static_cast<float>(Number(&config, "alpha", 1.0)));
      return absl::OkStatus();
    }
    if (cls == "LeakyReLU") {  // Keras 3 negative_slope, Keras 2 alpha; default 0.3
      const double slope = Number(&config, "negative_slope", Number(&config, "alpha", 0.3));
      Standalone(name, cls, compute::Activation::kLeakyRelu, static_cast<float>(slope));
      return absl::OkStatus();
    }
    if (cls == "GlobalAveragePooling2D") {
      return GlobalPooling(r, name, cls, compute::GlobalPooling::kAverage);
    }
    if (cls == "GlobalMaxPooling2D" || cls == "GlobalMaxPooling1D") {
      return GlobalPooling(r, name, cls, compute::GlobalPooling::kMax);
    }
    if (cls == "GlobalAveragePooling1D" && in_mask() >= 0) return MaskedMeanLayer(r, name);
    if (cls == "GlobalAveragePooling1D") {
      return GlobalPooling(r, name, cls, compute::GlobalPooling::kAverage);
    }
    if (cls == "Dropout") return DropoutLayer(r, name);
    if (cls == "BatchNormalization") return BatchNorm(r, name);
    if (cls == "Activation") {
      PSC_ASSIGN_OR_RETURN(const std::string act, r.Activation());
      return Activation(r, name, cls, act);
    }
    if (cls == "Softmax") {
      // Over one axis (counted with the batch as 0; negative from the end).
      const Json* axis = Find(config, "axis");
      const int64_t rank = static_cast<int64_t>(cur_.size()) + 1;
      if (!IsNull(axis) && axis->is_array() && axis->size() == 1) axis = &(*axis)[0];
      int64_t a = rank - 1;
      if (!IsNull(axis)) {
        if (!axis->is_number_integer() || axis->get<int64_t>() < -(rank - 1) ||
            axis->get<int64_t>() == 0 || axis->get<int64_t>() >= rank) {
          return r.Unsupported(absl::StrCat("axis ", axis->dump(), " (supported: one axis of ",
                                            ShapeText(cur_), " but the batch)"));
        }
        a = axis->get<int64_t>() < 0 ? rank + axis->get<int64_t>() : axis->get<int64_t>();
      }
      if (a == rank - 1 || (cur_.size() == 1 && !matrix_))
        return Activation(r, name, cls, "softmax");
      // Another axis: moved last, the softmax, and back (a swap undoes itself).
      std::vector<int> swap(cur_.size());
      for (size_t i = 0; i < swap.size(); ++i) swap[i] = static_cast<int>(i);
      std::swap(swap[a - 1], swap.back());
      const Shape shape = cur_;
      LayerSpec to{LayerSpec::kPermute, name + "/to_last"};
      to.perm = swap;
      Push(to);
      src_ = out_;
      LayerSpec f{LayerSpec::kActivation, name};
      f.activation = compute::Activation::kSoftmax;
      Push(f);
      src_ = out_;
      LayerSpec back{LayerSpec::kPermute, name + "/from_last"};
      back.perm = swap;
      Push(back);
      rows_.push_back({name, cls, shape, 0});
      return absl::OkStatus();
    }
    if (cls == "Conv1D") return Conv1DLayer(r, name);
    if (cls == "MaxPooling1D") return Pool1D(r, name, cls, compute::GlobalPooling::kMax);
    if (cls == "AveragePooling1D") return Pool1D(r, name, cls, compute::GlobalPooling::kAverage);
    if (cls == "LayerNormalization") return LayerNormLayer(r, name);
    if (cls == "EinsumDense") return EinsumDenseLayer(r, name);
    if (cls == "Permute") return PermuteLayer(r, name);
    if (cls == "LSTM" || cls == "GRU" || cls == "SimpleRNN") return RecurrentLayer(r, name, cls);
    if (cls == "Bidirectional") return BidirectionalLayer(r, name, config);
    if (cls == "RepeatVector") return RepeatLayer(r, name);
    if (cls == "Masking") return MaskingLayer(r, name);
    return r.Unsupported("this layer");
  }

 public:
  absl::StatusOr<Model> Finish(std::string model_name) {
    if (!has_input()) {
      return absl::InvalidArgumentError(absl::StrCat(what_, ": the model has no layers"));
    }
    if (out_mask_ >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what_,
          ": a Keras mask (from Embedding(mask_zero=True) or Masking) reaches the model's output, "
          "where Keras would mask the loss: not supported (a pooling or an LSTM without "
          "return_sequences before the output ends the mask)"));
    }
    SplitInputGradientActivations();
    PSC_ASSIGN_OR_RETURN(const bool output_softmax, FoldOutputSoftmax());
    FuseRelus();
    const bool dense = !layers_.empty() && layers_.back().kind == LayerSpec::kDense;
    const bool dot = !layers_.empty() && layers_.back().kind == LayerSpec::kDot;
    if ((!dense && !dot) || cur_.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          what_,
          ": the model must end in a Dense layer (the classes' logits or softmax; one sigmoid or "
          "logit unit for binary_crossentropy), or in a Dot of two (K,) inputs (one logit or "
          "value, as a matrix factorization's), of an output (units,)",
          cur_.size() != 1 ? absl::StrCat("; its output is ", ShapeText(cur_),
                                          ": a Flatten or a global pooling before the last Dense "
                                          "makes it (units,)")
                           : ""));
    }
    // One input of ids: read as a packed input of one (data::PackInputs
    // checks the ids).
    if (inputs_.empty()) {
      for (const LayerSpec& l : layers_) {
        if (l.kind == LayerSpec::kEmbedding && l.sources == std::vector<int>{0}) {
          inputs_.push_back({input_name_, input_, 0});
          break;
        }
      }
    }
    PSC_ASSIGN_OR_RETURN(Model model,
                         Model::Build(std::move(model_name), input_, std::move(layers_),
                                      std::move(rows_), output_softmax));
    model.set_input_transform(transform_);
    model.set_inputs(inputs_);
    return model;
  }

 private:
  // A Rescaling or Normalization layer: the model's input transform, read
  // as the examples are (model.h), so only as the first layer.
  absl::Status Transform(const LayerReader& r, const std::string& name, const std::string& cls,
                         const Json& config) {
    if (!rows_.empty() || transform_.kind != InputTransform::Kind::kNone || src_ != 0 ||
        input_consumers_ != 1) {
      return r.Unsupported(
          "a Rescaling or Normalization layer other than the first layer after the input");
    }
    InputTransform t;
    t.layer = name;
    auto number = [&](const Json* j, const char* key) -> absl::StatusOr<float> {
      if (j == nullptr || !j->is_number() || !std::isfinite(j->get<double>())) {
        return r.Error(absl::StrCat("'", key, "' must be a finite number"));
      }
      return static_cast<float>(j->get<double>());
    };
    if (cls == "Rescaling") {
      t.kind = InputTransform::Kind::kRescale;
      PSC_ASSIGN_OR_RETURN(t.scale, number(Find(config, "scale"), "scale"));
      if (const Json* o = Find(config, "offset"); !IsNull(o)) {
        PSC_ASSIGN_OR_RETURN(t.offset, number(o, "offset"));
      }
    } else {
      t.kind = InputTransform::Kind::kNormalize;
      if (r.Bool("invert", false)) return r.Unsupported("invert=True");
      const Json* mean = Find(config, "mean");
      const Json* variance = Find(config, "variance");
      if (IsNull(mean) || IsNull(variance)) {
        return r.Error(
            "has no mean and variance in its config (an adapt()ed layer keeps them as weights, "
            "which pscluster does not read): build it as Normalization(mean=..., variance=...)");
      }
      // axis: None or [] (one value), -1 or [-1] or [rank] (the last axis).
      const Json* axis = Find(config, "axis");
      bool last = false;
      const int64_t rank = static_cast<int64_t>(cur_.size()) + 1;  // with the batch
      auto is_last = [&](const Json& a) {
        return a.is_number_integer() && (a.get<int64_t>() == -1 || a.get<int64_t>() == rank - 1);
      };
      if (IsNull(axis) || (axis->is_array() && axis->empty())) {
        last = false;
      } else if (is_last(*axis) || (axis->is_array() && axis->size() == 1 && is_last((*axis)[0]))) {
        last = true;
      } else {
        return r.Unsupported(absl::StrCat("axis ", axis->dump(), " (supported: -1, None)"));
      }
      const int64_t features = last ? cur_.back() : 1;
      for (const auto& [j, out, key] :
           {std::tuple{mean, &t.mean, "mean"}, std::tuple{variance, &t.variance, "variance"}}) {
        const Json list = j->is_array() ? *j : Json::array({*j});
        if (!(list.size() == 1 || static_cast<int64_t>(list.size()) == features)) {
          return r.Error(absl::StrCat("'", key, "' holds ", list.size(), " values for ", features,
                                      " features"));
        }
        for (const Json& v : list) {
          PSC_ASSIGN_OR_RETURN(const float f, number(&v, key));
          if (std::string(key) == "variance" && f < 0) {
            return r.Error("'variance' must not be negative");
          }
          out->push_back(f);
        }
      }
    }
    transform_ = std::move(t);
    rows_.push_back({name, cls, cur_, 0});
    return absl::OkStatus();
  }

  // Conv2D (with dilation_rate and groups), DepthwiseConv2D (a
  // convolution of C groups, depth_multiplier filters each) and
  // SeparableConv2D (that depthwise convolution, then a 1x1 one to
  // `filters` with the bias and the activation: two layers here, whose
  // variables are the Keras layer's three).
  absl::Status Conv(const LayerReader& r, const std::string& name, const std::string& cls) {
    if (cur_.size() != 3) {
      return r.Error(
          absl::StrCat("needs a (height, width, channels) input; it gets ", ShapeText(cur_)));
    }
    const bool separable = cls == "SeparableConv2D";
    const bool depthwise = separable || cls == "DepthwiseConv2D";
    const int64_t c = cur_[2];
    int64_t filters = 0, groups = 1, multiplier = 1;
    constexpr int64_t kMax = int64_t{1} << 20;
    if (depthwise) {
      if (!IsNull(r.Get("depth_multiplier"))) {
        PSC_ASSIGN_OR_RETURN(multiplier, r.Int("depth_multiplier"));
      }
      if (multiplier > kMax) {
        return r.Error(absl::StrCat("'depth_multiplier' ", multiplier, " is over ", kMax));
      }
      filters = c * multiplier;
      groups = c;
      if (const Json* g = r.Get("groups"); !IsNull(g) && !(g->is_number_integer() && *g == 1)) {
        return r.Unsupported("'groups' (Keras 2's, always 1 here)");
      }
    } else {
      PSC_ASSIGN_OR_RETURN(filters, r.Int("filters"));
      if (!IsNull(r.Get("groups"))) {
        PSC_ASSIGN_OR_RETURN(groups, r.Int("groups"));
      }
      if (c % groups != 0 || filters % groups != 0) {
        return r.Error(absl::StrCat("its ", c, " input channels and ", filters,
                                    " filters must both be divisible by groups=", groups,
                                    " (as Keras requires)"));
      }
    }
    PSC_RETURN_IF_ERROR(r.ChannelsLast());
    const char* init_key = depthwise ? "depthwise_initializer" : "kernel_initializer";
    if (depthwise) {
      PSC_RETURN_IF_ERROR(
          r.NoExtras({"depthwise_regularizer", "pointwise_regularizer", "bias_regularizer",
                      "activity_regularizer", "depthwise_constraint", "pointwise_constraint",
                      "bias_constraint"}));
    } else {
      PSC_RETURN_IF_ERROR(
          r.NoExtras({"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                      "kernel_constraint", "bias_constraint", "lora_rank"}));
    }
    PSC_ASSIGN_OR_RETURN(const std::string act, r.Activation());
    PSC_ASSIGN_OR_RETURN(Window window, ConvWindowOf(r));
    window.groups = groups;
    const int64_t taps = window.height * window.width;
    if (separable) {
      PSC_ASSIGN_OR_RETURN(const int64_t pointwise, r.Int("filters"));
      LayerSpec d{LayerSpec::kConv, name, c, filters, false};
      d.depthwise = true;
      d.window = window;
      d.bias = false;
      d.kernel_variable = name + "/depthwise_kernel";
      PSC_ASSIGN_OR_RETURN(d.kernel_init, r.Init(init_key, Initializer{}));
      PSC_ASSIGN_OR_RETURN(const Shape mid, Spatial(r, window, filters));
      Push(d);
      cur_ = mid;
      // The 1x1 convolution after it: Keras's pointwise kernel and bias.
      LayerSpec l{LayerSpec::kConv, name + "/pointwise", filters, pointwise, act == "relu"};
      l.window = {1, 1, 1, 1, Padding::kValid};
      l.kernel_variable = name + "/pointwise_kernel";
      l.bias_variable = name + "/bias";
      l.sources = {out_};
      l.bias = r.Bool("use_bias", true);
      if (act != "relu" && act != "linear") {
        PSC_ASSIGN_OR_RETURN(l.activation, Elementwise(r, act, &l.alpha));
      }
      PSC_ASSIGN_OR_RETURN(l.kernel_init, r.Init("pointwise_initializer", Initializer{}));
      PSC_ASSIGN_OR_RETURN(l.bias_init,
                           r.Init("bias_initializer", Initializer{Initializer::Kind::kZeros}));
      Push(l);
      cur_ = {mid[0], mid[1], pointwise};
      rows_.push_back({name, cls, cur_,
                       taps * filters + filters * pointwise + (l.bias ? pointwise : 0),
                       l.bias ? 3 : 2});
      matrix_ = false;
      return absl::OkStatus();
    }
    LayerSpec l{LayerSpec::kConv, name, c, filters, act == "relu"};
    l.depthwise = depthwise;
    l.window = window;
    l.bias = r.Bool("use_bias", true);
    if (act != "relu" && act != "linear") {
      PSC_ASSIGN_OR_RETURN(l.activation, Elementwise(r, act, &l.alpha));
    }
    PSC_ASSIGN_OR_RETURN(l.kernel_init, r.Init(init_key, Initializer{}));
    PSC_ASSIGN_OR_RETURN(l.bias_init,
                         r.Init("bias_initializer", Initializer{Initializer::Kind::kZeros}));
    PSC_ASSIGN_OR_RETURN(const Shape out, Spatial(r, l.window, filters));
    Push(l);
    cur_ = out;
    rows_.push_back(
        {name, cls, cur_, taps * (c / groups) * filters + (l.bias ? filters : 0), l.bias ? 2 : 1});
    matrix_ = false;
    return absl::OkStatus();
  }

  // The window of a Conv2D's kernel or a pooling layer: its size, strides
  // and padding ("valid" unless the config says "same"), each in [1, 2^20].
  static absl::StatusOr<Window> WindowOf(const LayerReader& r, std::pair<int64_t, int64_t> size,
                                         std::pair<int64_t, int64_t> strides) {
    constexpr int64_t kMax = int64_t{1} << 20;
    for (int64_t v : {size.first, size.second, strides.first, strides.second}) {
      if (v < 1 || v > kMax) {
        return r.Error(absl::StrCat("window (", size.first, ", ", size.second, ") with strides (",
                                    strides.first, ", ", strides.second,
                                    "): sizes and strides must be in [1, ", kMax, "]"));
      }
    }
    const std::string padding = r.String("padding", "valid");
    if (padding != "same" && padding != "valid") {
      return r.Unsupported(absl::StrCat("padding \"", padding, "\" (supported: same, valid)"));
    }
    return Window{size.first, size.second, strides.first, strides.second,
                  padding == "same" ? Padding::kSame : Padding::kValid};
  }

  // A convolution's window: kernel_size, strides (default 1), padding and
  // dilation_rate (default 1, each in [1, 2^20]).
  static absl::StatusOr<Window> ConvWindowOf(const LayerReader& r) {
    PSC_ASSIGN_OR_RETURN(const auto kernel, r.Pair("kernel_size"));
    std::pair<int64_t, int64_t> strides{1, 1}, dilation{1, 1};
    if (!IsNull(r.Get("strides"))) {
      PSC_ASSIGN_OR_RETURN(strides, r.Pair("strides"));
    }
    constexpr int64_t kMax = int64_t{1} << 20;
    if (!IsNull(r.Get("dilation_rate"))) {
      PSC_ASSIGN_OR_RETURN(dilation, r.Pair("dilation_rate"));
      if (dilation.first < 1 || dilation.second < 1 || dilation.first > kMax ||
          dilation.second > kMax) {
        return r.Error(absl::StrCat("'dilation_rate' (", dilation.first, ", ", dilation.second,
                                    ") must be in [1, ", kMax, "]"));
      }
    }
    PSC_ASSIGN_OR_RETURN(Window window, WindowOf(r, kernel, strides));
    window.dilation_h = dilation.first;
    window.dilation_w = dilation.second;
    return window;
  }

  // The (height, width, channels) output of `window` on the current input,
  // or an error naming both when it leaves nothing.
  absl::StatusOr<Shape> Spatial(const LayerReader& r, const Window& window,
                                int64_t channels) const {
    const int64_t oh = window.Rows(cur_[0]).out, ow = window.Cols(cur_[1]).out;
    if (oh < 1 || ow < 1) {
      return r.Error(absl::StrCat("its ", window.Text(), " window leaves no output of its ",
                                  ShapeText(cur_), " input"));
    }
    return Shape{oh, ow, channels};
  }

  absl::Status Pool(const LayerReader& r, const std::string& name, const std::string& cls,
                    compute::GlobalPooling kind) {
    if (cur_.size() != 3) {
      return r.Error(
          absl::StrCat("needs a (height, width, channels) input; it gets ", ShapeText(cur_)));
    }
    PSC_ASSIGN_OR_RETURN(const auto pool, r.Pair("pool_size"));
    std::pair<int64_t, int64_t> strides = pool;  // Keras: strides default to pool_size
    if (!IsNull(r.Get("strides"))) {
      PSC_ASSIGN_OR_RETURN(strides, r.Pair("strides"));
    }
    PSC_RETURN_IF_ERROR(r.ChannelsLast());
    LayerSpec l{LayerSpec::kPool, name, cur_[2], cur_[2], false};
    l.pooling = kind;
    PSC_ASSIGN_OR_RETURN(l.window, WindowOf(r, pool, strides));
    PSC_ASSIGN_OR_RETURN(const Shape out, Spatial(r, l.window, cur_[2]));
    Push(l);
    cur_ = out;
    rows_.push_back({name, cls, cur_, 0});
    return absl::OkStatus();
  }

  absl::Status BatchNorm(const LayerReader& r, const std::string& name) {
    if (cur_.size() == 1 && !matrix_) {
      src_ = Flattened(src_, name);  // a flattened (H, W, C) tensor, made (features,)
      matrix_ = true;
    }
    const int64_t last = static_cast<int64_t>(cur_.size());  // the axis index with the batch
    if (const Json* axis = r.Get("axis"); !IsNull(axis)) {
      const Json* a = axis;
      if (axis->is_array()) {
        if (axis->size() != 1) return r.Unsupported("normalizing over several axes");
        a = &(*axis)[0];
      }
      if (!a->is_number_integer() || (a->get<int64_t>() != -1 && a->get<int64_t>() != last)) {
        return r.Unsupported(
            absl::StrCat("axis ", axis->dump(), " (supported: the last axis, -1 or ", last, ")"));
      }
    }
    if (r.Bool("synchronized", false)) {
      return r.Unsupported(
          "synchronized=True (SyncBatchNormalization): each replica normalizes with its own "
          "batch, as under MirroredStrategy");
    }
    if (r.Bool("renorm", false)) return r.Unsupported("renorm=True");
    PSC_RETURN_IF_ERROR(r.NoExtras({"beta_regularizer", "gamma_regularizer", "beta_constraint",
                                    "gamma_constraint", "virtual_batch_size", "adjustment"}));
    const int64_t c = cur_.back();
    LayerSpec l{LayerSpec::kBatchNorm, name, c, c, false};
    l.momentum = static_cast<float>(r.Num("momentum", 0.99));
    l.epsilon = r.Num("epsilon", 1e-3);
    if (!(l.momentum >= 0 && l.momentum < 1) || !(l.epsilon > 0) || !std::isfinite(l.epsilon)) {
      return r.Error(absl::StrCat("momentum ", l.momentum, " must be in [0, 1) and epsilon ",
                                  l.epsilon, " > 0"));
    }
    l.scale = r.Bool("scale", true);
    l.center = r.Bool("center", true);
    PSC_ASSIGN_OR_RETURN(l.gamma_init, r.Init("gamma_initializer", l.gamma_init));
    PSC_ASSIGN_OR_RETURN(l.beta_init, r.Init("beta_initializer", l.beta_init));
    PSC_ASSIGN_OR_RETURN(l.moving_mean_init, r.Init("moving_mean_initializer", l.moving_mean_init));
    PSC_ASSIGN_OR_RETURN(l.moving_variance_init,
                         r.Init("moving_variance_initializer", l.moving_variance_init));
    Push(l);
    const int vars = (l.scale ? 1 : 0) + (l.center ? 1 : 0) + 2;
    rows_.push_back({name, "BatchNormalization", cur_, vars * c, vars});
    return absl::OkStatus();
  }

  absl::Status DenseLayer(const LayerReader& r, const std::string& name) {
    PSC_ASSIGN_OR_RETURN(const int64_t units, r.Int("units"));
    if (units > (int64_t{1} << 30) || cur_.back() > (int64_t{1} << 30)) {  // the product < 2^60
      return r.Error(absl::StrCat("a kernel of ", cur_.back(), " x ", units,
                                  " is over what a variable may hold"));
    }
    PSC_RETURN_IF_ERROR(
        r.NoExtras({"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                    "kernel_constraint", "bias_constraint", "lora_rank"}));
    PSC_ASSIGN_OR_RETURN(const std::string act, r.Activation());
    // On (features,), or as Keras on the last axis of (steps, features) or
    // (height, width, channels): every step or pixel through one kernel.
    LayerSpec l{LayerSpec::kDense, name, cur_.back(), units, act == "relu"};
    if (cur_.size() > 1) {
      l.target = cur_;
      l.target.back() = units;
      l.axis = 1;  // the last axis
    }
    l.bias = r.Bool("use_bias", true);
    if (act != "relu" && act != "linear") {
      PSC_ASSIGN_OR_RETURN(l.activation, Elementwise(r, act, &l.alpha));
    }
    PSC_ASSIGN_OR_RETURN(l.kernel_init, r.Init("kernel_initializer", Initializer{}));
    PSC_ASSIGN_OR_RETURN(l.bias_init,
                         r.Init("bias_initializer", Initializer{Initializer::Kind::kZeros}));
    Push(l);
    if (l.target.empty()) {
      cur_ = {units};
    } else {
      cur_ = l.target;
    }
    rows_.push_back({name, "Dense", cur_, l.inputs * units + (l.bias ? units : 0), l.bias ? 2 : 1});
    matrix_ = true;
    return absl::OkStatus();
  }

  // Conv1D over (steps, channels): a convolution of a one-row window
  // (LayerGraph holds the sequence as a (1, steps, channels) image), its
  // kernel Keras's [K, C / groups, filters]. padding "causal" is the left
  // padding of (K - 1) x dilation zeros Keras adds, then "valid".
  absl::Status Conv1DLayer(const LayerReader& r, const std::string& name) {
    if (cur_.size() != 2) {
      return r.Error(absl::StrCat("needs a (steps, channels) input; it gets ", ShapeText(cur_)));
    }
    const int64_t c = cur_[1];
    PSC_ASSIGN_OR_RETURN(const int64_t filters, r.Int("filters"));
    int64_t groups = 1;
    if (!IsNull(r.Get("groups"))) {
      PSC_ASSIGN_OR_RETURN(groups, r.Int("groups"));
    }
    if (c % groups != 0 || filters % groups != 0) {
      return r.Error(absl::StrCat("its ", c, " input channels and ", filters,
                                  " filters must both be divisible by groups=", groups));
    }
    constexpr int64_t kMaxChannels = int64_t{1} << 20;  // k, c, filters: the kernel below 2^60
    if (filters > kMaxChannels || c > kMaxChannels) {
      return r.Error(absl::StrCat("its ", c, " channels and ", filters, " filters must be at most ",
                                  kMaxChannels));
    }
    PSC_RETURN_IF_ERROR(r.ChannelsLast());
    PSC_RETURN_IF_ERROR(
        r.NoExtras({"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                    "kernel_constraint", "bias_constraint", "lora_rank"}));
    PSC_ASSIGN_OR_RETURN(const std::string act, r.Activation());
    PSC_ASSIGN_OR_RETURN(const int64_t k, r.Single("kernel_size"));
    PSC_ASSIGN_OR_RETURN(const int64_t stride, r.Single("strides", 1));
    PSC_ASSIGN_OR_RETURN(const int64_t dilation, r.Single("dilation_rate", 1));
    const std::string padding = r.String("padding", "valid");
    if (padding != "valid" && padding != "same" && padding != "causal") {
      return r.Unsupported(
          absl::StrCat("padding \"", padding, "\" (supported: valid, same, causal)"));
    }
    Window window{1, k,        1,     stride, padding == "same" ? Padding::kSame : Padding::kValid,
                  1, dilation, groups};
    int64_t steps = cur_[0];
    if (padding == "causal") {
      LayerSpec pad{LayerSpec::kZeroPad, name + "/causal"};
      pad.pads = {0, 0, (k - 1) * dilation, 0};  // k, dilation <= 2^20: no overflow
      Push(pad);
      src_ = out_;
      steps += (k - 1) * dilation;
    }
    const int64_t out = window.Cols(steps).out;
    if (out < 1) {
      return r.Error(absl::StrCat("its ", window.Text(), " window leaves no output of its ",
                                  ShapeText(cur_), " input"));
    }
    LayerSpec l{LayerSpec::kConv, name, c, filters, act == "relu"};
    l.window = window;
    l.bias = r.Bool("use_bias", true);
    if (act != "relu" && act != "linear") {
      PSC_ASSIGN_OR_RETURN(l.activation, Elementwise(r, act, &l.alpha));
    }
    PSC_ASSIGN_OR_RETURN(l.kernel_init, r.Init("kernel_initializer", Initializer{}));
    PSC_ASSIGN_OR_RETURN(l.bias_init,
                         r.Init("bias_initializer", Initializer{Initializer::Kind::kZeros}));
    l.kernel_shape = {k, c / groups, filters};
    Push(l);
    cur_ = {out, filters};
    rows_.push_back({name, "Conv1D", cur_, k * (c / groups) * filters + (l.bias ? filters : 0),
                     l.bias ? 2 : 1});
    matrix_ = true;
    return absl::OkStatus();
  }

  // MaxPooling1D and AveragePooling1D over (steps, channels): a pooling of
  // a one-row window.
  absl::Status Pool1D(const LayerReader& r, const std::string& name, const std::string& cls,
                      compute::GlobalPooling kind) {
    if (cur_.size() != 2) {
      return r.Error(absl::StrCat("needs a (steps, channels) input; it gets ", ShapeText(cur_)));
    }
    PSC_RETURN_IF_ERROR(r.ChannelsLast());
    PSC_ASSIGN_OR_RETURN(const int64_t pool, r.Single("pool_size", 2));
    PSC_ASSIGN_OR_RETURN(const int64_t stride, r.Single("strides", pool));
    LayerSpec l{LayerSpec::kPool, name, cur_[1], cur_[1], false};
    l.pooling = kind;
    PSC_ASSIGN_OR_RETURN(l.window, WindowOf(r, {1, pool}, {1, stride}));
    const int64_t out = l.window.Cols(cur_[0]).out;
    if (out < 1) {
      return r.Error(absl::StrCat("its ", l.window.Text(), " window leaves no output of its ",
                                  ShapeText(cur_), " input"));
    }
    Push(l);
    cur_ = {out, cur_[1]};
    rows_.push_back({name, cls, cur_, 0});
    matrix_ = true;
    return absl::OkStatus();
  }

  // LayerNormalization over trailing axes (Keras's axis: an int or a list,
  // counted with the batch as 0, negative from the end), with gamma and
  // beta of those axes' shape. rms_scaling is refused.
  absl::Status LayerNormLayer(const LayerReader& r, const std::string& name) {
    if (cur_.size() == 1 && !matrix_) {
      src_ = Flattened(src_, name);  // a flattened (H, W, C) tensor, made (features,)
      matrix_ = true;
    }
    const int64_t rank = static_cast<int64_t>(cur_.size()) + 1;
    const Json* axis = r.Get("axis");
    std::vector<int64_t> axes;
    if (IsNull(axis)) {
      axes.push_back(rank - 1);
    } else {
      const Json list = axis->is_array() ? *axis : Json::array({*axis});
      for (const Json& a : list) {
        if (!a.is_number_integer() || a.get<int64_t>() < -(rank - 1) || a.get<int64_t>() == 0 ||
            a.get<int64_t>() >= rank) {
          return r.Error(absl::StrCat("axis ", axis->dump(), " is not axes of ", ShapeText(cur_),
                                      " (the batch is axis 0)"));
        }
        axes.push_back(a.get<int64_t>() < 0 ? rank + a.get<int64_t>() : a.get<int64_t>());
      }
      std::sort(axes.begin(), axes.end());
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(i)) {
        return r.Unsupported(absl::StrCat("axis ", axis->dump(),
                                          " (supported: the last axes, e.g. -1 or [-2, -1])"));
      }
    }
    if (r.Bool("rms_scaling", false)) return r.Unsupported("rms_scaling=True");
    PSC_RETURN_IF_ERROR(r.NoExtras(
        {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"}));
    LayerSpec l{LayerSpec::kLayerNorm, name};
    l.axis = static_cast<int>(axes.size());
    l.epsilon = r.Num("epsilon", 1e-3);
    if (!(l.epsilon > 0) || !std::isfinite(l.epsilon)) {
      return r.Error(absl::StrCat("epsilon ", l.epsilon, " must be > 0"));
    }
    l.scale = r.Bool("scale", true);
    l.center = r.Bool("center", true);
    PSC_ASSIGN_OR_RETURN(l.gamma_init, r.Init("gamma_initializer", l.gamma_init));
    PSC_ASSIGN_OR_RETURN(l.beta_init, r.Init("beta_initializer", l.beta_init));
    Push(l);
    const int64_t per = ShapeSize(Shape(cur_.end() - l.axis, cur_.end()));
    const int vars = (l.scale ? 1 : 0) + (l.center ? 1 : 0);
    rows_.push_back({name, "LayerNormalization", cur_, vars * per, vars});
    return absl::OkStatus();
  }

  // EinsumDense of the forms a dense layer has: the input's last axes
  // contracted with the kernel's first, the kernel's other axes appended
  // to the input's rest ("abc,cde->abde", "abcd,cde->abe", "...b,bc->...c",
  // MultiHeadAttention's projections), the bias (bias_axes) over exactly
  // the kernel's appended axes or none. A dense layer on the last axes
  // (LayerSpec::target), its kernel and bias in Keras's shapes.
  absl::Status EinsumDenseLayer(const LayerReader& r, const std::string& name) {
    if (cur_.size() == 1 && !matrix_) {
      src_ = Flattened(src_, name);
      matrix_ = true;
    }
    const std::string equation = r.String("equation", "");
    auto refuse = [&](absl::string_view why) {
      return r.Unsupported(
          absl::StrCat("equation \"", equation, "\" (", why,
                       "; supported: the input's last axes contracted with the "
                       "kernel's first, as \"abc,cd->abd\" or \"abc,cde->abde\")"));
    };
    const size_t comma = equation.find(','), arrow = equation.find("->");
    if (comma == std::string::npos || arrow == std::string::npos || arrow < comma) {
      return refuse("not \"input,kernel->output\"");
    }
    std::string in = equation.substr(0, comma),
                kernel = equation.substr(comma + 1, arrow - comma - 1),
                out = equation.substr(arrow + 2);
    // "..." stands for the batch and any leading axes; explicit letters
    // name the batch first.
    const bool ellipsis = absl::StartsWith(in, "...");
    if (ellipsis != absl::StartsWith(out, "...")) return refuse("\"...\" in one side only");
    if (ellipsis) {
      in = in.substr(3);
      out = out.substr(3);
    } else {
      if (in.empty() || out.empty() || in[0] != out[0]) return refuse("no shared batch axis first");
      in = in.substr(1);
      out = out.substr(1);
    }
    for (const std::string* part : {&in, &kernel, &out}) {
      for (char ch : *part) {
        if (!(ch >= 'a' && ch <= 'z') && !(ch >= 'A' && ch <= 'Z')) return refuse("not letters");
      }
    }
    if (in.size() > cur_.size() || (!ellipsis && in.size() != cur_.size())) {
      return refuse(absl::StrCat("its input is ", ShapeText(cur_)));
    }
    // Each letter names one axis: none repeated on a side, and the batch's
    // (explicit letters) on no other.
    const std::string batch = ellipsis ? "" : equation.substr(0, 1);
    for (const std::string* part : {&in, &kernel, &out}) {
      std::string seen = batch;
      for (char ch : *part) {
        if (seen.find(ch) != std::string::npos) return refuse("a letter repeated");
        seen.push_back(ch);
      }
    }
    // in = kept + contracted, kernel = contracted + made, out = kept + made.
    size_t kept = 0;
    while (kept < in.size() && kernel.find(in[kept]) == std::string::npos) ++kept;
    const std::string contracted = in.substr(kept);
    if (contracted.empty() || kernel.substr(0, contracted.size()) != contracted ||
        out.substr(0, kept) != in.substr(0, kept)) {
      return refuse("not a dense layer's form");
    }
    const std::string made = kernel.substr(contracted.size());
    if (made.empty() || out.substr(kept) != made) return refuse("not a dense layer's form");
    for (char ch : made) {
      if (in.find(ch) != std::string::npos) return refuse("not a dense layer's form");
    }
    const Json* shape = r.Get("output_shape");
    const Json shape_list = IsNull(shape)       ? Json::array()
                            : shape->is_array() ? *shape
                                                : Json::array({*shape});
    if (shape_list.size() < made.size()) {
      return r.Error(absl::StrCat("'output_shape' ", IsNull(shape) ? "null" : shape->dump(),
                                  " does not give the kernel's ", made.size(), " output axes"));
    }
    const size_t lead = cur_.size() - in.size();  // the axes "..." stands for
    Shape target(cur_.begin(), cur_.begin() + static_cast<std::ptrdiff_t>(lead + kept));
    Shape kernel_shape(cur_.begin() + static_cast<std::ptrdiff_t>(lead + kept), cur_.end());
    Shape made_shape;
    for (size_t i = shape_list.size() - made.size(); i < shape_list.size(); ++i) {
      const Json& d = shape_list[i];
      if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > (int64_t{1} << 24)) {
        return r.Error(absl::StrCat("'output_shape' ", shape->dump(),
                                    " needs the kernel's output axes in [1, 2^24]"));
      }
      made_shape.push_back(d.get<int64_t>());
    }
    int64_t k = 1, m = 1;
    for (int64_t d : kernel_shape) k *= d;  // the input's axes: bounded (< 2^40), no overflow
    for (int64_t d : made_shape) {
      if (m > (int64_t{1} << 40) / d) return r.Error("the kernel's output axes hold over 2^40");
      m *= d;
    }
    if (m > (int64_t{1} << 40) / k) {
      return r.Error(absl::StrCat("a kernel of ", k, " x ", m, " values is over 2^40"));
    }
    kernel_shape.insert(kernel_shape.end(), made_shape.begin(), made_shape.end());
    target.insert(target.end(), made_shape.begin(), made_shape.end());
    PSC_RETURN_IF_ERROR(
        r.NoExtras({"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                    "kernel_constraint", "bias_constraint", "lora_rank"}));
    if (!IsNull(r.Get("quantization_config"))) return r.Unsupported("a quantized layer");
    PSC_ASSIGN_OR_RETURN(const std::string act, r.Activation());
    LayerSpec l{LayerSpec::kDense, name, k, m, act == "relu"};
    l.target = target;
    l.axis = static_cast<int>(contracted.size());
    l.kernel_shape = kernel_shape;
    const std::string bias_axes = r.String("bias_axes", "");
    if (!bias_axes.empty() && bias_axes != made) {
      return r.Unsupported(absl::StrCat("bias_axes \"", bias_axes, "\" (supported: none, or \"",
                                        made, "\": the kernel's output axes)"));
    }
    l.bias = !bias_axes.empty();
    if (l.bias) l.bias_shape = made_shape;
    if (act != "relu" && act != "linear") {
      PSC_ASSIGN_OR_RETURN(l.activation, Elementwise(r, act, &l.alpha));
    }
    PSC_ASSIGN_OR_RETURN(l.kernel_init, r.Init("kernel_initializer", Initializer{}));
    PSC_ASSIGN_OR_RETURN(l.bias_init,
                         r.Init("bias_initializer", Initializer{Initializer::Kind::kZeros}));
    Push(l);
    cur_ = target;
    rows_.push_back({name, "EinsumDense", cur_, k * m + (l.bias ? m : 0), l.bias ? 2 : 1});
    matrix_ = true;
    return absl::OkStatus();
  }

  // MultiHeadAttention over the steps of (steps, features) inputs, as the
  // layers Keras 3 computes it with: the query, key and value EinsumDense
  // projections to (steps, heads, key_dim), the query scaled by 1 /
  // sqrt(key_dim), the heads moved first, the scores (heads, T, S) of one
  // product per head, a causal mask or one from an input (kMask), the
  // softmax over the keys, dropout, the context (heads, T, value_dim), the
  // heads moved back and the output EinsumDense. Its variables are Keras's,
  // named "<name>/query/kernel", ..., in its sublayers' groups of the
  // weights file. The call's tensors come from the node: query and value
  // (the args, or kwargs), key (default: value), attention_mask (a model
  // input of (T, S), 1 where a query may attend to a key).
  absl::Status AttentionLayer(const LayerReader& r, const std::string& name, const Json& layer,
                              const std::vector<Handle>& inputs) {
    const Json* nodes = Find(layer, "inbound_nodes");
    const Json* node =
        nodes != nullptr && nodes->is_array() && nodes->size() == 1 ? &(*nodes)[0] : nullptr;
    const Json* args = node == nullptr || !node->is_object() ? nullptr : Find(*node, "args");
    if (args == nullptr || !args->is_array()) {
      return r.Error("needs a functional model's call of it (Keras 3's inbound_nodes)");
    }
    // The handles are in InboundNames's order: the args' tensors, then the
    // kwargs' in key order. Each tensor's role from where it stands.
    std::map<std::string, const Handle*> role;
    size_t next = 0;
    auto take = [&](const Json& j, const std::string& what) -> absl::Status {
      std::vector<std::string> names;
      InboundNames(j, &names);
      if (names.size() != 1 || next >= inputs.size()) {
        return r.Error(absl::StrCat("its ", what, " is not one tensor"));
      }
      role[what] = &inputs[next++];
      return absl::OkStatus();
    };
    static constexpr const char* kPositional[] = {"query", "value", "key"};
    if (args->size() > 3) return r.Error("takes more than (query, value, key) positionally");
    for (size_t i = 0; i < args->size(); ++i) PSC_RETURN_IF_ERROR(take((*args)[i], kPositional[i]));
    bool causal = false;
    if (const Json* kwargs = Find(*node, "kwargs"); kwargs != nullptr && kwargs->is_object()) {
      for (const auto& [key, value] : kwargs->items()) {
        if (value.is_null()) continue;  // Keras's defaults, written by some versions
        if (key == "query" || key == "value" || key == "key" || key == "attention_mask") {
          if (role.count(key) != 0) return r.Error(absl::StrCat("gets '", key, "' twice"));
          PSC_RETURN_IF_ERROR(take(value, key));
        } else if (key == "use_causal_mask") {
          if (!value.is_boolean()) return r.Error("'use_causal_mask' is not a boolean");
          causal = value.get<bool>();
        } else if (key == "return_attention_scores") {
          if (!value.is_boolean() || value.get<bool>()) {
            return r.Unsupported("return_attention_scores=True (a second output)");
          }
        } else if (key == "training") {
          if (!IsNull(&value)) return r.Unsupported("a call with training= set");
        } else {
          return r.Unsupported(absl::StrCat("the call argument '", key, "'"));
        }
      }
    }
    if (next != inputs.size() || role.count("query") == 0 || role.count("value") == 0) {
      return r.Error(
          "needs its query and value tensors (and no others but key and "
          "attention_mask)");
    }
    const Handle& q = *role["query"];
    const Handle& v = *role["value"];
    const Handle& k = role.count("key") != 0 ? *role["key"] : v;
    for (const auto& [what, h] :
         {std::pair{"query", &q}, std::pair{"value", &v}, std::pair{"key", &k}}) {
      if (h->shape.size() != 2) {
        return r.Unsupported(absl::StrCat("a ", what, " of shape ", ShapeText(h->shape),
                                          " (supported: (steps, features))"));
      }
    }
    if (k.shape[0] != v.shape[0]) {
      return r.Error(absl::StrCat("its key ", ShapeText(k.shape), " and value ", ShapeText(v.shape),
                                  " differ in steps"));
    }
    // The options: Keras's defaults; rank-3 inputs attend over axis 1.
    PSC_ASSIGN_OR_RETURN(const int64_t heads, r.Int("num_heads"));
    PSC_ASSIGN_OR_RETURN(const int64_t key_dim, r.Int("key_dim"));
    int64_t value_dim = key_dim;
    if (!IsNull(r.Get("value_dim"))) {
      PSC_ASSIGN_OR_RETURN(value_dim, r.Int("value_dim"));
    }
    constexpr int64_t kMaxDim = int64_t{1} << 16;
    if (heads > kMaxDim || key_dim > kMaxDim || value_dim > kMaxDim) {
      return r.Error(absl::StrCat("num_heads, key_dim and value_dim must be at most ", kMaxDim));
    }
    const double dropout = r.Num("dropout", 0.0);
    if (!(dropout >= 0 && dropout < 1)) return r.Error("'dropout' must be in [0, 1)");
    if (r.Bool("use_gate", false)) return r.Unsupported("use_gate=True");
    if (!IsNull(r.Get("sliding_window"))) return r.Unsupported("a sliding_window");
    if (const Json* axes = r.Get("attention_axes"); !IsNull(axes)) {
      const Json list = axes->is_array() ? *axes : Json::array({*axes});
      const bool steps =
          list.size() == 1 && list[0].is_number_integer() && list[0].get<int64_t>() == 1;
      if (!steps) {
        return r.Unsupported(absl::StrCat("attention_axes ", axes->dump(), " (supported: [1])"));
      }
    }
    PSC_RETURN_IF_ERROR(
        r.NoExtras({"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                    "kernel_constraint", "bias_constraint"}));
    Shape out_dims = {q.shape[1]};
    if (const Json* o = r.Get("output_shape"); !IsNull(o)) {
      const Json list = o->is_array() ? *o : Json::array({*o});
      out_dims.clear();
      for (const Json& d : list) {
        if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > kMaxDim) {
          return r.Error(absl::StrCat("'output_shape' ", o->dump(), " must hold integers in [1, ",
                                      kMaxDim, "]"));
        }
        out_dims.push_back(d.get<int64_t>());
      }
      if (out_dims.empty() || out_dims.size() > 2) {
        return r.Unsupported(absl::StrCat("output_shape ", o->dump(), " (one or two axes)"));
      }
      if (out_dims.size() == 2 && out_dims[0] * out_dims[1] > (int64_t{1} << 24)) {
        return r.Error(absl::StrCat("'output_shape' ", o->dump(), " holds over 2^24 values"));
      }
    }
    const Handle* mask = role.count("attention_mask") != 0 ? role["attention_mask"] : nullptr;
    if (mask != nullptr) {
      const bool input = mask->tensor >= 1 && layers_[mask->tensor - 1].kind == LayerSpec::kInput;
      if (!input || mask->shape != Shape{q.shape[0], v.shape[0]}) {
        return r.Unsupported(
            absl::StrCat("an attention_mask of shape ", ShapeText(mask->shape),
                         " that is not a model input of (query steps, value steps) = (", q.shape[0],
                         ", ", v.shape[0], ")"));
      }
    }
    for (int64_t d : {q.shape[1], k.shape[1], v.shape[1]}) {  // the parameters stay < 2^60
      if (d > (int64_t{1} << 24)) return r.Error(absl::StrCat(d, " features are over 2^24"));
    }
    if (mask != nullptr) {  // the data check holds its values to 0 and 1
      for (ModelInput& in : inputs_) {
        if (in.name == layers_[mask->tensor - 1].name) in.mask = true;
      }
    }
    const bool bias = r.Bool("use_bias", true);
    PSC_ASSIGN_OR_RETURN(const Initializer kernel_init,
                         r.Init("kernel_initializer", Initializer{}));
    PSC_ASSIGN_OR_RETURN(const Initializer bias_init,
                         r.Init("bias_initializer", Initializer{Initializer::Kind::kZeros}));
    int64_t out_size = 1;
    for (int64_t d : out_dims) out_size *= d;  // each <= 2^16: no overflow
    // An EinsumDense of the last axes (LayerSpec::target): its layer's output.
    auto project = [&](const std::string& sub, int source, int64_t in, int64_t made, Shape target,
                       Shape kernel, Shape bias_shape) {
      LayerSpec l{LayerSpec::kDense, name + "/" + sub, in, made, false};
      l.target = std::move(target);
      l.axis = sub == "attention_output" ? 2 : 1;  // (heads, value_dim), or the features
      l.kernel_shape = std::move(kernel);
      l.bias = bias;
      if (bias) l.bias_shape = std::move(bias_shape);
      l.kernel_init = kernel_init;
      l.bias_init = bias_init;
      l.sources = {source};
      Push(l);
      return out_;
    };
    auto layer_of = [&](LayerSpec l, std::vector<int> sources) {
      l.sources = std::move(sources);
      Push(l);
      return out_;
    };
    const int64_t t = q.shape[0], s = v.shape[0];
    const int qp = project("query", q.tensor, q.shape[1], heads * key_dim, {t, heads, key_dim},
                           {q.shape[1], heads, key_dim}, {heads, key_dim});
    const int kp = project("key", k.tensor, k.shape[1], heads * key_dim, {s, heads, key_dim},
                           {k.shape[1], heads, key_dim}, {heads, key_dim});
    const int vp = project("value", v.tensor, v.shape[1], heads * value_dim, {s, heads, value_dim},
                           {v.shape[1], heads, value_dim}, {heads, value_dim});
    LayerSpec scale{LayerSpec::kScale, name + "/scale"};
    scale.alpha = static_cast<float>(1.0 / std::sqrt(static_cast<double>(key_dim)));
    const int qs = layer_of(scale, {qp});
    LayerSpec heads_first{LayerSpec::kPermute, ""};
    heads_first.perm = {1, 0, 2};
    heads_first.name = name + "/query_heads";
    const int qh = layer_of(heads_first, {qs});
    heads_first.name = name + "/key_heads";
    const int kh = layer_of(heads_first, {kp});
    heads_first.name = name + "/value_heads";
    const int vh = layer_of(heads_first, {vp});
    LayerSpec scores{LayerSpec::kDot, name + "/scores"};
    scores.dot_axes = {2, 2};  // (heads, T, key_dim) . (heads, S, key_dim)
    int probs = layer_of(scores, {qh, kh});
    // Keras's masks: the query's, and the value's AND the key's (a key
    // given apart; the product of 0/1 values).
    // (Their masks as Keras's runtime has them: Handle::runtime_mask.)
    int value_mask = v.runtime_mask;
    if (role.count("key") != 0 && k.runtime_mask >= 0) {
      if (value_mask < 0) {
        value_mask = k.runtime_mask;
      } else {
        LayerSpec both{LayerSpec::kMultiply, name + "/key_value_mask"};
        both.keras_mask = true;
        value_mask = layer_of(both, {v.runtime_mask, k.runtime_mask});
      }
    }
    if (causal || mask != nullptr || q.runtime_mask >= 0 || value_mask >= 0) {
      LayerSpec m{LayerSpec::kMask, name + "/mask"};
      m.causal = causal;
      std::vector<int> sources = {probs};
      if (mask != nullptr) sources.push_back(mask->tensor);
      m.query_mask = q.runtime_mask >= 0;
      if (m.query_mask) sources.push_back(q.runtime_mask);
      m.value_mask = value_mask >= 0;
      if (m.value_mask) sources.push_back(value_mask);
      probs = layer_of(m, sources);
    }
    LayerSpec softmax{LayerSpec::kActivation, name + "/softmax"};
    softmax.activation = compute::Activation::kSoftmax;
    probs = layer_of(softmax, {probs});
    if (dropout > 0) {
      LayerSpec d{LayerSpec::kDropout, name + "/dropout"};
      d.rate = dropout;
      probs = layer_of(d, {probs});
    }
    LayerSpec context{LayerSpec::kDot, name + "/context"};
    context.dot_axes = {2, 1};  // (heads, T, S) . (heads, S, value_dim)
    const int ctx = layer_of(context, {probs, vh});
    LayerSpec heads_back{LayerSpec::kPermute, name + "/context_heads"};
    heads_back.perm = {1, 0, 2};
    const int ch = layer_of(heads_back, {ctx});
    Shape target = {t};
    target.insert(target.end(), out_dims.begin(), out_dims.end());
    Shape kernel = {heads, value_dim};
    kernel.insert(kernel.end(), out_dims.begin(), out_dims.end());
    project("attention_output", ch, heads * value_dim, out_size, target, kernel, out_dims);
    cur_ = target;
    matrix_ = true;
    const int64_t params = (q.shape[1] + k.shape[1]) * heads * key_dim +
                           v.shape[1] * heads * value_dim + heads * value_dim * out_size +
                           (bias ? 2 * heads * key_dim + heads * value_dim + out_size : 0);
    out_mask_ = q.mask;  // Keras's output keeps the query's
    out_runtime_mask_ = q.runtime_mask;
    mask_set_ = runtime_set_ = true;
    compute::SummaryRow row{name, "MultiHeadAttention", cur_, params, bias ? 8 : 4};
    for (const char* sub : {"query_dense", "key_dense", "value_dense", "output_dense"}) {
      for (int i = 0; i < (bias ? 2 : 1); ++i) row.sublayers.push_back(sub);
    }
    rows_.push_back(std::move(row));
    return absl::OkStatus();
  }

  // An LSTM's, a GRU's or a SimpleRNN's spec (`cls`) from its config (the
  // layer's own, or a Bidirectional's forward or backward layer's), named
  // `spec_name`, on the current (steps, features) input; *params: its
  // parameters.
  absl::StatusOr<LayerSpec> RecurrentSpec(const LayerReader& r, const std::string& cls,
                                          const std::string& spec_name, int64_t* params,
                                          bool state = false) const {
    const bool gru = cls == "GRU", simple = cls == "SimpleRNN";
    if (cur_.size() != 2) {
      return r.Error(absl::StrCat("needs a (steps, features) input; it gets ", ShapeText(cur_)));
    }
    PSC_ASSIGN_OR_RETURN(const int64_t units, r.Int("units"));
    if (units > (int64_t{1} << 20)) {
      return r.Error(absl::StrCat("'units' ", units, " is over 2^20"));
    }
    PSC_ASSIGN_OR_RETURN(const std::string act, r.Activation());
    std::optional<compute::Activation> f;
    float alpha = 0;
    if (simple && act == "relu") {
      f = compute::Activation::kRelu;
    } else if (simple && act != "linear") {
      PSC_ASSIGN_OR_RETURN(f, Elementwise(r, act, &alpha));
    }
    PSC_ASSIGN_OR_RETURN(const std::string rec, simple ? absl::StatusOr<std::string>("sigmoid")
                                                       : r.Activation("recurrent_activation"));
    if ((act != "tanh" && !simple) || rec != "sigmoid") {
      return r.Unsupported(absl::StrCat("activation \"", act, "\" with recurrent_activation \"",
                                        rec, "\" (supported: tanh and sigmoid, Keras's defaults)"));
    }
    if (r.Bool("return_state", false) && !state) {
      return r.Unsupported("return_state=True in a Bidirectional or a Sequential model");
    }
    if (r.Bool("stateful", false)) return r.Unsupported("stateful=True");
    if (r.Num("dropout", 0) != 0 || r.Num("recurrent_dropout", 0) != 0) {
      return r.Unsupported(absl::StrCat("dropout or recurrent_dropout in an ", cls,
                                        " (a Dropout layer is supported)"));
    }
    if (r.Bool("time_major", false)) return r.Unsupported("time_major=True");
    PSC_RETURN_IF_ERROR(r.NoExtras({"kernel_regularizer", "recurrent_regularizer",
                                    "bias_regularizer", "activity_regularizer", "kernel_constraint",
                                    "recurrent_constraint", "bias_constraint"}));
    LayerSpec l{gru      ? LayerSpec::kGRU
                : simple ? LayerSpec::kSimpleRNN
                         : LayerSpec::kLSTM,
                spec_name, cur_[1], units};
    l.activation = f;
    l.alpha = alpha;
    l.reset_after = !gru || r.Bool("reset_after", true);
    l.return_sequences = r.Bool("return_sequences", false);
    l.go_backwards = r.Bool("go_backwards", false);
    l.bias = r.Bool("use_bias", true);
    PSC_ASSIGN_OR_RETURN(l.kernel_init, r.Init("kernel_initializer", Initializer{}));
    PSC_ASSIGN_OR_RETURN(
        l.recurrent_init,
        r.Init("recurrent_initializer", Initializer{Initializer::Kind::kOrthogonal, 1.0}));
    PSC_ASSIGN_OR_RETURN(l.bias_init,
                         r.Init("bias_initializer", Initializer{Initializer::Kind::kZeros}));
    if (!gru && !simple && l.bias && r.Bool("unit_forget_bias", true)) {
      if (l.bias_init.kind != Initializer::Kind::kZeros) {
        return r.Unsupported("unit_forget_bias=True with a bias_initializer other than zeros");
      }
      l.bias_init = Initializer{Initializer::Kind::kUnitForgetBias, static_cast<double>(units)};
    }
    *params = gru      ? 3 * units * (cur_[1] + units + (l.bias ? (l.reset_after ? 2 : 1) : 0))
              : simple ? units * (cur_[1] + units + (l.bias ? 1 : 0))
                       : 4 * units * (cur_[1] + units + (l.bias ? 1 : 0));
    return l;
  }

  // LSTM, GRU or SimpleRNN over (steps, features): one layer of its kind; its
  // variables in Keras's "cell" sublayer of the weights file.
  absl::Status RecurrentLayer(const LayerReader& r, const std::string& name,
                              const std::string& cls) {
    int64_t params = 0;
    PSC_ASSIGN_OR_RETURN(LayerSpec l, RecurrentSpec(r, cls, name, &params, functional_));
    const bool return_state = r.Bool("return_state", false);
    if (in_mask() >= 0) {
      l.sources = {src_, in_mask()};
      // Keras's zero_output_for_mask: a masked step outputs zeros.
      if (r.Bool("zero_output_for_mask", false)) {
        if (!l.return_sequences) {
          return r.Unsupported(
              "zero_output_for_mask=True with a mask and return_sequences=False (the last "
              "output zeros where the last step is masked)");
        }
        if (return_state) {
          return r.Unsupported(
              "zero_output_for_mask=True with return_state=True (the state is not the last "
              "output where the last step is masked)");
        }
        l.zero_masked = true;
      }
    }
    Push(l);
    if (return_state) {
      states_[name] = {cls, out_, cur_[0], l.outputs, l.return_sequences, compute_};
    }
    out_mask_ = l.return_sequences ? in_mask() : -1;
    mask_set_ = true;
    cur_ = l.return_sequences ? Shape{cur_[0], l.outputs} : Shape{l.outputs};
    matrix_ = true;
    const int vars = l.bias ? 3 : 2;
    compute::SummaryRow row{name, cls, cur_, params, vars};
    row.sublayers.assign(vars, "cell");
    rows_.push_back(std::move(row));
    return absl::OkStatus();
  }

  // Bidirectional(LSTM, GRU or SimpleRNN): the forward layer and the backward one (Keras's
  // go_backwards copy), each on the input, the backward's sequence put back
  // in the input's order, merged by merge_mode (concat, sum, ave, mul).
  // Their variables: "<name>/forward_lstm/lstm_cell/kernel", ...; in the
  // weights file "forward_layer/cell" and "backward_layer/cell".
  absl::Status BidirectionalLayer(const LayerReader& r, const std::string& name,
                                  const Json& config) {
    const Json* forward = Find(config, "layer");
    const Json* backward = Find(config, "backward_layer");
    auto inner = [&](const Json* j, const char* what) -> absl::StatusOr<const Json*> {
      const Json* cls = j == nullptr ? nullptr : Find(*j, "class_name");
      const Json* c = j == nullptr ? nullptr : Find(*j, "config");
      if (cls == nullptr || !cls->is_string() || c == nullptr || !c->is_object()) {
        return r.Error(absl::StrCat("has no '", what, "' layer config"));
      }
      const std::string inner_cls = cls->get<std::string>();
      if (inner_cls != "LSTM" && inner_cls != "GRU" && inner_cls != "SimpleRNN") {
        return r.Unsupported(
            absl::StrCat("a Bidirectional ", inner_cls, " (supported: LSTM, GRU, SimpleRNN)"));
      }
      for (const auto& [key, value] : c->items()) {  // nothing silently ignored
        if (!CommonKey(key) && KnownKeys(inner_cls).count(key) == 0) {
          return r.Unsupported(absl::StrCat("the option '", key, "' of its ", what));
        }
      }
      // Its dtype policy must be the wrapper's, which its steps compute in
      // (a Bidirectional is built under one policy).
      std::string policy_class;
      const std::string policy = PolicyName(Find(*c, "dtype"), &policy_class);
      absl::StatusOr<compute::DType> dtype =
          policy.empty() ? absl::InvalidArgumentError(absl::StrCat(
                               "the dtype policy ", policy_class, " is not supported (supported: ",
                               kSupportedDtypePolicies, "; quantized policies are not)"))
                         : PolicyComputeDtype(policy);
      if (!dtype.ok()) return r.Error(absl::StrCat("its ", what, ": ", dtype.status().message()));
      if (*dtype != compute_) {
        return r.Unsupported(absl::StrCat("a ", what, " computing in ", compute::DTypeName(*dtype),
                                          " inside a Bidirectional computing in ",
                                          compute::DTypeName(compute_)));
      }
      return c;
    };
    PSC_ASSIGN_OR_RETURN(const Json* fc, inner(forward, "layer"));
    if (const Json* m = r.Get("merge_mode"); m != nullptr && m->is_null()) {
      return r.Unsupported("merge_mode=None (the two directions as two outputs)");
    }
    const std::string mode = r.String("merge_mode", "concat");
    if (mode != "concat" && mode != "sum" && mode != "ave" && mode != "mul") {
      return r.Unsupported(absl::StrCat("merge_mode \"", mode,
                                        "\" (supported: concat, sum, ave, "
                                        "mul)"));
    }
    const std::string prefix = absl::StrCat(what_, ": layer \"", name, "\" (Bidirectional)");
    auto name_of = [](const Json& c, const std::string& fallback) {
      const Json* n = Find(c, "name");
      return n != nullptr && n->is_string() ? n->get<std::string>() : fallback;
    };
    const int src = src_;
    int64_t params_f = 0, params_b = 0;
    LayerReader fr(*fc, prefix + " forward layer");
    const std::string cls = Find(*forward, "class_name")->get<std::string>();
    const std::string lower = cls == "GRU" ? "gru" : cls == "SimpleRNN" ? "simple_rnn" : "lstm";
    // Keras names the two layers "forward_<its name>" and "backward_<its
    // name>" (Keras 3 drops a prefix the name already has; Keras 2 adds it
    // to both whatever they are called).
    auto prefixed = [&](absl::string_view p, std::string n) {
      if (!keras2_ && absl::StartsWith(n, p)) return n;
      return absl::StrCat(p, n);
    };
    const std::string inner_name = name_of(*fc, lower);
    PSC_ASSIGN_OR_RETURN(
        LayerSpec f,
        RecurrentSpec(fr, cls, name + "/" + prefixed("forward_", inner_name), &params_f));
    Json bc_json;
    const Json* bc = nullptr;
    if (!IsNull(backward)) {
      PSC_ASSIGN_OR_RETURN(bc, inner(backward, "backward_layer"));
    } else {  // Keras copies the forward layer going backwards (Keras 2: flipped)
      bc_json = *fc;
      bc_json["go_backwards"] = !keras2_ || !fr.Bool("go_backwards", false);
      bc_json["name"] =
          absl::StrCat("backward_", keras2_ || !absl::StartsWith(inner_name, "backward_")
                                        ? inner_name
                                        : inner_name.substr(std::string("backward_").size()));
      bc = &bc_json;
    }
    LayerReader br(*bc, prefix + " backward layer");
    // Keras takes a backward layer of another recurrent class too.
    const std::string bcls =
        IsNull(backward) ? cls : Find(*backward, "class_name")->get<std::string>();
    const std::string blower = bcls == "GRU" ? "gru" : bcls == "SimpleRNN" ? "simple_rnn" : "lstm";
    PSC_ASSIGN_OR_RETURN(
        LayerSpec bw,
        RecurrentSpec(
            br, bcls,
            name + "/" +
                (IsNull(backward) ? name_of(*bc, "") : prefixed("backward_", name_of(*bc, blower))),
            &params_b));
    if (bw.outputs != f.outputs || bw.return_sequences != f.return_sequences ||
        bw.go_backwards == f.go_backwards) {
      return r.Error(
          "its backward layer must have its forward layer's units and return_sequences, and go "
          "the other way");
    }
    bw.unreverse = true;
    f.unreverse = true;
    f.sources = {src};
    bw.sources = {src};
    if (in_mask() >= 0) {  // Keras zeroes both directions' masked outputs
      f.sources.push_back(in_mask());
      bw.sources.push_back(in_mask());
      f.zero_masked = bw.zero_masked = f.return_sequences;
    }
    Push(f);
    const int fo = out_;
    Push(bw);
    const int bo = out_;
    Shape out = f.return_sequences ? Shape{cur_[0], f.outputs} : Shape{f.outputs};
    LayerSpec merge{mode == "concat" ? LayerSpec::kConcat
                    : mode == "sum"  ? LayerSpec::kAdd
                    : mode == "ave"  ? LayerSpec::kAverage
                                     : LayerSpec::kMultiply,
                    name + "/merge"};
    merge.axis = static_cast<int>(out.size()) - 1;
    merge.sources = {fo, bo};
    Push(merge);
    if (mode == "concat") out.back() *= 2;
    out_mask_ = f.return_sequences ? in_mask() : -1;
    mask_set_ = true;
    cur_ = out;
    matrix_ = true;
    const int vars_f = f.bias ? 3 : 2, vars_b = bw.bias ? 3 : 2;
    compute::SummaryRow row{name, "Bidirectional", cur_, params_f + params_b, vars_f + vars_b};
    row.sublayers.assign(vars_f, "forward_layer/cell");
    row.sublayers.insert(row.sublayers.end(), vars_b, "backward_layer/cell");
    rows_.push_back(std::move(row));
    return absl::OkStatus();
  }

  // Permute(dims): the example's axes reordered (Keras counts them from 1).
  absl::Status PermuteLayer(const LayerReader& r, const std::string& name) {
    const Json* dims = r.Get("dims");
    const size_t rank = cur_.size();
    std::vector<int> perm;
    std::vector<bool> seen(rank, false);
    bool fits = dims != nullptr && dims->is_array() && dims->size() == rank;
    for (size_t i = 0; fits && i < rank; ++i) {
      const Json& d = (*dims)[i];
      fits = d.is_number_integer() && d.get<int64_t>() >= 1 &&
             d.get<int64_t>() <= static_cast<int64_t>(rank) && !seen[d.get<int64_t>() - 1];
      if (fits) {
        seen[d.get<int64_t>() - 1] = true;
        perm.push_back(static_cast<int>(d.get<int64_t>() - 1));
      }
    }
    if (!fits) {
      return r.Error(absl::StrCat("'dims' ", dims == nullptr ? "null" : dims->dump(),
                                  " is not a permutation of the axes 1..", rank, " of ",
                                  ShapeText(cur_)));
    }
    Shape out(rank);
    for (size_t i = 0; i < rank; ++i) out[i] = cur_[perm[i]];
    bool identity = true;
    for (size_t i = 0; i < rank; ++i) identity = identity && perm[i] == static_cast<int>(i);
    if (!identity) {
      LayerSpec l{LayerSpec::kPermute, name};
      l.perm = perm;
      Push(l);
      matrix_ = true;
    }
    cur_ = out;
    rows_.push_back({name, "Permute", cur_, 0});
    return absl::OkStatus();
  }

  // RepeatVector(n): a (features,) input, n times: (n, features).
  absl::Status RepeatLayer(const LayerReader& r, const std::string& name) {
    if (cur_.size() == 1 && !matrix_) {
      src_ = Flattened(src_, name);  // a Flatten's output, made (features,)
      matrix_ = true;
    }
    if (cur_.size() != 1) {
      return r.Error(absl::StrCat("needs a (features,) input; it gets ", ShapeText(cur_)));
    }
    PSC_ASSIGN_OR_RETURN(const int64_t n, r.Int("n"));
    if (n > (int64_t{1} << 20)) return r.Error(absl::StrCat("'n' ", n, " is over 2^20"));
    LayerSpec l{LayerSpec::kRepeat, name, cur_[0], n};
    Push(l);
    cur_ = {n, cur_[0]};
    matrix_ = true;
    rows_.push_back({name, "RepeatVector", cur_, 0});
    return absl::OkStatus();
  }

  // An Embedding: the rows of its table for the ids of a model input (the
  // model's, or one of several), its output the input's shape and one more
  // axis of output_dim.
  absl::Status EmbeddingLayer(const LayerReader& r, const std::string& name) {
    if (src_ != 0 && layers_[src_ - 1].kind != LayerSpec::kInput) {
      return r.Error(
          "takes another layer's output; pscluster's Embedding takes a model input of ids "
          "(keras.Input(..., dtype=\"int32\"))");
    }
    PSC_ASSIGN_OR_RETURN(const int64_t input_dim, r.Int("input_dim"));
    PSC_ASSIGN_OR_RETURN(const int64_t output_dim, r.Int("output_dim"));
    PSC_RETURN_IF_ERROR(r.NoExtras(
        {"embeddings_regularizer", "activity_regularizer", "embeddings_constraint", "lora_rank"}));
    const bool mask_zero = r.Bool("mask_zero", false);
    if (mask_zero && cur_.size() != 1) {
      return r.Unsupported(absl::StrCat("mask_zero=True on ids of shape ", ShapeText(cur_),
                                        " (supported: a sequence of ids, (steps,))"));
    }
    if (r.Bool("sparse", false)) return r.Unsupported("sparse=True");
    if (const Json* length = r.Get("input_length"); !IsNull(length)) {  // Keras 2
      const bool fits =
          length->is_number_integer() && cur_.size() == 1 && length->get<int64_t>() == cur_[0];
      if (!fits) {
        return r.Error(absl::StrCat("input_length ", length->dump(), " does not match its input ",
                                    ShapeText(cur_)));
      }
    }
    LayerSpec l{LayerSpec::kEmbedding, name, input_dim, output_dim};
    PSC_ASSIGN_OR_RETURN(l.kernel_init,
                         r.Init("embeddings_initializer",
                                Initializer{Initializer::Kind::kRandomUniform, -0.05, 0.05}));
    if (l.kernel_init.kind == Initializer::Kind::kOrthogonal) {
      // A table's rows are drawn each on its own stream, by the servers.
      return r.Unsupported("embeddings_initializer Orthogonal");
    }
    const int ids = src_;
    Push(l);
    if (mask_zero) {  // kept where the id is not 0
      const int rows = out_;
      LayerSpec m{LayerSpec::kSequenceMask, name + "/mask", 1};
      m.alpha = 0;
      m.keras_mask = true;
      m.sources = {ids};
      Push(m);
      out_mask_ = out_;
      mask_set_ = true;
      out_ = rows;
    }
    cur_.push_back(output_dim);
    matrix_ = false;
    rows_.push_back({name, "Embedding", cur_, input_dim * output_dim, 1});
    return absl::OkStatus();
  }

  // sigmoid, tanh or leaky_relu (Keras's activation of that name: slope
  // 0.2); *alpha gets the slope.
  absl::StatusOr<compute::Activation> Elementwise(const LayerReader& r, const std::string& act,
                                                  float* alpha) const {
    using compute::Activation;
    if (act == "sigmoid") return Activation::kSigmoid;
    if (act == "tanh") return Activation::kTanh;
    if (act == "leaky_relu") {
      *alpha = 0.2f;
      return Activation::kLeakyRelu;
    }
    if (act == "elu") {  // the activation's default alpha
      *alpha = 1.0f;
      return Activation::kElu;
    }
    if (act == "selu") return Activation::kSelu;
    if (act == "softplus") return Activation::kSoftplus;
    if (act == "softsign") return Activation::kSoftsign;
    if (act == "exponential") return Activation::kExponential;
    if (act == "gelu") return Activation::kGelu;  // Keras's approximate=False
    if (act == "silu" || act == "swish") return Activation::kSilu;
    if (act == "softmax") return Activation::kSoftmax;  // over the last axis
    if (act == "relu6") {
      *alpha = 6.0f;
      return Activation::kClippedRelu;
    }
    // Keras 3 redefined it: relu6(x + 3) / 6; Keras 2's is clip(0.2 x + 0.5).
    if (act == "hard_sigmoid")
      return keras2_ ? Activation::kHardSigmoidKeras2 : Activation::kHardSigmoid;
    return r.Unsupported(absl::StrCat(
        "activation \"", act,
        "\" (supported: linear, relu, relu6, sigmoid, hard_sigmoid, tanh, leaky_relu, elu, selu, "
        "softplus, softsign, exponential, gelu, silu, swish, softmax)"));
  }

  // A layer applying `f` (not fused: its own output).
  void Standalone(const std::string& name, const std::string& cls, compute::Activation f,
                  float alpha) {
    // A softmax is over the last axis: a flattened (H, W, C) view becomes a
    // (features,) tensor first (an elementwise activation needs no copy).
    if (f == compute::Activation::kSoftmax && cur_.size() == 1 && !matrix_) {
      src_ = Flattened(src_, name);
      matrix_ = true;
    }
    LayerSpec l{LayerSpec::kActivation, name};
    l.activation = f;
    l.alpha = alpha;
    Push(l);
    rows_.push_back({name, cls, cur_, 0});
  }

  absl::Status GlobalPooling(const LayerReader& r, const std::string& name, const std::string& cls,
                             compute::GlobalPooling kind) {
    if (absl::EndsWith(cls, "1D")) {
      // Over the steps of (steps, channels), held as a (1, steps, channels)
      // image (LayerGraph::BatchShape).
      if (cur_.size() != 2) {
        return r.Error(absl::StrCat("needs a (steps, channels) input; it gets ", ShapeText(cur_)));
      }
    } else if (cur_.size() != 3) {
      return r.Error(
          absl::StrCat("needs a (height, width, channels) input; it gets ", ShapeText(cur_)));
    }
    PSC_RETURN_IF_ERROR(r.ChannelsLast());
    if (r.Bool("keepdims", false)) return r.Unsupported("keepdims=True");
    LayerSpec l{LayerSpec::kGlobalPool, name};
    l.pooling = kind;
    Push(l);
    cur_ = {cur_.back()};
    rows_.push_back({name, cls, cur_, 0});
    matrix_ = true;
    return absl::OkStatus();
  }

  // Reshape(target_shape): a kFlatten layer copying the values with the
  // new shape (one -1 is inferred, as Keras infers it); to (features,),
  // (steps, features) or (height, width, channels), the shapes the other
  // layers take.
  absl::Status ReshapeLayer(const LayerReader& r, const std::string& name, const std::string& cls) {
    const Json* t = r.Get("target_shape");
    if (t == nullptr || !t->is_array() || t->empty()) {
      return r.Error("'target_shape' must be a list of integers");
    }
    if (t->size() < 1 || t->size() > 3) {
      return r.Unsupported(absl::StrCat("a Reshape to ", t->dump(), " (rank ", t->size(),
                                        "; the layers take rank 1, 2 or 3)"));
    }
    // The values are the input's: the product of the dimensions must be
    // its size, so any product past it (or past 64 bits) is an error.
    const int64_t size = ShapeSize(cur_);
    auto cannot = [&] {
      return r.Error(
          absl::StrCat("cannot reshape ", ShapeText(cur_), " (", size, " values) to ", t->dump()));
    };
    std::vector<int64_t> target;
    int unknown = -1;
    int64_t known = 1;
    for (const Json& d : *t) {
      if (!d.is_number_integer() || (d.get<int64_t>() < 1 && d.get<int64_t>() != -1)) {
        return r.Error(absl::StrCat("'target_shape' ", t->dump(),
                                    " must hold integers >= 1 (and at most one -1)"));
      }
      const int64_t dim = d.get<int64_t>();
      if (dim == -1) {
        if (unknown >= 0) return r.Error(absl::StrCat("'target_shape' ", t->dump(), " has two -1"));
        unknown = static_cast<int>(target.size());
      } else {
        if (dim > size / known) return cannot();  // known * dim > size, without overflow
        known *= dim;
      }
      target.push_back(dim);
    }
    if (unknown >= 0) {
      if (size % known != 0) return cannot();
      target[unknown] = size / known;
    } else if (known != size) {
      return cannot();
    }
    LayerSpec l{LayerSpec::kFlatten, name};
    l.target = target;
    Push(l);
    cur_ = target;
    rows_.push_back({name, cls, cur_, 0});
    matrix_ = cur_.size() == 1;
    return absl::OkStatus();
  }

  // ZeroPadding2D(padding) and Cropping2D(cropping): an int (all four
  // sides), (rows, columns) or ((top, bottom), (left, right)), as Keras
  // takes them; its config holds the last form.
  absl::Status PadLayer(const LayerReader& r, const std::string& name, const std::string& cls,
                        const char* key, LayerSpec::Kind kind) {
    if (cur_.size() != 3) {
      return r.Error(
          absl::StrCat("needs a (height, width, channels) input; it gets ", ShapeText(cur_)));
    }
    PSC_RETURN_IF_ERROR(r.ChannelsLast());
    const Json* p = r.Get(key);
    auto bad = [&] {
      return r.Error(absl::StrCat("'", key, "' ", p == nullptr ? "null" : p->dump(),
                                  " is not an int, (rows, columns) or ((top, bottom), (left, "
                                  "right)) of integers >= 0"));
    };
    auto count = [](const Json& j, int64_t* out) {
      if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() > (1 << 20)) {
        return false;
      }
      *out = j.get<int64_t>();
      return true;
    };
    std::vector<int64_t> pads(4, 0);
    if (p == nullptr) return bad();
    if (p->is_number()) {
      if (!count(*p, &pads[0])) return bad();
      pads = {pads[0], pads[0], pads[0], pads[0]};
    } else if (p->is_array() && p->size() == 2) {
      for (int axis = 0; axis < 2; ++axis) {
        const Json& a = (*p)[axis];
        if (a.is_number()) {
          if (!count(a, &pads[2 * axis])) return bad();
          pads[2 * axis + 1] = pads[2 * axis];
        } else if (!(a.is_array() && a.size() == 2 && count(a[0], &pads[2 * axis]) &&
                     count(a[1], &pads[2 * axis + 1]))) {
          return bad();
        }
      }
    } else {
      return bad();
    }
    const int sign = kind == LayerSpec::kZeroPad ? 1 : -1;
    const Shape out = {cur_[0] + sign * (pads[0] + pads[1]), cur_[1] + sign * (pads[2] + pads[3]),
                       cur_[2]};
    if (out[0] < 1 || out[1] < 1) {
      return r.Error(
          absl::StrCat("crops ", ShapeText(cur_), " by ", p->dump(), ": nothing is left"));
    }
    LayerSpec l{kind, name};
    l.pads = pads;
    Push(l);
    cur_ = out;
    rows_.push_back({name, cls, cur_, 0});
    matrix_ = false;
    return absl::OkStatus();
  }

  // Conv2DTranspose: the transposed convolution (LayerSpec::kConvTranspose),
  // then its bias and activation (kBiasAdd, "<name>/bias"), or without a
  // bias an activation layer of its own.
  absl::Status ConvTranspose(const LayerReader& r, const std::string& name) {
    if (cur_.size() != 3) {
      return r.Error(
          absl::StrCat("needs a (height, width, channels) input; it gets ", ShapeText(cur_)));
    }
    PSC_ASSIGN_OR_RETURN(const int64_t filters, r.Int("filters"));
    constexpr int64_t kMax = int64_t{1} << 20;
    if (const Json* g = r.Get("groups"); !IsNull(g) && !(g->is_number_integer() && *g == 1)) {
      return r.Unsupported("'groups' (Keras 2's, always 1 here)");
    }
    PSC_RETURN_IF_ERROR(r.ChannelsLast());
    PSC_RETURN_IF_ERROR(
        r.NoExtras({"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                    "kernel_constraint", "bias_constraint"}));
    PSC_ASSIGN_OR_RETURN(const std::string act, r.Activation());
    LayerSpec t{LayerSpec::kConvTranspose, name, cur_[2], filters};
    PSC_ASSIGN_OR_RETURN(t.window, ConvWindowOf(r));
    if (cur_[0] > kMax * kMax / t.window.stride_h || cur_[1] > kMax * kMax / t.window.stride_w) {
      return r.Error(absl::StrCat("its ", ShapeText(cur_), " input with strides (",
                                  t.window.stride_h, ", ", t.window.stride_w, ") is too large"));
    }
    PSC_ASSIGN_OR_RETURN(t.kernel_init, r.Init("kernel_initializer", Initializer{}));
    if (!IsNull(r.Get("output_padding"))) {  // the output's extent, given (Keras's rule)
      PSC_ASSIGN_OR_RETURN(const auto padding, r.Pair("output_padding"));
      if (padding.first < 0 || padding.second < 0 || padding.first >= t.window.stride_h ||
          padding.second >= t.window.stride_w) {
        return r.Error(absl::StrCat("'output_padding' (", padding.first, ", ", padding.second,
                                    ") must be at least 0 and less than the strides (",
                                    t.window.stride_h, ", ", t.window.stride_w, ")"));
      }
      t.pads = {padding.first, padding.second};
    }
    const absl::StatusOr<Shape> spatial = compute::ConvTransposeExtent(t, cur_);
    if (!spatial.ok()) return r.Error(std::string(spatial.status().message()));
    const Shape out = {(*spatial)[0], (*spatial)[1], filters};
    Push(t);
    const bool bias = r.Bool("use_bias", true);
    cur_ = out;
    matrix_ = false;
    if (bias) {
      LayerSpec b{LayerSpec::kBiasAdd, name + "/bias"};
      b.window = {1, 1, 1, 1, Padding::kValid, 1, 1, filters};
      b.bias_variable = name + "/bias";
      b.relu = act == "relu";
      if (act != "relu" && act != "linear") {
        PSC_ASSIGN_OR_RETURN(b.activation, Elementwise(r, act, &b.alpha));
      }
      PSC_ASSIGN_OR_RETURN(b.bias_init,
                           r.Init("bias_initializer", Initializer{Initializer::Kind::kZeros}));
      b.sources = {out_};
      Push(b);
    } else if (act != "linear") {
      LayerSpec a{LayerSpec::kActivation, name + "/" + act};
      if (act == "relu") {
        a.activation = compute::Activation::kRelu;
      } else {
        PSC_ASSIGN_OR_RETURN(a.activation, Elementwise(r, act, &a.alpha));
      }
      a.sources = {out_};
      Push(a);
    }
    rows_.push_back({name, "Conv2DTranspose", cur_,
                     t.window.height * t.window.width * filters * t.inputs + (bias ? filters : 0),
                     bias ? 2 : 1});
    return absl::OkStatus();
  }

  // UpSampling2D: `size` (an integer or a pair), nearest only.
  absl::Status UpSampleLayer(const LayerReader& r, const std::string& name) {
    if (cur_.size() != 3) {
      return r.Error(
          absl::StrCat("needs a (height, width, channels) input; it gets ", ShapeText(cur_)));
    }
    PSC_RETURN_IF_ERROR(r.ChannelsLast());
    const std::string interpolation = r.String("interpolation", "nearest");
    if (interpolation != "nearest") {
      return r.Unsupported(
          absl::StrCat("interpolation \"", interpolation, "\" (supported: nearest)"));
    }
    std::pair<int64_t, int64_t> size{2, 2};
    if (!IsNull(r.Get("size"))) {
      PSC_ASSIGN_OR_RETURN(size, r.Pair("size"));
    }
    constexpr int64_t kMax = int64_t{1} << 20;
    if (size.first < 1 || size.second < 1 || size.first > kMax || size.second > kMax ||
        cur_[0] > kMax * kMax / size.first || cur_[1] > kMax * kMax / size.second) {
      return r.Error(absl::StrCat("'size' (", size.first, ", ", size.second, ") must be in [1, ",
                                  kMax,
                                  "] and keep the output under 2^40 "
                                  "rows and columns"));
    }
    LayerSpec l{LayerSpec::kUpSample, name};
    l.window = {size.first, size.second, size.first, size.second, Padding::kValid, 1, 1, cur_[2]};
    Push(l);
    cur_ = {cur_[0] * size.first, cur_[1] * size.second, cur_[2]};
    rows_.push_back({name, "UpSampling2D", cur_, 0});
    matrix_ = false;
    return absl::OkStatus();
  }

  absl::Status DropoutLayer(const LayerReader& r, const std::string& name) {
    const Json* rate = r.Get("rate");
    if (rate == nullptr || !rate->is_number() || !(rate->get<double>() >= 0) ||
        !(rate->get<double>() < 1)) {
      return r.Error("'rate' must be a number in [0, 1)");
    }
    if (!IsNull(r.Get("noise_shape"))) return r.Unsupported("noise_shape");
    rows_.push_back({name, "Dropout", cur_, 0});
    if (rate->get<double>() == 0) return absl::OkStatus();  // the identity
    LayerSpec l{LayerSpec::kDropout, name};
    l.rate = rate->get<double>();
    Push(l);
    return absl::OkStatus();
  }

  absl::Status Activation(const LayerReader& r, const std::string& name, const std::string& cls,
                          const std::string& act) {
    if (act == "linear") {
      rows_.push_back({name, cls, cur_, 0});
      return absl::OkStatus();
    }
    if (act == "relu") {  // a layer; FuseRelus may apply it in the layer before
      Standalone(name, cls, compute::Activation::kRelu, 0);
      return absl::OkStatus();
    }

    float slope = 0;
    PSC_ASSIGN_OR_RETURN(const compute::Activation f, Elementwise(r, act, &slope));
    Standalone(name, cls, f, slope);
    return absl::OkStatus();
  }

  // A kFlatten layer copying `tensor` (a flattened (H, W, C) one) as
  // (features,), before the layer `name` that takes it; its tensor.
  int Flattened(int tensor, const std::string& name) {
    LayerSpec f{LayerSpec::kFlatten, name + "/flatten"};
    f.sources = {tensor};
    f.trainable = trainable_;
    f.compute = compute_;
    layers_.push_back(std::move(f));
    return static_cast<int>(layers_.size());
  }

  // Adds `l`, taking src_ unless it names its sources, as the tensor the
  // layer being read makes.
  // An InputLayer of several: a kInput layer taking its block of the
  // packed example.
  absl::Status PackedInput(const LayerReader& r, const std::string& name) {
    for (const ModelInput& in : inputs_) {
      if (in.name != name) continue;
      LayerSpec l{LayerSpec::kInput, name};
      l.sources = {0};
      l.target = in.shape;
      l.offset = in.offset;
      Push(l);
      cur_ = in.shape;
      matrix_ = cur_.size() == 1;
      return absl::OkStatus();
    }
    return r.Error("is not one of the model's input_layers");
  }

  // A Conv2D's, Dense's or bias layer's gelu or silu becomes a layer of its
  // own right after it ("<name>/gelu"), which the layers that took its
  // output now take: their gradient needs the pre-activation, which an
  // activation applied in place on the layer's output would overwrite.
  void SplitInputGradientActivations() {
    std::vector<int> renamed(layers_.size() + 1);  // old tensor id -> new
    std::vector<LayerSpec> kept;
    for (size_t i = 0; i < layers_.size(); ++i) {
      LayerSpec l = std::move(layers_[i]);
      for (int& t : l.sources) t = renamed[t];
      const bool split =
          compute::AppliesActivation(l.kind) && l.activation && GradientFromInput(*l.activation);
      LayerSpec a{LayerSpec::kActivation,
                  split ? absl::StrCat(l.name, "/", ActivationName(*l.activation)) : std::string()};
      if (split) {
        a.activation = l.activation;
        a.trainable = l.trainable;
        a.compute = l.compute;
        l.activation.reset();
      }
      kept.push_back(std::move(l));
      if (split) {
        a.sources = {static_cast<int>(kept.size())};
        kept.push_back(std::move(a));
      }
      renamed[LayerGraph::OutputOf(static_cast<int>(i))] = static_cast<int>(kept.size());
    }
    layers_ = std::move(kept);
  }

  // A softmax that ends the model is folded into the loss, as the
  // cross-entropy takes logits (Model::output_softmax): the last Dense's
  // activation="softmax", or a Softmax / Activation("softmax") layer on a
  // Dense without activation (which then ends the model: every other layer
  // leads to it). A softmax anywhere else runs as an op. True if one was
  // folded; INVALID_ARGUMENT for a final softmax on anything else.
  absl::StatusOr<bool> FoldOutputSoftmax() {
    if (layers_.empty() || layers_.back().activation != compute::Activation::kSoftmax) {
      return false;
    }
    LayerSpec& last = layers_.back();
    if (last.kind == LayerSpec::kDense && !last.relu) {
      last.activation.reset();
      return true;
    }
    const int n = static_cast<int>(layers_.size());
    if (last.kind == LayerSpec::kActivation && n >= 2 &&
        last.sources == std::vector<int>{LayerGraph::OutputOf(n - 2)} &&
        layers_[n - 2].kind == LayerSpec::kDense && !layers_[n - 2].relu &&
        !layers_[n - 2].activation) {
      layers_.pop_back();
      return true;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        what_, ": the model's output softmax (", last.name,
        ") must be a Dense's activation or follow a Dense without activation: pscluster's "
        "cross-entropy takes the logits before it"));
  }

  // Each ReLU layer (Activation("relu"), ReLU()) whose input is the output
  // of a Conv2D, a Dense or a transposed convolution's bias with no
  // activation, and that output's one consumer, is applied in place by
  // that layer (LayerSpec::relu, a oneDNN post-op on the CPU) and leaves
  // the graph; later layers' sources are renumbered. The summary keeps its
  // row.
  void FuseRelus() {
    std::vector<int> consumers(layers_.size() + 1, 0);
    for (const LayerSpec& l : layers_) {
      for (int t : l.sources) ++consumers[t];
    }
    std::vector<int> renamed(layers_.size() + 1);  // old tensor id -> new
    std::vector<LayerSpec> kept;
    for (size_t i = 0; i < layers_.size(); ++i) {
      LayerSpec& l = layers_[i];
      const bool relu = l.kind == LayerSpec::kActivation && l.sources.size() == 1 &&
                        l.activation == compute::Activation::kRelu;
      const int source = l.sources.empty() ? 0 : l.sources[0];
      for (int& t : l.sources) t = renamed[t];
      if (relu && source >= 1 && consumers[source] == 1) {
        LayerSpec& before = kept[l.sources[0] - 1];  // the source's producer
        if (compute::AppliesActivation(before.kind) && !before.relu && !before.activation) {
          before.relu = true;
          renamed[LayerGraph::OutputOf(static_cast<int>(i))] = l.sources[0];
          continue;
        }
      }
      kept.push_back(std::move(l));
      renamed[LayerGraph::OutputOf(static_cast<int>(i))] = static_cast<int>(kept.size());
    }
    layers_ = std::move(kept);
  }

  // GlobalAveragePooling1D of a masked sequence: the mean over its kept
  // steps (kMaskedMean).
  absl::Status MaskedMeanLayer(const LayerReader& r, const std::string& name) {
    if (cur_.size() != 2) {
      return r.Error(absl::StrCat("needs a (steps, channels) input; it gets ", ShapeText(cur_)));
    }
    PSC_RETURN_IF_ERROR(r.ChannelsLast());
    if (r.Bool("keepdims", false)) return r.Unsupported("keepdims=True");
    LayerSpec l{LayerSpec::kMaskedMean, name};
    l.sources = {src_, in_mask()};
    Push(l);
    cur_ = {cur_.back()};
    rows_.push_back({name, "GlobalAveragePooling1D", cur_, 0});
    matrix_ = true;
    mask_set_ = true;  // none after it
    return absl::OkStatus();
  }

  // Masking(mask_value): a step whose features all equal mask_value is
  // masked, and zeroed (kSequenceMask, kMaskRows).
  absl::Status MaskingLayer(const LayerReader& r, const std::string& name) {
    if (cur_.size() != 2) {
      return r.Unsupported(absl::StrCat("Masking of ", ShapeText(cur_),
                                        " (supported: a (steps, features) sequence)"));
    }
    const Json* value = r.Get("mask_value");
    if (value != nullptr && !value->is_null() &&
        (!value->is_number() || !std::isfinite(value->get<double>()))) {
      return r.Unsupported(absl::StrCat("mask_value ", value->dump(), " (a finite number is)"));
    }
    const int x = src_;
    LayerSpec m{LayerSpec::kSequenceMask, name + "/mask", cur_[1]};
    m.keras_mask = true;
    m.alpha = static_cast<float>(r.Num("mask_value", 0.0));
    m.sources = {x};
    Push(m);
    const int mask = out_;
    LayerSpec rows{LayerSpec::kMaskRows, name};
    rows.sources = {x, mask};
    Push(rows);
    out_mask_ = mask;
    mask_set_ = true;
    matrix_ = true;
    rows_.push_back({name, "Masking", cur_, 0});
    return absl::OkStatus();
  }

  void Push(LayerSpec l) {
    if (l.sources.empty()) l.sources = {src_};
    l.trainable = trainable_;
    l.compute = compute_;
    layers_.push_back(std::move(l));
    out_ = static_cast<int>(layers_.size());
  }

  // Dot(axes, normalize): the batched product of two inputs, both (K,) or
  // both of rank 2 (DotGeometry), summed over Keras's axes (counting the
  // batch; an int for both; negative from the end), each input's vectors
  // along its axis L2-normalized first with normalize=True.
  absl::Status DotLayer(const LayerReader& r, const std::string& name,
                        const std::vector<Handle>& inputs) {
    if (inputs.size() != 2) {
      return r.Error(absl::StrCat("takes ", inputs.size(), " input(s); a Dot takes two"));
    }
    const Json* axes = r.Get("axes");
    std::vector<int64_t> given;
    if (axes != nullptr && axes->is_number_integer()) {
      given = {axes->get<int64_t>(), axes->get<int64_t>()};
    } else if (axes != nullptr && axes->is_array() && axes->size() == 2 &&
               (*axes)[0].is_number_integer() && (*axes)[1].is_number_integer()) {
      given = {(*axes)[0].get<int64_t>(), (*axes)[1].get<int64_t>()};
    } else {
      return r.Error("'axes' must be an integer or a pair of integers");
    }
    for (const Handle& h : inputs) {
      if (h.shape.size() > 2) {
        return r.Unsupported(
            absl::StrCat("a Dot of a ", ShapeText(h.shape), " input (supported: (K,) or rank 2)"));
      }
    }
    LayerSpec l{LayerSpec::kDot, name};
    l.dot_normalize = r.Bool("normalize", false);
    for (int k = 0; k < 2; ++k) {
      const Handle& h = inputs[k];
      const int64_t rank = static_cast<int64_t>(h.shape.size());
      const int64_t a = given[k] < 0 ? given[k] + rank + 1 : given[k];
      if (a < 1 || a > rank) {
        return r.Unsupported(absl::StrCat("axis ", given[k], " of a rank-", rank + 1,
                                          " input (the batch axis, or none)"));
      }
      l.dot_axes.push_back(static_cast<int>(a - 1));
      // A Flatten's output, still the tensor before it seen flat, is made
      // (features,) first.
      l.sources.push_back(h.shape.size() == 1 && !h.matrix ? Flattened(h.tensor, name) : h.tensor);
    }
    absl::StatusOr<compute::DotGeometry> g = compute::DotOf(l, inputs[0].shape, inputs[1].shape);
    if (!g.ok()) return r.Unsupported(g.status().message());
    Push(l);
    cur_ = inputs[0].shape.size() == 1 ? Shape{1} : Shape{g->m, g->n};
    matrix_ = cur_.size() == 1;
    rows_.push_back({name, "Dot", cur_, 0});
    return absl::OkStatus();
  }

  // Add: the elementwise sum of two or more inputs of one shape.
  absl::Status Merge(const LayerReader& r, const std::string& name, const std::string& cls,
                     const std::vector<Handle>& inputs) {
    if (inputs.size() < 2) {
      return r.Error(absl::StrCat("takes ", inputs.size(),
                                  " input(s); a merge takes two or more (a functional model's)"));
    }
    const std::map<std::string, LayerSpec::Kind> kinds = {{"Add", LayerSpec::kAdd},
                                                          {"Multiply", LayerSpec::kMultiply},
                                                          {"Average", LayerSpec::kAverage},
                                                          {"Subtract", LayerSpec::kSubtract},
                                                          {"Concatenate", LayerSpec::kConcat},
                                                          {"Maximum", LayerSpec::kMaximum},
                                                          {"Minimum", LayerSpec::kMinimum}};
    LayerSpec l{kinds.at(cls), name};
    if (l.kind == LayerSpec::kSubtract && inputs.size() != 2) {
      return r.Error(absl::StrCat("subtracts ", inputs.size(), " inputs; it takes exactly two"));
    }
    std::vector<std::string> shapes;
    for (const Handle& i : inputs) shapes.push_back(ShapeText(i.shape));
    const int64_t rank = static_cast<int64_t>(inputs[0].shape.size());
    Shape out = inputs[0].shape;
    if (l.kind == LayerSpec::kConcat) {
      // Keras's axis counts the batch: -1 (the default) is the last.
      const Json* axis = r.Get("axis");
      if (!IsNull(axis) && !axis->is_number_integer()) return r.Error("'axis' must be an integer");
      const int64_t given = IsNull(axis) ? -1 : axis->get<int64_t>();
      const int64_t a = given < 0 ? given + rank + 1 : given;
      if (a < 1 || a > rank) {
        return r.Unsupported(absl::StrCat("axis ", given, " of rank-", rank + 1,
                                          " inputs (the batch axis, or none)"));
      }
      l.axis = static_cast<int>(a - 1);
      out[l.axis] = 0;
    }
    for (const Handle& h : inputs) {
      bool fits = h.shape.size() == inputs[0].shape.size();
      for (size_t d = 0; fits && d < h.shape.size(); ++d) {
        fits = h.shape[d] == inputs[0].shape[d] ||
               (l.kind == LayerSpec::kConcat && static_cast<int>(d) == l.axis);
      }
      if (!fits) {
        return r.Error(absl::StrCat(l.kind == LayerSpec::kConcat
                                        ? "concatenates"
                                        : (l.kind == LayerSpec::kAdd ? "adds" : "merges"),
                                    " inputs of shapes ", absl::StrJoin(shapes, " and "),
                                    l.kind == LayerSpec::kConcat
                                        ? "; the axes other than the concatenated one must be equal"
                                        : "; they must be equal"));
      }
      if (l.kind == LayerSpec::kConcat) out[l.axis] += h.shape[l.axis];
      // A Flatten's output, still the (H, W, C) tensor seen flat, is made
      // (features,) first.
      l.sources.push_back(h.shape.size() == 1 && !h.matrix ? Flattened(h.tensor, name) : h.tensor);
    }
    if ((l.kind == LayerSpec::kMaximum || l.kind == LayerSpec::kMinimum) && l.sources.size() > 2) {
      // Of more than two: Keras's left fold, max(max(a, b), c), one layer
      // of two per step ("<name>/1", ...; the last is the layer), so ties
      // share the gradient as Keras's do.
      const std::vector<int> all = l.sources;
      int acc = all[0];
      for (size_t k = 1; k + 1 < all.size(); ++k) {
        LayerSpec step{l.kind, absl::StrCat(name, "/", k)};
        step.sources = {acc, all[k]};
        Push(step);
        acc = out_;
      }
      l.sources = {acc, all.back()};
    }
    Push(l);
    PSC_RETURN_IF_ERROR(MergeMasks(r, name, l, inputs));
    cur_ = out;
    matrix_ = cur_.size() == 1;
    rows_.push_back({name, cls, cur_, 0});
    return absl::OkStatus();
  }

  // A merge's Keras mask (Keras's Merge.compute_mask and Concatenate's
  // along the features): the OR of its inputs', none unless each has one
  // (for a Concatenate an input without one is all kept).
  absl::Status MergeMasks(const LayerReader& r, const std::string& name, const LayerSpec& l,
                          const std::vector<Handle>& inputs) {
    mask_set_ = runtime_set_ = true;
    const int merged = out_;
    for (const bool runtime : {false, true}) {
      std::vector<int> masks;
      for (const Handle& h : inputs) {
        const int m = runtime ? h.runtime_mask : h.mask;
        if (m >= 0) masks.push_back(m);
      }
      if (masks.empty()) continue;
      if (l.kind == LayerSpec::kConcat && l.axis + 1 != static_cast<int>(inputs[0].shape.size())) {
        return r.Unsupported("a Concatenate of masked sequences along their steps");
      }
      if (masks.size() != inputs.size()) continue;
      int acc = masks[0];
      for (size_t k = 1; k < masks.size(); ++k) {  // 0/1 values: OR is the max
        LayerSpec m{LayerSpec::kMaximum,
                    absl::StrCat(name, runtime ? "/runtime_mask" : "/mask", k)};
        m.keras_mask = true;
        m.sources = {acc, masks[k]};
        Push(m);
        acc = out_;
      }
      (runtime ? out_runtime_mask_ : out_mask_) = acc;
    }
    out_ = merged;
    return absl::OkStatus();
  }

  const std::string what_;
  int src_ = 0;  // the tensor the layer being read takes (LayerGraph ids)
  // The Keras masks of the layer's inputs, and of its output (Read); -1:
  // none.
  std::vector<int> in_masks_;
  int out_mask_ = -1;
  bool mask_set_ = false;
  // The same as Keras's runtime has them (Handle::runtime_mask).
  std::vector<int> in_runtime_masks_;
  int out_runtime_mask_ = -1;
  bool runtime_set_ = false;
  int out_ = 0;  // the tensor it makes: src_ when it makes none
  int input_consumers_ = 1;
  bool keras2_ = false;
  bool trainable_ = true;                              // the layer being read's
  compute::DType compute_ = compute::DType::kFloat32;  // its policy's compute dtype
  Shape input_;
  Shape cur_;
  std::vector<ModelInput> inputs_;    // several inputs: each (SetInputs)
  std::string input_name_ = "input";  // one input: its InputLayer's name
  std::vector<LayerSpec> layers_;
  // The recurrent layers with return_state=True, by name (StateOf), and
  // the tensor of each final state made from a returned sequence.
  struct RecurrentState {
    std::string cls;
    int tensor;
    int64_t steps, units;
    bool sequences;
    compute::DType compute;
  };
  std::map<std::string, RecurrentState> states_;
  std::map<std::string, int> state_tensors_;
  bool functional_ = false;
  InputTransform transform_;
  std::vector<SummaryRow> rows_;
  // cur_ is (features,) held as an [N, F] tensor (the output of a Dense or a
  // global pooling, or a (features,) input), not a flattened [N, H, W, C].
  bool matrix_ = false;
};

// The names of the layers whose outputs `layer` takes, from its
// inbound_nodes: Keras 3 ({"args": [{"config": {"keras_history": [name, 0,
// 0]}}]}) or Keras 2 ([[[name, 0, 0, {}]]]). `nodes` is how often the
// layer is called.
void InboundNames(const Json& j, std::vector<std::string>* names, std::vector<int>* indexes) {
  // Which output of the layer: the history's third entry (0 where absent;
  // -1 where not an index below 1024, which StateOf refuses).
  auto output = [&](const Json& h) {
    if (indexes == nullptr) return;
    if (h.size() < 3) {
      indexes->push_back(0);
    } else {
      const bool fits =
          h[2].is_number_integer() && h[2].get<int64_t>() >= 0 && h[2].get<int64_t>() < 1024;
      indexes->push_back(fits ? static_cast<int>(h[2].get<int64_t>()) : -1);
    }
  };
  if (j.is_object()) {
    if (const Json* h = Find(j, "keras_history");
        h != nullptr && h->is_array() && !h->empty() && (*h)[0].is_string()) {
      names->push_back((*h)[0].get<std::string>());
      output(*h);
      return;
    }
    for (const auto& [key, value] : j.items()) InboundNames(value, names, indexes);
  } else if (j.is_array()) {
    if (j.size() >= 3 && j[0].is_string() && j[1].is_number_integer()) {  // Keras 2
      names->push_back(j[0].get<std::string>());
      output(j);
      return;
    }
    for (const Json& e : j) InboundNames(e, names, indexes);
  }
}

std::string LayerName(const Json& layer) {
  if (const Json* n = Find(layer, "name"); n != nullptr && n->is_string()) {
    return n->get<std::string>();
  }
  if (const Json* c = Find(layer, "config"); c != nullptr) {
    if (const Json* n = Find(*c, "name"); n != nullptr && n->is_string()) {
      return n->get<std::string>();
    }
  }
  return "";
}

// A functional model's layers in a topological order (ties in the config's
// order, so every process reads the same graph), each with the names of the
// layers whose outputs it takes, in its call's order.
struct GraphNode {
  const Json* layer;
  std::string name;
  std::vector<std::string> inbound;
  std::vector<int> outputs;  // which output of each inbound layer
};
struct FunctionalGraph {
  std::vector<GraphNode> nodes;
  std::map<std::string, int> consumers;  // per layer: how many times its output is taken
  // The input layers in the model's input order (input_layers; else the
  // config's), with their batch shapes, when there are several.
  std::vector<std::pair<std::string, Json>> inputs;
};

// The layer names of an input_layers or output_layers entry: [name, 0, 0] or
// a list of them.
void EndpointNames(const Json* j, std::vector<std::string>* names) {
  if (j == nullptr || !j->is_array()) return;
  if (j->size() >= 1 && (*j)[0].is_string()) {
    names->push_back((*j)[0].get<std::string>());
    return;
  }
  for (const Json& e : *j) EndpointNames(&e, names);
}

absl::StatusOr<FunctionalGraph> GraphOrder(const Json& config, absl::string_view what) {
  const Json* layers = Find(config, "layers");
  if (layers == nullptr || !layers->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the config has no 'layers' list"));
  }
  std::vector<GraphNode> nodes;
  std::map<std::string, int> index;
  FunctionalGraph g;
  std::vector<std::string> inputs;
  for (const Json& layer : *layers) {
    const std::string name = LayerName(layer);
    if (name.empty() || !index.emplace(name, static_cast<int>(nodes.size())).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": a layer without a name, or two named \"", name, "\""));
    }
    const Json* calls = Find(layer, "inbound_nodes");
    const size_t n = calls != nullptr && calls->is_array() ? calls->size() : 0;
    if (n > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": layer \"", name, "\" is called ", n,
                       " times (a shared layer): not supported yet; give each call its own layer"));
    }
    GraphNode node{&layer, name, {}};
    if (calls != nullptr) InboundNames(*calls, &node.inbound, &node.outputs);
    if (node.inbound.empty()) inputs.push_back(name);
    nodes.push_back(std::move(node));
  }
  if (inputs.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no input layer"));
  if (inputs.size() > 1) {
    // Keras's model.inputs order, which fit's list of arrays follows.
    std::vector<std::string> order;
    EndpointNames(Find(config, "input_layers"), &order);
    if (order.empty()) order = inputs;
    if (std::set<std::string>(order.begin(), order.end()) !=
            std::set<std::string>(inputs.begin(), inputs.end()) ||
        order.size() != inputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": input_layers (", absl::StrJoin(order, ", "),
          ") are not the layers that take no input (", absl::StrJoin(inputs, ", "), ")"));
    }
    for (const std::string& name : order) {
      const Json& layer = *nodes[index.at(name)].layer;
      const std::optional<Json> shape = DeclaredInput(layer);
      if (!shape.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": the input \"", name, "\" declares no batch_shape"));
      }
      g.inputs.emplace_back(name, *shape);
    }
  }
  std::vector<std::string> outputs;
  EndpointNames(Find(config, "output_layers"), &outputs);
  if (outputs.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", outputs.size(), " outputs (",
                                                   absl::StrJoin(outputs, ", "),
                                                   "); pscluster trains models of one output"));
  }
  // Kahn's algorithm over distinct producers, the smallest config index first.
  std::vector<std::set<int>> after(nodes.size());
  std::vector<int> waiting(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<int> producers;
    for (const std::string& in : nodes[i].inbound) {
      const auto it = index.find(in);
      if (it == index.end()) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": layer \"", nodes[i].name,
                                                       "\" takes \"", in,
                                                       "\", which is no layer of the model"));
      }
      producers.insert(it->second);
      ++g.consumers[in];
    }
    for (int p : producers) after[p].insert(static_cast<int>(i));
    waiting[i] = static_cast<int>(producers.size());
  }
  std::set<int> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (waiting[i] == 0) ready.insert(static_cast<int>(i));
  }
  while (!ready.empty()) {
    const int i = *ready.begin();
    ready.erase(ready.begin());
    g.nodes.push_back(nodes[i]);
    for (int c : after[i]) {
      if (--waiting[c] == 0) ready.insert(c);
    }
  }
  if (g.nodes.size() != nodes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the graph has a cycle"));
  }
  // One output: every layer but it feeds another, and it comes last.
  const std::string sink = outputs.empty() ? g.nodes.back().name : outputs[0];
  for (const GraphNode& node : g.nodes) {
    if (node.name != sink && g.consumers[node.name] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": the output of layer \"", node.name,
          "\" is not used (a second output, or a dead branch): pscluster trains models of one "
          "output"));
    }
  }
  if (g.nodes.back().name != sink) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the output \"", sink, "\" feeds another layer"));
  }
  return g;
}

absl::Status ReadFunctional(const Json& config, absl::string_view what, GraphBuilder* builder) {
  PSC_ASSIGN_OR_RETURN(FunctionalGraph g, GraphOrder(config, what));
  builder->set_input_consumers(g.consumers[g.nodes.front().name]);
  if (!g.inputs.empty()) PSC_RETURN_IF_ERROR(builder->SetInputs(g.inputs));
  builder->set_functional();
  std::map<std::string, GraphBuilder::Handle> handles;
  for (const GraphNode& node : g.nodes) {
    std::vector<GraphBuilder::Handle> inputs;
    for (size_t i = 0; i < node.inbound.size(); ++i) {
      const std::string& in = node.inbound[i];  // a producer comes first
      if (node.outputs[i] == 0) {
        inputs.push_back(handles.at(in));
      } else {
        PSC_ASSIGN_OR_RETURN(GraphBuilder::Handle state, builder->StateOf(in, node.outputs[i]));
        inputs.push_back(state);
      }
    }
    PSC_ASSIGN_OR_RETURN(handles[node.name], builder->AddNode(*node.layer, inputs));
    // Keras's MultiHeadAttention clears the masks of the tensors it takes:
    // the layers read after it see none on them.
    const Json* cls = Find(*node.layer, "class_name");
    if (cls != nullptr && *cls == "MultiHeadAttention") {
      for (const std::string& in : node.inbound) handles.at(in).runtime_mask = -1;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Model> ModelFromKerasConfig(absl::string_view config_json, absl::string_view what) {
  const Json top = Json::parse(config_json.begin(), config_json.end(), nullptr,
                               /*allow_exceptions=*/false);
  if (top.is_discarded() || !top.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a JSON object"));
  }
  const Json* cls = Find(top, "class_name");
  const Json* config = Find(top, "config");
  if (cls == nullptr || !cls->is_string() || config == nullptr || !config->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not a Keras model config (no class_name and config; model.to_json() writes one)"));
  }
  std::string name = "model";
  if (const Json* n = Find(*config, "name"); n != nullptr && n->is_string()) {
    name = n->get<std::string>();
  }
  GraphBuilder chain{std::string(what)};
  // Keras 2's to_json() names its version at the top; Keras 3's configs
  // (to_json() and a .keras archive's config.json) do not.
  if (const Json* v = Find(top, "keras_version"); v != nullptr && v->is_string()) {
    chain.set_keras2(absl::StartsWith(v->get<std::string>(), "2."));
  }
  const std::string kind = cls->get<std::string>();
  if (kind == "Sequential") {
    const Json* layers = Find(*config, "layers");
    if (layers == nullptr || !layers->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": the config has no 'layers' list"));
    }
    // Keras 3 records a Sequential's input in build_input_shape when it has
    // no InputLayer entry.
    const Json* build = Find(*config, "build_input_shape");
    if (!layers->empty() && !IsNull(build) && Find(layers->front(), "class_name") != nullptr &&
        *Find(layers->front(), "class_name") != "InputLayer" && !DeclaredInput(layers->front())) {
      PSC_RETURN_IF_ERROR(chain.SetInput(*build));
    }
    for (const Json& layer : *layers) PSC_RETURN_IF_ERROR(chain.Add(layer));
  } else if (kind == "Functional" || kind == "Model") {
    PSC_RETURN_IF_ERROR(ReadFunctional(*config, what, &chain));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a ", kind, " model; supported are Sequential and Functional"));
  }
  return chain.Finish(std::move(name));
}

absl::StatusOr<Model> BuiltinModel(const std::string& name) {
  const char* config = BuiltinModelConfig(name);
  if (config == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown model \"", name,
                     "\"; expected seed_cnn, mlp, or a Keras model file (.keras or .json)"));
  }
  return ModelFromKerasConfig(config, absl::StrCat("built-in model ", name));
}

}  // namespace keras
}  // namespace psc
