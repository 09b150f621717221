#include "common/compute/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/checked_size.h"
#include "common/base/splitmix64.h"
#include "common/base/status_context.h"
#include "common/base/status_macros.h"
#include "common/compute/batch_norm_ops.h"
#include "common/compute/binary_cross_entropy.h"
#include "common/compute/conv_ops.h"
#include "common/compute/dense_ops.h"
#include "common/compute/elementwise_ops.h"
#include "common/compute/embedding_ops.h"
#include "common/compute/layer_norm_ops.h"
#include "common/compute/loss_ops.h"
#include "common/compute/mask_ops.h"
#include "common/compute/matmul_ops.h"
#include "common/compute/pooling_ops.h"
#include "common/compute/regression_loss.h"
#include "common/compute/rnn_ops.h"

namespace psc {
namespace compute {
namespace {

// One draw of SplitMix64 from *state, advancing it.
uint64_t SplitMix64(uint64_t* state) {
  base::SplitMix64 rng(*state);
  const uint64_t out = rng.Next();
  *state += 0x9E3779B97F4A7C15ULL;
  return out;
}

// The shape Keras holds a kConv's or kDense's kernel in: `keras` where the
// reader gave one (Conv1D's [K, C, F], EinsumDense's [D, H, K]), of the
// backends' shape's elements; else that shape.
absl::StatusOr<Shape> KerasShape(const LayerSpec& l, const std::vector<int64_t>& keras,
                                 Shape backends) {
  if (keras.empty()) return backends;
  if (ShapeSize(Shape(keras)) != ShapeSize(backends) || ShapeSize(backends) < 1) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", l.name, ": Keras's shape ",
                                                   ShapeText(Shape(keras)), " does not hold ",
                                                   ShapeText(backends)));
  }
  return Shape(keras);
}

}  // namespace

absl::StatusOr<Model> Model::Build(std::string name, Shape input, std::vector<LayerSpec> layers,
                                   std::vector<SummaryRow> summary, bool output_softmax) {
  // The largest one variable may be: what a push or a checkpoint carries.
  constexpr int64_t kMaxElements = static_cast<int64_t>(base::kMaxTensorBytes / sizeof(float));
  if (input.size() < 1 || input.size() > 3) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": input shape ", ShapeText(input),
                                                   " is not (height, width, channels), (steps, "
                                                   "features) or (features,)"));
  }
  PSC_RETURN_IF_ERROR(
      base::ElementCount(input, kMaxElements, absl::StrCat(name, ": input shape")).status());
  for (int64_t d : input) {
    if (d < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": input shape ", ShapeText(input), " has a dimension < 1"));
    }
  }
  if (layers.empty() ||
      (layers.back().kind != LayerSpec::kDense && layers.back().kind != LayerSpec::kDot)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the last layer must be a Dense or a Dot (the model's output)"));
  }
  for (const LayerSpec& l : layers) {
    // Applied in place on the output, whose values then replace the input
    // its gradient needs.
    const bool weights = AppliesActivation(l.kind);
    if (weights && l.activation && GradientFromInput(*l.activation)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": layer ", l.name, "'s ",
                                                     ActivationName(*l.activation),
                                                     " must be a layer of its own, not fused"));
    }
  }
  if (output_softmax && (layers.back().relu || layers.back().activation)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the last Dense has both an activation and a softmax"));
  }
  Model m;
  m.name_ = std::move(name);
  PSC_ASSIGN_OR_RETURN(m.graph_, LayerGraph::Build(m.name_, {DType::kFloat32, input}, layers));
  if (m.graph_.tensor(m.graph_.num_tensors() - 1).shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        m.name_, ": the output ", ShapeText(m.graph_.tensor(m.graph_.num_tensors() - 1).shape),
        " is not a vector (a Dot of rank-2 inputs needs a Flatten and a Dense after it)"));
  }
  auto add = [&](const std::string& variable, Shape shape, Initializer init,
                 std::optional<float> moving = std::nullopt) -> absl::StatusOr<int> {
    PSC_RETURN_IF_ERROR(
        base::ElementCount(shape, kMaxElements, absl::StrCat(m.name_, ": ", variable)).status());
    m.variables_.push_back({variable, std::move(shape)});
    m.initializers_.push_back(init);
    m.moving_averages_.push_back(moving);
    return static_cast<int>(m.variables_.size()) - 1;
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    // The shape rule checked the layer against its input (LayerGraph).
    const Shape& in = m.graph_.tensor(m.graph_.sources(static_cast<int>(i))[0]).shape;
    LayerVariables vars;
    switch (l.kind) {
      case LayerSpec::kConv: {
        // The grouped kernel [KH, KW, C / groups, K]; a DepthwiseConv2D's
        // as Keras holds it, [KH, KW, C, K / C] (the same memory), named
        // "kernel" as Keras 3 names it.
        const int64_t c = in.back();  // (H, W, C), or a sequence's (steps, C)
        Shape kernel = l.depthwise ? Shape{l.window.height, l.window.width, c, l.outputs / c}
                                   : l.window.Kernel(c, l.outputs);
        PSC_ASSIGN_OR_RETURN(kernel, KerasShape(l, l.kernel_shape, kernel));
        PSC_ASSIGN_OR_RETURN(const Shape bias, KerasShape(l, l.bias_shape, {l.outputs}));
        PSC_ASSIGN_OR_RETURN(vars.kernel,
                             add(l.kernel_variable.empty() ? l.name + "/kernel" : l.kernel_variable,
                                 kernel, l.kernel_init));
        if (l.bias) {
          PSC_ASSIGN_OR_RETURN(
              vars.bias,
              add(l.bias_variable.empty() ? l.name + "/bias" : l.bias_variable, bias, l.bias_init));
        }
        break;
      }
      case LayerSpec::kConvTranspose: {  // Keras's [KH, KW, filters, input channels]
        PSC_ASSIGN_OR_RETURN(
            vars.kernel, add(l.name + "/kernel", l.window.Kernel(l.outputs, in[2]), l.kernel_init));
        break;
      }
      case LayerSpec::kBiasAdd: {
        PSC_ASSIGN_OR_RETURN(
            vars.bias, add(l.bias_variable.empty() ? l.name + "/bias" : l.bias_variable, {in[2]},
                           l.bias_init));
        break;
      }
      case LayerSpec::kDense: {
        // Flattening its input, or on its last axes (LayerSpec::target).
        const int64_t k = l.target.empty() ? ShapeSize(in) : l.inputs;
        PSC_ASSIGN_OR_RETURN(const Shape kernel, KerasShape(l, l.kernel_shape, {k, l.outputs}));
        PSC_ASSIGN_OR_RETURN(vars.kernel, add(l.name + "/kernel", kernel, l.kernel_init));
        if (l.bias) {
          PSC_ASSIGN_OR_RETURN(const Shape bias, KerasShape(l, l.bias_shape, {l.outputs}));
          PSC_ASSIGN_OR_RETURN(vars.bias, add(l.name + "/bias", bias, l.bias_init));
        }
        break;
      }
      case LayerSpec::kLSTM: {                // Keras's LSTMCell's, in its order
        const int64_t gates = 4 * l.outputs;  // outputs <= 2^20 (LayerGraph)
        const std::string cell = l.name + "/lstm_cell/";
        PSC_ASSIGN_OR_RETURN(vars.kernel, add(cell + "kernel", {l.inputs, gates}, l.kernel_init));
        PSC_ASSIGN_OR_RETURN(vars.recurrent,
                             add(cell + "recurrent_kernel", {l.outputs, gates}, l.recurrent_init));
        if (l.bias) {
          PSC_ASSIGN_OR_RETURN(vars.bias, add(cell + "bias", {gates}, l.bias_init));
        }
        break;
      }
      case LayerSpec::kGRU: {  // Keras's GRUCell's
        const int64_t gates = 3 * l.outputs;
        const std::string cell = l.name + "/gru_cell/";
        PSC_ASSIGN_OR_RETURN(vars.kernel, add(cell + "kernel", {l.inputs, gates}, l.kernel_init));
        PSC_ASSIGN_OR_RETURN(vars.recurrent,
                             add(cell + "recurrent_kernel", {l.outputs, gates}, l.recurrent_init));
        if (l.bias) {
          PSC_ASSIGN_OR_RETURN(
              vars.bias,
              add(cell + "bias", l.reset_after ? Shape{2, gates} : Shape{gates}, l.bias_init));
        }
        break;
      }
      case LayerSpec::kSimpleRNN: {  // Keras's SimpleRNNCell's
        const std::string cell = l.name + "/simple_rnn_cell/";
        PSC_ASSIGN_OR_RETURN(vars.kernel,
                             add(cell + "kernel", {l.inputs, l.outputs}, l.kernel_init));
        PSC_ASSIGN_OR_RETURN(vars.recurrent, add(cell + "recurrent_kernel", {l.outputs, l.outputs},
                                                 l.recurrent_init));
        if (l.bias) {
          PSC_ASSIGN_OR_RETURN(vars.bias, add(cell + "bias", {l.outputs}, l.bias_init));
        }
        break;
      }
      case LayerSpec::kLayerNorm: {  // gamma and beta of the normalized axes' shape
        const Shape axes(in.end() - l.axis, in.end());
        if (l.scale) {
          PSC_ASSIGN_OR_RETURN(vars.gamma, add(l.name + "/gamma", axes, l.gamma_init));
        }
        if (l.center) {
          PSC_ASSIGN_OR_RETURN(vars.beta, add(l.name + "/beta", axes, l.beta_init));
        }
        break;
      }
      case LayerSpec::kBatchNorm: {
        const int64_t c = in.back();
        if (l.scale) {
          PSC_ASSIGN_OR_RETURN(vars.gamma, add(l.name + "/gamma", {c}, l.gamma_init));
        }
        if (l.center) {
          PSC_ASSIGN_OR_RETURN(vars.beta, add(l.name + "/beta", {c}, l.beta_init));
        }
        PSC_ASSIGN_OR_RETURN(vars.mean,
                             add(l.name + "/moving_mean", {c}, l.moving_mean_init, l.momentum));
        PSC_ASSIGN_OR_RETURN(vars.variance, add(l.name + "/moving_variance", {c},
                                                l.moving_variance_init, l.momentum));
        break;
      }
      case LayerSpec::kEmbedding: {  // Keras's [input_dim, output_dim]
        PSC_ASSIGN_OR_RETURN(
            vars.kernel, add(l.kernel_variable.empty() ? l.name + "/embeddings" : l.kernel_variable,
                             {l.inputs, l.outputs}, l.kernel_init));
        break;
      }
      case LayerSpec::kDot:
      case LayerSpec::kPool:
      case LayerSpec::kActivation:
      case LayerSpec::kGlobalPool:
      case LayerSpec::kDropout:
      case LayerSpec::kAdd:
      case LayerSpec::kMultiply:
      case LayerSpec::kAverage:
      case LayerSpec::kSubtract:
      case LayerSpec::kConcat:
      case LayerSpec::kMaximum:
      case LayerSpec::kMinimum:
      case LayerSpec::kFlatten:
      case LayerSpec::kInput:
      case LayerSpec::kZeroPad:
      case LayerSpec::kCrop:
      case LayerSpec::kUpSample:
      case LayerSpec::kPermute:
      case LayerSpec::kRepeat:
      case LayerSpec::kScale:
      case LayerSpec::kMask:
      case LayerSpec::kSequenceMask:
      case LayerSpec::kMaskRows:
      case LayerSpec::kMaskedMean:
        break;  // no variables (kConvTranspose's and kBiasAdd's are above)
    }
    if (!l.trainable) {
      for (int v : LayerVariableIndices(vars)) m.moving_averages_[v] = 1.0f;  // frozen
    }
    m.layer_variables_.push_back(vars);
  }
  // All variables together: what a worker holds twice (values, gradients).
  constexpr uint64_t kMaxTotal = uint64_t{1} << 31;
  uint64_t total = 0;
  for (const tensor::VariableShape& v : m.variables_) {
    total += static_cast<uint64_t>(ShapeSize(v.shape));  // each < 2^29: no overflow
    if (total > kMaxTotal) {
      return absl::InvalidArgumentError(
          absl::StrCat(m.name_, ": more than ", kMaxTotal, " parameters (at ", v.name, ")"));
    }
  }
  m.input_ = std::move(input);
  m.layers_ = std::move(layers);
  m.summary_ = std::move(summary);
  m.output_softmax_ = output_softmax;
  return m;
}

std::vector<bool> Model::table_variables() const {
  std::vector<bool> tables(variables_.size(), false);
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i].kind == LayerSpec::kEmbedding) tables[layer_variables_[i].kernel] = true;
  }
  return tables;
}

std::vector<bool> Model::float32_variables() const {
  std::vector<bool> out(variables_.size(), false);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec& l = layers_[i];
    if (l.compute != DType::kFloat32 && l.kind != LayerSpec::kBatchNorm &&
        l.kind != LayerSpec::kLayerNorm) {
      continue;
    }
    for (int v : LayerVariableIndices(layer_variables_[i])) out[v] = true;
  }
  return out;
}

void Model::set_inputs(std::vector<ModelInput> inputs) {
  inputs_ = std::move(inputs);
  for (const LayerSpec& l : layers_) {
    if (l.kind != LayerSpec::kEmbedding || l.sources.size() != 1) continue;
    const int t = l.sources[0];
    // The graph checked the source: the model's input or a kInput layer.
    const int64_t offset = t == 0 ? 0 : layers_[t - 1].offset;
    for (ModelInput& in : inputs_) {
      if (in.offset != offset) continue;
      if (in.id_limit == 0 || l.inputs < in.id_limit) {
        in.id_limit = l.inputs;
        in.table = l.name;
      }
      break;
    }
  }
}

std::vector<int> LayerVariableIndices(const LayerVariables& v) {
  std::vector<int> indices;
  for (int index : {v.kernel, v.bias, v.gamma, v.beta, v.mean, v.variance, v.recurrent}) {
    if (index >= 0) indices.push_back(index);
  }
  std::sort(indices.begin(), indices.end());  // Build's order already; any other too
  return indices;
}

std::vector<bool> Model::frozen_variables() const {
  std::vector<bool> out;
  for (const auto& m : moving_averages_) out.push_back(m.has_value() && *m == 1.0f);
  return out;
}

int64_t Model::num_parameters() const {
  int64_t total = 0;
  for (const tensor::VariableShape& v : variables_) total += ShapeSize(v.shape);
  return total;
}

std::vector<std::vector<float>> Model::Initialize(uint64_t seed,
                                                  const std::vector<bool>& skip) const {
  const std::vector<bool> tables = table_variables();
  std::vector<std::vector<float>> out(variables_.size());
  for (size_t i = 0; i < variables_.size(); ++i) {
    if (i < skip.size() && skip[i]) continue;
    const Shape& shape = variables_[i].shape;
    out[i].resize(ShapeSize(shape));
    if (tables[i]) {
      tensor::InitializeRows(initializers_[i], shape, seed, static_cast<int>(i), 0,
                             absl::MakeSpan(out[i]));
    } else {
      tensor::InitializeVariable(initializers_[i], shape, seed, static_cast<int>(i),
                                 absl::MakeSpan(out[i]));
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const Model* model,
                                                           ComputeBackend* backend) {
  std::unique_ptr<Executor> e(new Executor(model, backend));
  for (const tensor::VariableShape& v : model->variables()) {
    PSC_ASSIGN_OR_RETURN(auto p, backend->Allocate(v.shape));
    e->params_.push_back(std::move(p));
    PSC_ASSIGN_OR_RETURN(auto g, backend->Allocate(v.shape));
    e->param_grads_.push_back(std::move(g));
  }
  const auto& layers = model->layers();
  const LayerGraph& dot_graph = model->graph();
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].kind != LayerSpec::kDot) continue;
    const std::vector<int>& src = dot_graph.sources(static_cast<int>(i));
    PSC_ASSIGN_OR_RETURN(e->dots_[i], DotOf(layers[i], dot_graph.tensor(src[0]).shape,
                                            dot_graph.tensor(src[1]).shape));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    // An UpSampling2D's or a bias's depthwise kernel of ones [h, w, 1, C],
    // and where a bias's unused kernel gradient goes.
    const LayerSpec& l = layers[i];
    if (l.kind != LayerSpec::kUpSample && l.kind != LayerSpec::kBiasAdd) continue;
    const Shape kernel = l.window.Kernel(l.window.groups, l.window.groups);
    PSC_ASSIGN_OR_RETURN(auto ones, backend->Allocate(kernel));
    PSC_RETURN_IF_ERROR(backend->CopyFromHost(
        std::vector<float>(static_cast<size_t>(ShapeSize(kernel)), 1.0f), ones.get()));
    e->ones_[i] = std::move(ones);
    if (l.kind == LayerSpec::kBiasAdd) {
      PSC_ASSIGN_OR_RETURN(e->bias_dw_[i], backend->Allocate(kernel));
    }
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    // Kernels and biases held as the backends take them where Keras's
    // shape is another of the same elements: a DepthwiseConv2D's and a
    // Conv1D's kernel, an EinsumDense's kernel and bias.
    const LayerSpec& l = layers[i];
    const LayerVariables& v = model->layer_variables()[i];
    std::vector<std::pair<int, Shape>> held;
    if (l.kind == LayerSpec::kConv) {
      held.push_back({v.kernel, l.window.Kernel(l.inputs, l.outputs)});
      held.push_back({v.bias, {l.outputs}});
    } else if (l.kind == LayerSpec::kDense && !l.target.empty()) {
      held.push_back({v.kernel, {l.inputs, l.outputs}});
      held.push_back({v.bias, {l.outputs}});
    }
    for (const auto& [k, shape] : held) {
      if (k < 0 || e->params_[k]->shape() == shape) continue;
      PSC_ASSIGN_OR_RETURN(e->params_[k], backend->Allocate(shape));
      PSC_ASSIGN_OR_RETURN(e->param_grads_[k], backend->Allocate(shape));
    }
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    if (l.kind != LayerSpec::kBatchNorm || (l.scale && l.center && l.trainable)) continue;
    BatchNormFill& f = e->bn_fill_[i];
    const Shape c = {l.outputs};
    if (!l.trainable) {
      PSC_ASSIGN_OR_RETURN(f.zeros, backend->Allocate(c));  // zero-filled
    }
    if (!l.scale) {
      PSC_ASSIGN_OR_RETURN(f.gamma, backend->Allocate(c));
      PSC_RETURN_IF_ERROR(
          backend->CopyFromHost(std::vector<float>(l.outputs, 1.0f), f.gamma.get()));
      PSC_ASSIGN_OR_RETURN(f.dgamma, backend->Allocate(c));
    }
    if (!l.center) {  // zero-filled
      PSC_ASSIGN_OR_RETURN(f.beta, backend->Allocate(c));
      PSC_ASSIGN_OR_RETURN(f.dbeta, backend->Allocate(c));
    }
  }
  const LayerGraph& graph = model->graph();
  static std::atomic<int64_t> next_instance{1};
  e->instance_base_ = next_instance.fetch_add(static_cast<int64_t>(layers.size()) + 1);
  e->frozen_ = model->frozen_variables();
  e->needs_gradient_.assign(graph.num_tensors(), false);
  for (size_t i = 0; i < layers.size(); ++i) {
    bool needs = false;
    for (int v : LayerVariableIndices(model->layer_variables()[i])) needs = needs || !e->frozen_[v];
    for (int t : graph.sources(i)) needs = needs || e->needs_gradient_[t];
    // A mask is flat in its input: no gradient passes it.
    if (layers[i].kind == LayerSpec::kSequenceMask) needs = false;
    e->needs_gradient_[LayerGraph::OutputOf(static_cast<int>(i))] = needs;
  }
  return e;
}

absl::Status Executor::SetParameter(int index, absl::Span<const float> values) {
  if (index < 0 || index >= static_cast<int>(params_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no parameter ", index));
  }
  return backend_->CopyFromHost(values, params_[index].get());
}

absl::Status Executor::SetParameters(const std::vector<std::vector<float>>& params) {
  if (params.size() != params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(params.size(), " parameters given; ",
                                                   model_->name(), " has ", params_.size()));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (absl::Status s = SetParameter(static_cast<int>(i), params[i]); !s.ok()) {
      // A device's RESOURCE_EXHAUSTED or INTERNAL stays what it is.
      return base::Prefix(s, model_->variables()[i].name);
    }
  }
  return absl::OkStatus();
}

// Training keeps every layer's output for the backward pass, each in its
// own tensor. The forward pass alone (evaluation, predict) needs a layer's
// output only from its layer to its last consumer (the model's output to the
// end); an identity Dropout's output is its input's tensor, so it extends
// that one's life. Outputs of one shape and dtype whose lives do not meet
// share a tensor. Every forward op writes its whole output, so a tensor's
// earlier occupant never leaks into the next.
namespace {

// Whether layer i's own backward reads its output: an activation whose
// gradient comes from its output, applied by the layer or as its op.
bool ReadsOwnOutput(const LayerSpec& l) {
  if (AppliesActivation(l.kind) && (l.relu || l.activation)) return true;
  return l.kind == LayerSpec::kActivation && !GradientFromInput(*l.activation);
}

// Whether the backward of `consumer` reads its inputs' values: a weight
// gradient, a pooling's or BatchNormalization's backward, the other factor
// of a product, the winner of an extremum, gelu/silu. Conservative: a
// frozen layer counts too.
bool ReadsInputs(const LayerSpec& consumer) {
  switch (consumer.kind) {
    case LayerSpec::kConv:
    case LayerSpec::kDense:
    case LayerSpec::kPool:
    case LayerSpec::kGlobalPool:
    case LayerSpec::kConvTranspose:
    case LayerSpec::kBiasAdd:
    case LayerSpec::kBatchNorm:
    case LayerSpec::kMultiply:
    case LayerSpec::kMaximum:
    case LayerSpec::kMinimum:
    case LayerSpec::kEmbedding:  // its ids
    case LayerSpec::kDot:        // each factor's gradient takes the other
    case LayerSpec::kLayerNorm:
    case LayerSpec::kLSTM:  // its kernel's gradient
    case LayerSpec::kGRU:
    case LayerSpec::kSimpleRNN:
    case LayerSpec::kMaskRows:  // their masks
    case LayerSpec::kMaskedMean:
      return true;
    case LayerSpec::kActivation:
      return GradientFromInput(*consumer.activation);
    default:
      return false;
  }
}

}  // namespace

absl::Status Executor::AssignByLiveness(std::vector<Life> lives,
                                        std::vector<std::unique_ptr<DeviceTensor>>* pool) {
  std::stable_sort(lives.begin(), lives.end(),
                   [](const Life& a, const Life& b) { return a.start < b.start; });
  std::vector<int> free_after(pool->size(), std::numeric_limits<int>::max());
  for (const Life& life : lives) {
    size_t k = 0;
    while (k < pool->size() && !((*pool)[k]->shape() == life.shape &&
                                 (*pool)[k]->dtype() == life.dtype && free_after[k] < life.start)) {
      ++k;
    }
    if (k == pool->size()) {
      PSC_ASSIGN_OR_RETURN(auto t, backend_->Allocate(life.shape, life.dtype));
      pool->push_back(std::move(t));
      free_after.push_back(0);
    }
    *life.slot = (*pool)[k].get();
    free_after[k] = life.end;
  }
  return absl::OkStatus();
}

absl::StatusOr<Executor::Buffers*> Executor::BuffersFor(int64_t n, bool forward_only) {
  auto it = buffers_.find({n, forward_only});
  if (it != buffers_.end()) return &it->second;
  Buffers b;
  const LayerGraph& graph = model_->graph();
  const int count = graph.num_layers();
  // Each tensor in the dtype its shape rule gave it (float32 today; ids
  // once a layer takes them).
  PSC_ASSIGN_OR_RETURN(b.input, backend_->Allocate(graph.BatchShape(0, n),  // [n,H,W,C] or [n,F]
                                                   graph.tensor(0).dtype));
  b.acts.assign(count, nullptr);
  if (forward_only) {
    PSC_RETURN_IF_ERROR(PlanForward(b, n));
  } else {
    PSC_RETURN_IF_ERROR(PlanTraining(b, n));
  }
  b.outputs.assign(b.acts.size(), nullptr);
  return &buffers_.emplace(std::make_pair(n, forward_only), std::move(b)).first->second;
}

absl::Status Executor::PlanForward(Buffers& b, int64_t n) {
  const LayerGraph& graph = model_->graph();
  const auto& layers = model_->layers();
  const int count = graph.num_layers();
  // holder[i]: the layer whose tensor holds layer i's output (-1: the
  // input's; an identity Dropout passes its input's on); last[i]: the last
  // layer that reads layer i's tensor (the model's output: read after the
  // pass).
  std::vector<int> holder(count), last(count);
  for (int i = 0; i < count; ++i) {
    const int source = graph.sources(i)[0];
    const bool alias = layers[i].kind == LayerSpec::kDropout;
    holder[i] = !alias ? i : source == 0 ? -1 : holder[LayerGraph::ProducerOf(source)];
    last[i] = i;
  }
  for (int i = 0; i < count; ++i) {
    if (holder[i] < 0) continue;
    int& end = last[holder[i]];
    if (i == count - 1) end = std::numeric_limits<int>::max();
    for (int c : graph.consumers(LayerGraph::OutputOf(i))) end = std::max(end, c);
  }
  std::vector<Life> lives;
  for (int i = 0; i < count; ++i) {
    if (holder[i] != i) continue;
    const int t = LayerGraph::OutputOf(i);
    lives.push_back({i, last[i], graph.BatchShape(t, n), graph.tensor(t).dtype, &b.acts[i]});
  }
  PSC_RETURN_IF_ERROR(AssignByLiveness(std::move(lives), &b.pool));
  for (int i = 0; i < count; ++i) {
    if (holder[i] != i) b.acts[i] = holder[i] < 0 ? b.input.get() : b.acts[holder[i]];
  }
  return absl::OkStatus();
}

// A training step's timeline: layer i's forward at time i, the loss at L
// (the layer count), layer j's backward at 2L - j. Tensors of one shape and
// dtype whose lives do not meet share one; a life includes both its ends.
//   - Layer a's output lives from a to its last reader: its last forward
//     consumer, or the last backward that reads it (its own, ReadsOwnOutput;
//     a consumer's, ReadsInputs); the model's output for ever (the loss and
//     CopyOutputs read it).
//   - The gradient of a's output lives from the backward of its highest
//     consumer, which writes it first (the loss for the model's output), to
//     a's own backward, which reads it last; a tensor that needs no gradient
//     (needs_gradient_: below the trainable layers) has none.
// Every forward and backward op writes its whole output (the first
// contribution to a gradient is written, the others added), so a tensor's
// earlier contents never leak into another's.
absl::Status Executor::PlanTraining(Buffers& b, int64_t n) {
  const LayerGraph& graph = model_->graph();
  const auto& layers = model_->layers();
  const int count = graph.num_layers();
  constexpr int kForever = std::numeric_limits<int>::max();
  auto backward = [count](int layer) { return 2 * count - layer; };
  std::vector<Life> lives;
  for (int a = 0; a < count; ++a) {
    const int t = LayerGraph::OutputOf(a);
    const std::vector<int>& consumers = graph.consumers(t);
    int end = a;
    for (int c : consumers) end = std::max(end, c);
    if (a == count - 1 || !share_training_activations_) {
      end = kForever;
    } else {
      if (ReadsOwnOutput(layers[a])) end = std::max(end, backward(a));
      for (int c : consumers) {
        if (ReadsInputs(layers[c])) end = std::max(end, backward(c));
      }
    }
    lives.push_back({a, end, graph.BatchShape(t, n), graph.tensor(t).dtype, &b.acts[a]});
  }
  b.grads.assign(count, nullptr);
  for (int a = count - 1; a >= 0; --a) {  // ties in start: the higher layer first
    const int t = LayerGraph::OutputOf(a);
    if (a != count - 1 && !needs_gradient_[t]) continue;
    int first = a == count - 1 ? count : a;
    for (int c : graph.consumers(t)) first = std::max(first, c);
    lives.push_back(
        {backward(first), backward(a), graph.BatchShape(t, n), graph.tensor(t).dtype, &b.grads[a]});
  }
  PSC_RETURN_IF_ERROR(AssignByLiveness(std::move(lives), &b.pool));
  b.contributions.resize(b.acts.size() + 1);
  for (int t = 1; t < graph.num_tensors(); ++t) {
    if (!graph.IsShared(t) || !needs_gradient_[t]) continue;
    PSC_ASSIGN_OR_RETURN(b.contributions[t],
                         backend_->Allocate(b.acts[t - 1]->shape(), b.acts[t - 1]->dtype()));
  }
  return absl::OkStatus();
}

int64_t Executor::BufferElements() const {
  int64_t total = 0;
  for (const auto& [key, b] : buffers_) {
    for (const auto& t : b.pool) total += t->size();
  }
  return total;
}

void Executor::SetDropoutKey(uint64_t seed, int64_t step, int64_t first_example) {
  dropout_seed_ = seed;
  dropout_step_ = step;
  dropout_first_ = first_example;
}

// Keras's inverted dropout: kept elements scaled by 1 / (1 - rate).
absl::Status Executor::DotScratch(Buffers& b, size_t layer, const DeviceTensor& a,
                                  const DeviceTensor& bt) {
  if (b.dot_scratch.empty()) b.dot_scratch.resize(model_->layers().size());
  if (b.dot_scratch_owned.empty()) b.dot_scratch_owned.resize(model_->layers().size());
  auto& owned = b.dot_scratch_owned[layer];
  if (!owned.empty()) return absl::OkStatus();
  // All four or none (an allocation that fails leaves nothing half made).
  std::vector<std::unique_ptr<DeviceTensor>> made;
  for (int k = 0; k < 4; ++k) {
    PSC_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTensor> t,
                         backend_->Allocate(k % 2 == 0 ? a.shape() : bt.shape()));
    made.push_back(std::move(t));
  }
  for (int k = 0; k < 4; ++k) b.dot_scratch[layer][k] = made[k].get();
  owned = std::move(made);
  return absl::OkStatus();
}

absl::StatusOr<std::array<DeviceTensor*, 2>> Executor::NormStats(Buffers& b, size_t layer,
                                                                 const DeviceTensor& x) {
  const LayerSpec& l = model_->layers()[layer];
  const Shape& in =
      model_->graph().tensor(model_->graph().sources(static_cast<int>(layer))[0]).shape;
  const int64_t cols = ShapeSize(Shape(in.end() - l.axis, in.end()));
  auto& stats = b.norm_stats[layer];
  if (stats[0] == nullptr) {
    const Shape rows = {cols > 0 ? x.size() / cols : 0};
    PSC_ASSIGN_OR_RETURN(auto mean, backend_->Allocate(rows));
    PSC_ASSIGN_OR_RETURN(auto rstd, backend_->Allocate(rows));
    stats = {std::move(mean), std::move(rstd)};
  }
  return std::array<DeviceTensor*, 2>{stats[0].get(), stats[1].get()};
}

absl::StatusOr<Executor::Buffers::MaskTensors*> Executor::MaskKeep(Buffers& b, size_t layer,
                                                                   const DeviceTensor& x,
                                                                   int64_t n) {
  const LayerSpec& l = model_->layers()[layer];
  const std::vector<int>& sources = model_->graph().sources(static_cast<int>(layer));
  const Shape& scores = model_->graph().tensor(sources[0]).shape;  // (heads, T, S)
  const int64_t heads = scores[0], t = scores[1], s = scores[2];
  // Keras's large negative number: -1e9, or -3e4 where the scores are
  // float16 (whose largest finite value is 65504).
  const float kMasked = x.dtype() == DType::kFloat16 ? -3e4f : -1e9f;
  Buffers::MaskTensors& m = b.masks_bias[layer];
  const bool fresh = m.keep == nullptr;
  if (fresh) {
    for (auto* p : {&m.keep, &m.bias, &m.minus}) {
      PSC_ASSIGN_OR_RETURN(*p, backend_->Allocate(x.shape()));
    }
    PSC_RETURN_IF_ERROR(backend_->CopyFromHost(
        std::vector<float>(static_cast<size_t>(x.size()), kMasked), m.minus.get()));
    if (l.causal) {  // key j after query i: 0
      std::vector<float> host(static_cast<size_t>(x.size()), 1.0f);
      for (int64_t e = 0; e < n * heads; ++e) {
        for (int64_t i = 0; i < t; ++i) {
          for (int64_t j = i + 1; j < s; ++j) host[(e * t + i) * s + j] = 0.0f;
        }
      }
      PSC_ASSIGN_OR_RETURN(m.causal, backend_->Allocate(x.shape()));
      PSC_RETURN_IF_ERROR(backend_->CopyFromHost(host, m.causal.get()));
    }
  }
  const bool keras_masks = l.query_mask || l.value_mask;
  const bool input_mask = sources.size() - l.query_mask - l.value_mask == 2;
  if (!input_mask && !keras_masks && !fresh) return &m;  // a causal mask alone: constant
  if (!input_mask && !keras_masks) {
    PSC_RETURN_IF_ERROR(elementwise::Copy(backend_, *m.causal, m.keep.get()));
  } else {  // the (T, S) pairs kept for every head, and the causal part
    const DeviceTensor* pairs = input_mask ? Value(b, sources[1]) : nullptr;
    if (keras_masks) {  // query t and key s both kept: the masks' outer product
      if (m.outer == nullptr) {
        for (auto* p : {&m.outer, &m.pair}) {
          PSC_ASSIGN_OR_RETURN(*p, backend_->Allocate({n, t * s}));
        }
        if (!l.query_mask || !l.value_mask) {  // the absent one's: all kept
          PSC_ASSIGN_OR_RETURN(m.ones, backend_->Allocate({n, l.query_mask ? s : t}));
          PSC_RETURN_IF_ERROR(backend_->CopyFromHost(
              std::vector<float>(static_cast<size_t>(m.ones->size()), 1.0f), m.ones.get()));
        }
      }
      const size_t first = sources.size() - l.query_mask - l.value_mask;
      const DeviceTensor& q = l.query_mask ? *Value(b, sources[first]) : *m.ones;
      const DeviceTensor& v = l.value_mask ? *Value(b, sources.back()) : *m.ones;
      PSC_RETURN_IF_ERROR(
          matmul::BatchMatMul(backend_, q, v, t, 1, s, false, false, m.outer.get()));
      if (pairs != nullptr) {
        PSC_RETURN_IF_ERROR(
            elementwise::CopyBlock(backend_, *pairs, t * s, 0, m.pair.get(), t * s, 0, n, t * s));
        PSC_RETURN_IF_ERROR(elementwise::Multiply(backend_, *m.pair, *m.outer, m.outer.get()));
      }
      pairs = m.outer.get();
    }
    for (int64_t h = 0; h < heads; ++h) {
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *pairs, t * s, 0, m.keep.get(),
                                                 heads * t * s, h * t * s, n, t * s));
    }
    if (l.causal) {
      PSC_RETURN_IF_ERROR(elementwise::Multiply(backend_, *m.keep, *m.causal, m.keep.get()));
    }
  }
  // bias = keep x 1e9 - 1e9: 0 where kept, -1e9 where not.
  PSC_RETURN_IF_ERROR(elementwise::Scale(backend_, *m.keep, -kMasked, m.bias.get()));
  PSC_RETURN_IF_ERROR(elementwise::Add(backend_, *m.bias, *m.minus, m.bias.get()));
  return &m;
}

namespace {

// A Permute's permutation of the example's axes as one of the tensors the
// executor holds (LayerGraph's DeviceShape: the batch first, a
// (steps, channels) example after an axis of one).
std::vector<int> DevicePerm(const std::vector<int>& perm) {
  std::vector<int> out = {0};
  const int shift = perm.size() == 2 ? 2 : 1;
  if (shift == 2) out.push_back(1);
  for (int p : perm) out.push_back(p + shift);
  return out;
}

std::vector<int> Inverse(const std::vector<int>& perm) {
  std::vector<int> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int>(i);
  return inv;
}

}  // namespace

absl::Status Executor::DrawMasks(Buffers& b, int64_t n) {
  const auto& layers = model_->layers();
  if (b.masks.empty()) b.masks.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    if (l.kind != LayerSpec::kDropout) continue;
    if (b.masks[i] == nullptr) {
      PSC_ASSIGN_OR_RETURN(b.masks[i], backend_->Allocate(b.acts[i]->shape()));
    }
    const int64_t per = b.acts[i]->size() / n;
    host_mask_.resize(static_cast<size_t>(b.acts[i]->size()));
    const float keep = static_cast<float>(1.0 / (1.0 - l.rate));
    for (int64_t e = 0; e < n; ++e) {
      uint64_t state = dropout_seed_ ^ 0x6a09e667f3bcc909ULL;
      state = SplitMix64(&state) ^ static_cast<uint64_t>(dropout_step_);
      state = SplitMix64(&state) ^ static_cast<uint64_t>(i);
      state = SplitMix64(&state) ^ static_cast<uint64_t>(dropout_first_ + e);
      const uint64_t example = SplitMix64(&state);
      for (int64_t j = 0; j < per; ++j) {
        uint64_t s = example ^ static_cast<uint64_t>(j);
        const double u = static_cast<double>(SplitMix64(&s) >> 11) * (1.0 / 9007199254740992.0);
        host_mask_[e * per + j] = u < l.rate ? 0.0f : keep;
      }
    }
    PSC_RETURN_IF_ERROR(backend_->CopyFromHost(host_mask_, b.masks[i].get()));
  }
  return absl::OkStatus();
}

const DeviceTensor* Executor::Param(int index) const {
  return index < 0 ? nullptr : params_[index].get();
}

absl::Status Executor::Forward(Buffers& b, absl::Span<const float> images, int64_t n,
                               bool training) {
  if (static_cast<int64_t>(images.size()) != n * model_->input_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        images.size(), " values for ", n, " examples of ", ShapeText(model_->input_shape())));
  }
  PSC_RETURN_IF_ERROR(backend_->CopyFromHost(images, b.input.get()));
  if (training) PSC_RETURN_IF_ERROR(DrawMasks(b, n));
  const auto& layers = model_->layers();
  const LayerGraph& graph = model_->graph();
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    const LayerVariables& v = model_->layer_variables()[i];
    const std::vector<int>& sources = graph.sources(static_cast<int>(i));
    const DeviceTensor* x = Value(b, sources[0]);
    DeviceTensor* y = b.acts[i];
    if (training && parameters_needed_ && !LayerVariableIndices(v).empty()) {
      PSC_RETURN_IF_ERROR(parameters_needed_(static_cast<int>(i)));
    }
    absl::Status s;
    switch (l.kind) {
      case LayerSpec::kConv:
        s = conv::Conv2D(backend_, *x, *params_[v.kernel], Param(v.bias), l.window, l.relu, y);
        if (s.ok() && l.activation)
          s = elementwise::Activate(backend_, *l.activation, l.alpha, *y, y);
        break;
      case LayerSpec::kDense:
        s = dense::Dense(backend_, *x, *params_[v.kernel], Param(v.bias), l.relu, y);
        if (s.ok() && l.activation)
          s = elementwise::Activate(backend_, *l.activation, l.alpha, *y, y);
        break;
      case LayerSpec::kPool:
        s = l.pooling == GlobalPooling::kMax ? pooling::MaxPool(backend_, *x, l.window, y)
                                             : pooling::AvgPool(backend_, *x, l.window, y);
        break;
      case LayerSpec::kActivation:
        s = elementwise::Activate(backend_, *l.activation, l.alpha, *x, y);
        break;
      case LayerSpec::kGlobalPool:
        s = pooling::GlobalPool(backend_, l.pooling, *x, y);
        break;
      case LayerSpec::kDropout:
        if (!training) {
          b.outputs[i] = x;  // the identity at evaluation, as Keras's
          continue;
        }
        s = elementwise::Multiply(backend_, *x, *b.masks[i], y);
        break;
      case LayerSpec::kBatchNorm: {
        const DeviceTensor& gamma = v.gamma >= 0 ? *params_[v.gamma] : *bn_fill_[i].gamma;
        const DeviceTensor& beta = v.beta >= 0 ? *params_[v.beta] : *bn_fill_[i].beta;
        const float eps = static_cast<float>(l.epsilon);
        // Training normalizes with the batch's statistics, which become the
        // moving averages' "gradients"; evaluation with the moving ones, as
        // Keras does.
        s = training && l.trainable
                ? batch_norm::BatchNorm(backend_, *x, gamma, beta, eps, y,
                                        param_grads_[v.mean].get(), param_grads_[v.variance].get())
                : batch_norm::BatchNormInference(backend_, *x, gamma, beta, *params_[v.mean],
                                                 *params_[v.variance], eps, y);
        break;
      }
      case LayerSpec::kAdd:
      case LayerSpec::kAverage:
        s = elementwise::Add(backend_, *x, *Value(b, sources[1]), y);
        for (size_t k = 2; s.ok() && k < sources.size(); ++k) {
          s = elementwise::Add(backend_, *y, *Value(b, sources[k]), y);
        }
        if (s.ok() && l.kind == LayerSpec::kAverage) {
          s = elementwise::Scale(backend_, *y, 1.0f / static_cast<float>(sources.size()), y);
        }
        break;
      case LayerSpec::kMultiply:
        s = elementwise::Multiply(backend_, *x, *Value(b, sources[1]), y);
        for (size_t k = 2; s.ok() && k < sources.size(); ++k) {
          s = elementwise::Multiply(backend_, *y, *Value(b, sources[k]), y);
        }
        break;
      case LayerSpec::kSubtract:  // x - x1 as x + (-x1): the same in IEEE arithmetic
        s = elementwise::Scale(backend_, *Value(b, sources[1]), -1.0f, y);
        if (s.ok()) s = elementwise::Add(backend_, *x, *y, y);
        break;
      case LayerSpec::kMaximum:
      case LayerSpec::kMinimum:
        s = elementwise::Extremum(backend_, l.kind == LayerSpec::kMaximum, *x,
                                  *Value(b, sources[1]), y);
        break;
      case LayerSpec::kFlatten: {  // the same row-major values, as one row per example
        const int64_t per = y->size() / n;
        s = elementwise::CopyBlock(backend_, *x, per, 0, y, per, 0, n, per);
        break;
      }
      case LayerSpec::kInput: {  // its block of each packed example
        const int64_t per = y->size() / n;
        s = elementwise::CopyBlock(backend_, *x, x->size() / n, l.offset, y, per, 0, n, per);
        break;
      }
      case LayerSpec::kZeroPad:
      case LayerSpec::kCrop:
        s = PadOrCrop(l, *x, y, l.kind == LayerSpec::kZeroPad, n);
        break;
      case LayerSpec::kUpSample:  // each value spread over its block (LayerSpec)
        s = conv::Conv2DBackwardData(backend_, *x, *ones_.at(i), l.window, y);
        break;
      case LayerSpec::kConvTranspose:
        s = conv::Conv2DBackwardData(backend_, *x, *params_[v.kernel], l.window, y);
        break;
      case LayerSpec::kBiasAdd:  // x * 1 + b (LayerSpec)
        s = conv::Conv2D(backend_, *x, *ones_.at(i), Param(v.bias), l.window, l.relu, y);
        if (s.ok() && l.activation)
          s = elementwise::Activate(backend_, *l.activation, l.alpha, *y, y);
        break;
      case LayerSpec::kConcat: {
        const ConcatBlocks blocks = ConcatOf(graph, static_cast<int>(i), n);
        for (size_t k = 0; s.ok() && k < sources.size(); ++k) {
          s = elementwise::CopyBlock(backend_, *Value(b, sources[k]), blocks.cols[k], 0, y,
                                     blocks.total, blocks.first[k], blocks.rows, blocks.cols[k]);
        }
        break;
      }
      case LayerSpec::kEmbedding:
        s = embedding::EmbeddingLookup(backend_, *x, *params_[v.kernel], y);
        break;
      case LayerSpec::kLayerNorm: {
        PSC_ASSIGN_OR_RETURN(const auto stats, NormStats(b, i, *x));
        s = layer_norm::LayerNorm(backend_, *x, Param(v.gamma), Param(v.beta),
                                  static_cast<float>(l.epsilon), y, stats[0], stats[1]);
        break;
      }
      case LayerSpec::kPermute:
        s = elementwise::Transpose(backend_, *x, DevicePerm(l.perm), y);
        break;
      case LayerSpec::kScale:
        s = elementwise::Scale(backend_, *x, l.alpha, y);
        break;
      case LayerSpec::kLSTM:
        s = RunLstm(b, i, *x, sources.size() == 2 ? Value(b, sources[1]) : nullptr, y, n, training);
        break;
      case LayerSpec::kGRU:
        s = RunGru(b, i, *x, sources.size() == 2 ? Value(b, sources[1]) : nullptr, y, n, training);
        break;
      case LayerSpec::kSimpleRNN:
        s = RunSimpleRnn(b, i, *x, sources.size() == 2 ? Value(b, sources[1]) : nullptr, y, n,
                         training);
        break;
      case LayerSpec::kSequenceMask:
        s = mask::SequenceMask(backend_, *x, l.inputs, l.alpha, y);
        break;
      case LayerSpec::kMaskRows:
        s = mask::SelectRows(backend_, x, nullptr, *Value(b, sources[1]), y);
        break;
      case LayerSpec::kMaskedMean:
        s = mask::MaskedMean(backend_, *x, *Value(b, sources[1]), y);
        break;
      case LayerSpec::kMask: {
        PSC_ASSIGN_OR_RETURN(Buffers::MaskTensors * m, MaskKeep(b, i, *x, n));
        s = elementwise::Multiply(backend_, *x, *m->keep, y);
        if (s.ok()) s = elementwise::Add(backend_, *y, *m->bias, y);
        break;
      }
      case LayerSpec::kRepeat: {  // n rows of F, each copied to every block of the R x F row
        const int64_t f = x->size() / n;
        for (int64_t k = 0; s.ok() && k < l.outputs; ++k) {
          s = elementwise::CopyBlock(backend_, *x, f, 0, y, l.outputs * f, k * f, n, f);
        }
        break;
      }
      case LayerSpec::kDot: {
        const DotGeometry& d = dots_.at(i);
        const DeviceTensor* fa = x;
        const DeviceTensor* fb = Value(b, sources[1]);
        if (d.normalize) {  // each operand's vectors along K at unit norm
          PSC_RETURN_IF_ERROR(DotScratch(b, i, *fa, *fb));
          DeviceTensor* const* na = b.dot_scratch[i].data();
          s = matmul::L2Normalize(backend_, *fa, d.m, d.k, d.transpose_a, na[0]);
          if (s.ok()) s = matmul::L2Normalize(backend_, *fb, d.n, d.k, !d.transpose_b, na[1]);
          fa = na[0];
          fb = na[1];
        }
        if (s.ok()) {
          s = matmul::BatchMatMul(backend_, *fa, *fb, d.m, d.k, d.n, d.transpose_a, d.transpose_b,
                                  y);
        }
        break;
      }
    }
    if (!s.ok()) return s;
    b.outputs[i] = y;
  }
  return absl::OkStatus();
}

std::string Model::output_activation() const {
  if (output_softmax_) return "softmax";
  const LayerSpec& last = layers_.back();
  if (last.relu) return "relu";
  if (last.activation) return ActivationName(*last.activation);
  return "linear";
}

absl::Status Executor::Loss(Buffers& b, absl::Span<const int32_t> labels, const LossOptions& loss,
                            StepResult* result, DeviceTensor* dlogits) {
  result->loss_sum = 0;
  result->correct = 0;
  result->examples = static_cast<int64_t>(labels.size());
  last_ = &b;
  if (loss.kind == LossKind::kBinaryCrossEntropy) {
    const DeviceTensor& out = *b.acts.back();
    if (out.size() != static_cast<int64_t>(labels.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("binary_crossentropy: the model has ", model_->classes(),
                       " outputs per example; it takes one (a Dense of 1 unit)"));
    }
    b.host_outputs.resize(labels.size());
    b.host_doutputs.resize(labels.size());
    PSC_RETURN_IF_ERROR(backend_->CopyToHost(out, absl::MakeSpan(b.host_outputs)));
    // A sigmoid output is probabilities; a Dense without activation, logits.
    const bool from_logits = model_->output_activation() == "linear";
    PSC_RETURN_IF_ERROR(BinaryCrossEntropy(b.host_outputs, labels, from_logits, loss,
                                           absl::MakeSpan(b.host_doutputs), &result->loss_sum,
                                           &result->correct));
    if (dlogits == nullptr) return absl::OkStatus();  // evaluation
    return backend_->CopyFromHost(b.host_doutputs, dlogits);
  }
  if (IsRegression(loss.kind)) {
    // The layer's own output (a softmax is fused into the cross-entropy,
    // so what this tensor holds would not be what the model outputs).
    if (model_->output_activation() == "softmax") {
      return absl::InvalidArgumentError(
          "a regression loss takes an output without a softmax (the model ends in one)");
    }
    const DeviceTensor& out = *b.acts.back();
    b.host_outputs.resize(static_cast<size_t>(out.size()));
    b.host_doutputs.resize(static_cast<size_t>(out.size()));
    PSC_RETURN_IF_ERROR(backend_->CopyToHost(out, absl::MakeSpan(b.host_outputs)));
    PSC_RETURN_IF_ERROR(RegressionLoss(b.host_outputs, model_->classes(), loss,
                                       absl::MakeSpan(b.host_doutputs), &result->loss_sum));
    if (static_cast<int64_t>(labels.size()) * model_->classes() != out.size()) {
      return absl::InvalidArgumentError(absl::StrCat(labels.size(), " examples for ", out.size(),
                                                     " outputs of ", model_->classes(),
                                                     " unit(s) each"));
    }
    if (dlogits == nullptr) return absl::OkStatus();  // evaluation
    return backend_->CopyFromHost(b.host_doutputs, dlogits);
  }
  // Evaluation: the gradient goes to a scratch tensor of the logits' size.
  if (dlogits == nullptr) {
    if (b.eval_dlogits == nullptr) {
      PSC_ASSIGN_OR_RETURN(b.eval_dlogits,
                           backend_->Allocate(b.acts.back()->shape(), b.acts.back()->dtype()));
    }
    dlogits = b.eval_dlogits.get();
  }
  // The labels and weights go to the backend and the totals come back
  // (loss_ops.h); a bad label is refused here, before any of it.
  const DeviceTensor& logits = *b.acts.back();
  PSC_RETURN_IF_ERROR(WantRank(loss::kSoftmaxCrossEntropy, "logits", logits, 2));
  const int64_t n = logits.shape()[0];
  PSC_RETURN_IF_ERROR(loss::CheckLabels(labels, loss.weights, n, logits.shape()[1]));
  if (b.labels == nullptr) {
    PSC_ASSIGN_OR_RETURN(b.labels, backend_->Allocate({n}, DType::kInt32));
    PSC_ASSIGN_OR_RETURN(b.loss_sum, backend_->Allocate({1}, DType::kFloat64));
    PSC_ASSIGN_OR_RETURN(b.correct, backend_->Allocate({1}, DType::kInt64));
  }
  PSC_RETURN_IF_ERROR(backend_->CopyFromHost(labels, b.labels.get()));
  const DeviceTensor* weights = nullptr;
  if (!loss.weights.empty()) {
    if (b.weights == nullptr) {
      PSC_ASSIGN_OR_RETURN(b.weights, backend_->Allocate({n}));
    }
    PSC_RETURN_IF_ERROR(backend_->CopyFromHost(loss.weights, b.weights.get()));
    weights = b.weights.get();
  }
  PSC_RETURN_IF_ERROR(loss::SoftmaxCrossEntropy(backend_, logits, *b.labels, weights,
                                                loss.grad_scale, loss.label_smoothing, dlogits,
                                                b.loss_sum.get(), b.correct.get()));
  PSC_RETURN_IF_ERROR(
      backend_->CopyToHost(*b.loss_sum, absl::MakeSpan(&result->loss_sum, size_t{1})));
  return backend_->CopyToHost(*b.correct, absl::MakeSpan(&result->correct, size_t{1}));
}

Executor::ConcatBlocks Executor::ConcatOf(const LayerGraph& graph, int layer, int64_t n) {
  // With the batch, each tensor is rows x (its extent from the axis on).
  const int axis = model_->layers()[layer].axis;
  const Shape& out = graph.tensor(LayerGraph::OutputOf(layer)).shape;
  ConcatBlocks c;
  c.rows = n;
  for (int d = 0; d < axis; ++d) c.rows *= out[d];
  c.total = ShapeSize(out) * n / c.rows;
  int64_t first = 0;
  for (int t : graph.sources(layer)) {
    const int64_t cols = ShapeSize(graph.tensor(t).shape) * n / c.rows;
    c.first.push_back(first);
    c.cols.push_back(cols);
    first += cols;
  }
  return c;
}

absl::Status Executor::PadOrCrop(const LayerSpec& l, const DeviceTensor& x, DeviceTensor* y,
                                 bool pad, int64_t n) {
  const Shape& small = pad ? x.shape() : y->shape();  // [n, H, W, C]
  const Shape& big = pad ? y->shape() : x.shape();
  if (small.size() != 4 || big.size() != 4 || l.pads.size() != 4 || n < 1) {
    return absl::InternalError(absl::StrCat("layer ", l.name, ": not a padding of 4-D tensors"));
  }
  const int64_t row = small[2] * small[3];
  const int64_t small_per = small[1] * row, big_per = big[1] * big[2] * big[3];
  if (pad) {
    // The border: zeros, copied in (no backend op fills a tensor).
    if (static_cast<int64_t>(host_zeros_.size()) < y->size()) {
      host_zeros_.resize(static_cast<size_t>(y->size()), 0.0f);
    }
    PSC_RETURN_IF_ERROR(
        backend_->CopyFromHost(absl::MakeConstSpan(host_zeros_).subspan(0, y->size()), y));
  }
  for (int64_t h = 0; h < small[1]; ++h) {
    const int64_t big_first = ((h + l.pads[0]) * big[2] + l.pads[2]) * big[3];
    const absl::Status s =
        pad ? elementwise::CopyBlock(backend_, x, small_per, h * row, y, big_per, big_first, n, row)
            : elementwise::CopyBlock(backend_, x, big_per, big_first, y, small_per, h * row, n,
                                     row);
    PSC_RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

// Source k's part of the gradient g of merge `layer`'s output, into dest
// (of that source's shape): d(x0 * x1 * ...)/dxk = g * the others, d(mean)
// = g / count, d(x0 - x1) = g and -g, and Concatenate's block of g.
absl::Status Executor::MergeContribution(const Buffers& b, int layer, size_t k,
                                         const DeviceTensor& g, DeviceTensor* dest) {
  const LayerSpec& l = model_->layers()[layer];
  const std::vector<int>& sources = model_->graph().sources(layer);
  switch (l.kind) {
    case LayerSpec::kMultiply: {
      bool first = true;
      for (size_t j = 0; j < sources.size(); ++j) {
        if (j == k) continue;
        PSC_RETURN_IF_ERROR(
            elementwise::Multiply(backend_, first ? g : *dest, *Value(b, sources[j]), dest));
        first = false;
      }
      return absl::OkStatus();
    }
    case LayerSpec::kAverage:
      return elementwise::Scale(backend_, g, 1.0f / static_cast<float>(sources.size()), dest);
    case LayerSpec::kSubtract:
      return k == 0 ? elementwise::Copy(backend_, g, dest)
                    : elementwise::Scale(backend_, g, -1.0f, dest);
    case LayerSpec::kMaximum:
    case LayerSpec::kMinimum:
      return elementwise::ExtremumGradient(backend_, l.kind == LayerSpec::kMaximum,
                                           *Value(b, sources[k]), *Value(b, sources[1 - k]), g,
                                           dest);
    case LayerSpec::kZeroPad:  // the gradient's inner block; of a crop, the gradient padded
    case LayerSpec::kCrop: {
      const int64_t n =
          g.size() / ShapeSize(model_->graph().tensor(LayerGraph::OutputOf(layer)).shape);
      return PadOrCrop(l, g, dest, l.kind == LayerSpec::kCrop, n);
    }
    case LayerSpec::kFlatten: {
      const int64_t per = ShapeSize(model_->graph().tensor(LayerGraph::OutputOf(layer)).shape);
      const int64_t n = per > 0 ? g.size() / per : 0;
      return elementwise::CopyBlock(backend_, g, per, 0, dest, per, 0, n, per);
    }
    case LayerSpec::kConcat: {
      const int64_t n =
          g.size() / ShapeSize(model_->graph().tensor(LayerGraph::OutputOf(layer)).shape);
      const ConcatBlocks c = ConcatOf(model_->graph(), layer, n);
      return elementwise::CopyBlock(backend_, g, c.total, c.first[k], dest, c.cols[k], 0, c.rows,
                                    c.cols[k]);
    }
    default:
      return absl::InternalError(absl::StrCat("layer ", l.name, " is not a merge"));
  }
}

absl::Status Executor::ComputeGradients(absl::Span<const float> images,
                                        absl::Span<const int32_t> labels, const LossOptions& loss,
                                        StepResult* result) {
  const int64_t n = static_cast<int64_t>(labels.size());
  if (n < 1) return absl::InvalidArgumentError("empty batch");
  PSC_ASSIGN_OR_RETURN(auto buffers, BuffersFor(n, /*forward_only=*/false));
  Buffers& b = *buffers;
  PSC_RETURN_IF_ERROR(Forward(b, images, n, /*training=*/true));
  PSC_RETURN_IF_ERROR(Loss(b, labels, loss, result, b.grads.back()));
  const auto& layers = model_->layers();
  const LayerGraph& graph = model_->graph();
  // Of each tensor: whether a consumer has put its contribution into the
  // gradient yet. The consumers of a tensor all come after its producer, so
  // going down the layers, every contribution is in before the producer
  // reads the gradient; the first is written in place, the others added.
  std::vector<bool> started(graph.num_tensors(), false);
  for (int i = static_cast<int>(layers.size()) - 1; i >= 0; --i) {
    const LayerSpec& l = layers[i];
    const LayerVariables& v = model_->layer_variables()[i];
    const std::vector<int>& sources = graph.sources(i);
    DeviceTensor* g = b.grads[i];  // gradient w.r.t. this layer's output
    const bool has_variables = !LayerVariableIndices(v).empty();
    // Tells the hook, once, that this layer's variable gradients are final.
    bool reported = false;
    auto ready = [&]() -> absl::Status {
      reported = true;
      return gradient_ready_ ? gradient_ready_(i) : absl::OkStatus();
    };
    if (!needs_gradient_[LayerGraph::OutputOf(i)]) {
      // Nothing below to pass a gradient to, nothing to train: a frozen
      // layer's variable gradients stay 0, final now.
      if (has_variables) PSC_RETURN_IF_ERROR(ready());
      continue;
    }
    const bool weights = AppliesActivation(l.kind);
    if (weights && l.relu)
      PSC_RETURN_IF_ERROR(elementwise::ReluBackward(backend_, *b.acts[i], *g, g));
    if (weights && l.activation) {
      PSC_RETURN_IF_ERROR(
          elementwise::ActivateBackward(backend_, *l.activation, l.alpha, *b.acts[i], *g, g));
    }
    const DeviceTensor* x = Value(b, sources[0]);
    // Where this layer's contribution to the gradient of its source t goes
    // (null for a tensor that needs none: the model's inputs, a frozen
    // base's), and, once it is made, adding it to the others'.
    auto contribution = [&](int t) -> DeviceTensor* {
      if (!needs_gradient_[t]) return nullptr;
      return started[t] ? b.contributions[t].get() : b.grads[t - 1];
    };
    auto contributed = [&](int t) -> absl::Status {
      if (!needs_gradient_[t]) return absl::OkStatus();
      if (!started[t]) {
        started[t] = true;
        return absl::OkStatus();
      }
      return elementwise::Add(backend_, *b.grads[t - 1], *b.contributions[t], b.grads[t - 1]);
    };
    DeviceTensor* dx = contribution(sources[0]);
    absl::Status s;
    switch (l.kind) {
      case LayerSpec::kConv:
        if (l.trainable) {  // a frozen layer's stay 0
          s = conv::Conv2DBackwardWeights(backend_, *x, *g, l.window, param_grads_[v.kernel].get(),
                                          ParamGrad(v.bias));
        }
        if (s.ok()) s = ready();  // before the data gradient, so sending overlaps it
        if (s.ok() && dx != nullptr) {
          s = conv::Conv2DBackwardData(backend_, *g, *params_[v.kernel], l.window, dx);
        }
        break;
      case LayerSpec::kDense:
        if (l.trainable) {
          s = dense::DenseBackwardWeights(backend_, *x, *g, param_grads_[v.kernel].get(),
                                          ParamGrad(v.bias));
        }
        if (s.ok()) s = ready();
        if (s.ok() && dx != nullptr)
          s = dense::DenseBackwardData(backend_, *g, *params_[v.kernel], dx);
        break;
      case LayerSpec::kPool:
        s = l.pooling == GlobalPooling::kMax
                ? pooling::MaxPoolBackward(backend_, *x, *g, l.window, dx)
                : pooling::AvgPoolBackward(backend_, *x, *g, l.window, dx);
        break;
      case LayerSpec::kActivation:
        // gelu and silu from their input, the others from their output.
        s = elementwise::ActivateBackward(backend_, *l.activation, l.alpha,
                                          GradientFromInput(*l.activation) ? *x : *b.acts[i], *g,
                                          dx);
        break;
      case LayerSpec::kGlobalPool:
        s = pooling::GlobalPoolBackward(backend_, l.pooling, *x, *g, dx);
        break;
      case LayerSpec::kUpSample:  // each block's sum
        s = conv::Conv2D(backend_, *g, *ones_.at(i), nullptr, l.window, false, dx);
        break;
      case LayerSpec::kConvTranspose:  // the convolution's roles swapped: g is its input
        if (l.trainable) {
          s = conv::Conv2DBackwardWeights(backend_, *g, *x, l.window, param_grads_[v.kernel].get(),
                                          nullptr);
        }
        if (s.ok()) s = ready();
        if (s.ok() && dx != nullptr) {
          s = conv::Conv2D(backend_, *g, *params_[v.kernel], nullptr, l.window, false, dx);
        }
        break;
      case LayerSpec::kBiasAdd:  // the bias's gradient: the sum of g per channel
        if (l.trainable) {
          s = conv::Conv2DBackwardWeights(backend_, *x, *g, l.window, bias_dw_.at(i).get(),
                                          ParamGrad(v.bias));
        }
        if (s.ok()) s = ready();
        if (s.ok() && dx != nullptr) s = elementwise::Copy(backend_, *g, dx);
        break;
      case LayerSpec::kDropout:
        s = elementwise::Multiply(backend_, *g, *b.masks[i], dx);
        break;
      case LayerSpec::kDot: {
        // y = op(a)·op(b): each factor's gradient is g times the other,
        // in its own stored layout (matmul_ops.h). Normalized, the factors
        // are the normalized operands, and each one's gradient goes back
        // through its normalization.
        const DotGeometry& d = dots_.at(i);
        const DeviceTensor* a = d.normalize ? b.dot_scratch[i][0] : x;
        const DeviceTensor* bt = d.normalize ? b.dot_scratch[i][1] : Value(b, sources[1]);
        for (int k = 0; s.ok() && k < 2; ++k) {
          const int t = sources[k];
          DeviceTensor* const final_dest = contribution(t);
          if (final_dest == nullptr) continue;
          DeviceTensor* dest = d.normalize ? b.dot_scratch[i][2 + k] : final_dest;
          if (k == 0) {
            s = d.transpose_a ? matmul::BatchMatMul(backend_, *bt, *g, d.k, d.n, d.m, d.transpose_b,
                                                    true, dest)
                              : matmul::BatchMatMul(backend_, *g, *bt, d.m, d.n, d.k, false,
                                                    !d.transpose_b, dest);
          } else {
            s = d.transpose_b ? matmul::BatchMatMul(backend_, *g, *a, d.n, d.m, d.k, true,
                                                    d.transpose_a, dest)
                              : matmul::BatchMatMul(backend_, *a, *g, d.k, d.m, d.n, !d.transpose_a,
                                                    false, dest);
          }
          if (s.ok() && d.normalize) {
            s = k == 0 ? matmul::L2NormalizeGradient(backend_, *x, *dest, d.m, d.k, d.transpose_a,
                                                     final_dest)
                       : matmul::L2NormalizeGradient(backend_, *Value(b, sources[1]), *dest, d.n,
                                                     d.k, !d.transpose_b, final_dest);
          }
          if (s.ok()) s = contributed(t);
        }
        if (!s.ok()) return s;
        continue;
      }
      case LayerSpec::kLayerNorm: {
        const auto& stats = b.norm_stats.at(i);
        s = layer_norm::LayerNormBackward(
            backend_, *x, *g, Param(v.gamma), *stats[0], *stats[1], dx,
            l.trainable && v.gamma >= 0 ? ParamGrad(v.gamma) : nullptr,
            l.trainable && v.beta >= 0 ? ParamGrad(v.beta) : nullptr);
        break;
      }
      case LayerSpec::kPermute:
        if (dx != nullptr)
          s = elementwise::Transpose(backend_, *g, Inverse(DevicePerm(l.perm)), dx);
        break;
      case LayerSpec::kScale:
        if (dx != nullptr) s = elementwise::Scale(backend_, *g, l.alpha, dx);
        break;
      case LayerSpec::kLSTM:
        s = LstmBackward(b, i, *x, sources.size() == 2 ? Value(b, sources[1]) : nullptr, *g, dx,
                         ready);
        break;
      case LayerSpec::kGRU:
        s = GruBackward(b, i, *x, sources.size() == 2 ? Value(b, sources[1]) : nullptr, *g, dx,
                        ready);
        break;
      case LayerSpec::kSimpleRNN:
        s = SimpleRnnBackward(b, i, *x, sources.size() == 2 ? Value(b, sources[1]) : nullptr, *g,
                              dx, ready);
        break;
      case LayerSpec::kSequenceMask:  // needs no gradient: never here
        break;
      case LayerSpec::kMaskRows:  // a kept step's gradient passes, a masked one's is 0
        if (dx != nullptr) s = mask::SelectRows(backend_, g, nullptr, *Value(b, sources[1]), dx);
        break;
      case LayerSpec::kMaskedMean:
        if (dx != nullptr) s = mask::MaskedMeanBackward(backend_, *g, *Value(b, sources[1]), dx);
        break;
      case LayerSpec::kMask:  // a kept score's gradient passes, a masked one's is 0
        if (dx != nullptr) s = elementwise::Multiply(backend_, *g, *b.masks_bias.at(i).keep, dx);
        break;
      case LayerSpec::kRepeat:  // the sum of the R blocks: their mean, times R
        if (dx != nullptr) {
          s = pooling::GlobalPool(backend_, GlobalPooling::kAverage, *g, dx);
          if (s.ok()) s = elementwise::Scale(backend_, *dx, static_cast<float>(l.outputs), dx);
        }
        break;
      case LayerSpec::kEmbedding:  // the table's rows; the ids take none
        if (l.trainable) {
          s = embedding::EmbeddingGradient(backend_, *x, *params_[v.kernel], *g,
                                           param_grads_[v.kernel].get());
        }
        if (s.ok()) s = ready();
        break;
      case LayerSpec::kBatchNorm: {
        BatchNormFill* fill = v.gamma < 0 || v.beta < 0 || !l.trainable ? &bn_fill_[i] : nullptr;
        const DeviceTensor& gamma = v.gamma >= 0 ? *params_[v.gamma] : *fill->gamma;
        if (!l.trainable) {
          // Inference mode: y = (x - mean) * gamma / sqrt(variance + eps) +
          // beta with the moving statistics, constants here, so dx is dy
          // scaled per channel: that same normalization of dy with mean and
          // beta 0. Its variables' "gradients" stay 0.
          if (dx != nullptr) {
            s = batch_norm::BatchNormInference(backend_, *g, gamma, *fill->zeros, *fill->zeros,
                                               *params_[v.variance], static_cast<float>(l.epsilon),
                                               dx);
          }
          break;
        }
        s = batch_norm::BatchNormBackward(
            backend_, *x, *g, gamma, *param_grads_[v.mean], *param_grads_[v.variance],
            static_cast<float>(l.epsilon), dx != nullptr ? dx : g,
            v.gamma >= 0 ? param_grads_[v.gamma].get() : fill->dgamma.get(),
            v.beta >= 0 ? param_grads_[v.beta].get() : fill->dbeta.get());
        break;
      }
      case LayerSpec::kAdd:
        // Each source's contribution is g itself: copied into the first
        // (its own gradient), added to the gradient of a started one.
        for (size_t k = 0; s.ok() && k < sources.size(); ++k) {
          const int t = sources[k];
          if (!needs_gradient_[t]) continue;
          if (started[t]) {
            s = elementwise::Add(backend_, *b.grads[t - 1], *g, b.grads[t - 1]);
          } else {
            s = elementwise::Copy(backend_, *g, b.grads[t - 1]);
            started[t] = true;
          }
        }
        if (!s.ok()) return s;
        continue;
      case LayerSpec::kMultiply:
      case LayerSpec::kAverage:
      case LayerSpec::kSubtract:
      case LayerSpec::kConcat:
      case LayerSpec::kMaximum:
      case LayerSpec::kMinimum:
      case LayerSpec::kFlatten:
      case LayerSpec::kInput:  // of the model's input: no gradient to pass
      case LayerSpec::kZeroPad:
      case LayerSpec::kCrop:
        for (size_t k = 0; s.ok() && k < sources.size(); ++k) {
          const int t = sources[k];
          if (!needs_gradient_[t]) continue;
          s = MergeContribution(b, i, k, *g, contribution(t));
          if (s.ok()) s = contributed(t);
        }
        if (!s.ok()) return s;
        continue;
    }
    if (s.ok()) s = contributed(sources[0]);
    // BatchNormalization (any layer with variables not told above): final
    // once its backward op is done.
    if (s.ok() && has_variables && !reported) s = ready();
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

DeviceTensor* Executor::ParamGrad(int index) {
  return index < 0 ? nullptr : param_grads_[index].get();
}

absl::Status Executor::CopyGradient(int index, absl::Span<float> out) {
  if (index < 0 || index >= static_cast<int>(param_grads_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no parameter ", index));
  }
  if (frozen_[index] && out.size() == static_cast<size_t>(param_grads_[index]->size())) {
    std::fill(out.begin(), out.end(), 0.0f);  // always 0: no device copy
    return absl::OkStatus();
  }
  return backend_->CopyToHost(*param_grads_[index], out);
}

DeviceTensor* Executor::GradientTensor(int index) {
  if (index < 0 || index >= static_cast<int>(param_grads_.size())) return nullptr;
  return param_grads_[index].get();
}

absl::Status Executor::CopyGradients(std::vector<std::vector<float>>* grads) {
  grads->resize(param_grads_.size());
  std::vector<const DeviceTensor*> src;
  std::vector<absl::Span<float>> dst;
  for (size_t i = 0; i < param_grads_.size(); ++i) {
    (*grads)[i].resize(param_grads_[i]->size());
    if (frozen_[i]) {  // always 0: no device copy (a GPU's would cross PCIe)
      std::fill((*grads)[i].begin(), (*grads)[i].end(), 0.0f);
      continue;
    }
    src.push_back(param_grads_[i].get());
    dst.push_back(absl::MakeSpan((*grads)[i]));
  }
  return backend_->CopyManyToHost(src, dst);  // one round trip for all
}

absl::Status Executor::Prepare(const std::vector<int64_t>& batches, bool training) {
  for (int64_t n : batches) {
    if (n < 1) continue;
    PSC_RETURN_IF_ERROR(backend_->Prepare(ModelOpSpecs(*model_, n, training)));
  }
  return absl::OkStatus();
}

std::vector<DType> Model::ComputeDtypes() const {
  std::vector<DType> out;
  for (const LayerSpec& l : layers_) {
    if (l.kind == LayerSpec::kInput) continue;  // an input's block, not a Keras layer's compute
    if (std::find(out.begin(), out.end(), l.compute) == out.end()) out.push_back(l.compute);
  }
  if (out.empty()) out.push_back(DType::kFloat32);
  std::sort(out.begin(), out.end());
  return out;
}

std::string Model::ComputeDtypesText() const {
  const std::vector<DType> dtypes = ComputeDtypes();
  if (dtypes.size() == 1) return DTypeName(dtypes[0]);
  std::vector<std::string> parts;
  for (DType d : dtypes) {
    const int64_t n = std::count_if(layers_.begin(), layers_.end(), [d](const LayerSpec& l) {
      return l.compute == d && l.kind != LayerSpec::kInput;
    });
    parts.push_back(absl::StrCat(DTypeName(d), " (", n, n == 1 ? " layer)" : " layers)"));
  }
  return absl::StrJoin(parts, ", ");
}

std::vector<OpSpec> ModelOpSpecs(const Model& model, int64_t batch, bool training) {
  std::vector<OpSpec> specs;
  const int64_t n = std::max<int64_t>(batch, 1);
  const LayerGraph& graph = model.graph();
  const auto& layers = model.layers();
  for (int i = 0; i < graph.num_layers(); ++i) {
    const LayerSpec& l = layers[i];
    const Shape cur = graph.BatchShape(graph.sources(i)[0], n);
    const Shape out = graph.BatchShape(LayerGraph::OutputOf(i), n);
    auto add = [&](const char* forward, const char* backward, const Shape& kernel,
                   const Window& window = {}) {
      specs.push_back({forward, cur, kernel, window});
      if (training) specs.push_back({backward, cur, kernel, window});
    };
    switch (l.kind) {
      case LayerSpec::kConv: {
        const Shape kernel = l.window.Kernel(cur[3], l.outputs);
        // A 16-bit kernel runs where the input and output share the format
        // (a first layer's float32 input goes through float32 copies).
        const DType in = graph.tensor(graph.sources(i)[0]).dtype;
        const DType dtype =
            in == graph.tensor(LayerGraph::OutputOf(i)).dtype ? in : DType::kFloat32;
        specs.push_back({conv::kConv2D, cur, kernel, l.window, dtype});
        if (training) {
          specs.push_back({conv::kConv2DBackwardData, cur, kernel, l.window, dtype});
          specs.push_back({conv::kConv2DBackwardWeights, cur, kernel, l.window, dtype});
        }
        break;
      }
      case LayerSpec::kPool:
        if (l.pooling == GlobalPooling::kMax) {
          add(pooling::kMaxPool, pooling::kMaxPoolBackward, {}, l.window);
        } else {
          add(pooling::kAvgPool, pooling::kAvgPoolBackward, {}, l.window);
        }
        break;
      case LayerSpec::kDense: {
        // Its rows: the batch's examples, or on the last axes their steps.
        const Shape x = {l.target.empty() ? n : ShapeSize(cur) / l.inputs, l.inputs};
        specs.push_back({dense::kDense, x, {l.inputs, l.outputs}});
        if (training) {
          specs.push_back({dense::kDenseBackwardData, x, {l.inputs, l.outputs}});
          specs.push_back({dense::kDenseBackwardWeights, x, {l.inputs, l.outputs}});
        }
        break;
      }
      case LayerSpec::kActivation:
        add(elementwise::kActivate, elementwise::kActivateBackward, {});
        break;
      case LayerSpec::kGlobalPool:
        add(pooling::kGlobalPool, pooling::kGlobalPoolBackward, {});
        break;
      case LayerSpec::kDropout:
        if (training) specs.push_back({elementwise::kMultiply, cur, {}});
        break;
      case LayerSpec::kBatchNorm:
        if (training) {
          add(batch_norm::kBatchNorm, batch_norm::kBatchNormBackward, {});
        } else {
          specs.push_back({batch_norm::kBatchNormInference, cur, {}});
        }
        break;
      case LayerSpec::kAdd:
        specs.push_back({elementwise::kAdd, cur, {}});  // the backward pass copies and adds
        if (training) specs.push_back({elementwise::kCopy, cur, {}});
        break;
      case LayerSpec::kMultiply:
        specs.push_back({elementwise::kMultiply, cur, {}});
        break;
      case LayerSpec::kAverage:
      case LayerSpec::kSubtract:
        specs.push_back({elementwise::kAdd, cur, {}});
        specs.push_back({elementwise::kScale, cur, {}});
        if (training) specs.push_back({elementwise::kCopy, cur, {}});
        break;
      case LayerSpec::kConcat:
        specs.push_back({elementwise::kCopyBlock, out, {}});
        break;
      case LayerSpec::kMaximum:
      case LayerSpec::kMinimum:
        specs.push_back({elementwise::kExtremum, cur, {}});
        if (training) specs.push_back({elementwise::kExtremumGradient, cur, {}});
        break;
      case LayerSpec::kFlatten:
      case LayerSpec::kInput:
      case LayerSpec::kZeroPad:
      case LayerSpec::kCrop:
        specs.push_back({elementwise::kCopyBlock, cur, {}});
        break;
      case LayerSpec::kUpSample: {  // the convolution on the output's shape (LayerSpec)
        const Shape kernel = l.window.Kernel(cur[3], cur[3]);
        specs.push_back({conv::kConv2DBackwardData, out, kernel, l.window});
        if (training) specs.push_back({conv::kConv2D, out, kernel, l.window});
        break;
      }
      case LayerSpec::kConvTranspose: {  // likewise, with the layer's kernel
        const Shape kernel = l.window.Kernel(out[3], cur[3]);
        specs.push_back({conv::kConv2DBackwardData, out, kernel, l.window});
        if (training) {
          specs.push_back({conv::kConv2D, out, kernel, l.window});
          specs.push_back({conv::kConv2DBackwardWeights, out, kernel, l.window});
        }
        break;
      }
      case LayerSpec::kEmbedding:
        add(embedding::kEmbeddingLookup, embedding::kEmbeddingGradient, {l.inputs, l.outputs});
        break;
      case LayerSpec::kDot:
        specs.push_back({matmul::kBatchMatMul, cur, {}});
        break;
      case LayerSpec::kLayerNorm:
        add(layer_norm::kLayerNorm, layer_norm::kLayerNormBackward, {});
        break;
      case LayerSpec::kPermute:
        specs.push_back({elementwise::kTranspose, cur, {}});
        break;
      case LayerSpec::kScale:
        specs.push_back({elementwise::kScale, cur, {}});
        break;
      case LayerSpec::kLSTM: {
        const Shape rows = {ShapeSize(cur) / l.inputs, l.inputs};
        const Shape step = {n, l.outputs};
        specs.push_back({dense::kDense, rows, {l.inputs, 4 * l.outputs}});
        specs.push_back({dense::kDense, step, {l.outputs, 4 * l.outputs}});
        specs.push_back({rnn::kLstmCell, {n, 4 * l.outputs}, {}});
        if (l.sources.size() == 2) specs.push_back({mask::kSelectRows, step, {}});
        specs.push_back({elementwise::kCopyBlock, out, {}});
        if (training) {
          specs.push_back({rnn::kLstmCellBackward, {n, 4 * l.outputs}, {}});
          specs.push_back({dense::kDenseBackwardData, step, {l.outputs, 4 * l.outputs}});
          specs.push_back({dense::kDenseBackwardWeights, rows, {l.inputs, 4 * l.outputs}});
          specs.push_back({dense::kDenseBackwardData, rows, {l.inputs, 4 * l.outputs}});
        }
        break;
      }
      case LayerSpec::kGRU: {
        const Shape rows = {ShapeSize(cur) / l.inputs, l.inputs};
        const Shape step = {n, l.outputs};
        specs.push_back({dense::kDense, rows, {l.inputs, 3 * l.outputs}});
        specs.push_back({dense::kDense, step, {l.outputs, 3 * l.outputs}});
        specs.push_back({rnn::kGruCell, {n, 3 * l.outputs}, {}});
        if (l.sources.size() == 2) specs.push_back({mask::kSelectRows, step, {}});
        specs.push_back({elementwise::kCopyBlock, out, {}});
        if (training) {
          specs.push_back({rnn::kGruCellBackward, {n, 3 * l.outputs}, {}});
          specs.push_back({dense::kDenseBackwardData, step, {l.outputs, 3 * l.outputs}});
          specs.push_back({dense::kDenseBackwardWeights, rows, {l.inputs, 3 * l.outputs}});
          specs.push_back({dense::kDenseBackwardData, rows, {l.inputs, 3 * l.outputs}});
        }
        if (!l.reset_after) {  // the reset gate's own ops (RunGru)
          specs.push_back({dense::kDense, step, {l.outputs, l.outputs}});
          specs.push_back({elementwise::kAdd, step, {}});
          specs.push_back({elementwise::kActivate, step, {}});
          specs.push_back({elementwise::kMultiply, step, {}});
          if (training) {
            specs.push_back({dense::kDenseBackwardData, step, {l.outputs, l.outputs}});
            specs.push_back({dense::kDenseBackwardWeights, step, {l.outputs, l.outputs}});
            specs.push_back({elementwise::kActivateBackward, step, {}});
          }
        }
        break;
      }
      case LayerSpec::kSimpleRNN: {
        const Shape rows = {ShapeSize(cur) / l.inputs, l.inputs};
        const Shape step = {n, l.outputs};
        specs.push_back({dense::kDense, rows, {l.inputs, l.outputs}});
        specs.push_back({dense::kDense, step, {l.outputs, l.outputs}});
        specs.push_back({elementwise::kAdd, step, {}});
        specs.push_back({elementwise::kActivate, step, {}});
        if (l.sources.size() == 2) specs.push_back({mask::kSelectRows, step, {}});
        specs.push_back({elementwise::kCopyBlock, out, {}});
        if (training) {
          specs.push_back({elementwise::kActivateBackward, step, {}});
          specs.push_back({dense::kDenseBackwardData, step, {l.outputs, l.outputs}});
          specs.push_back({dense::kDenseBackwardWeights, rows, {l.inputs, l.outputs}});
          specs.push_back({dense::kDenseBackwardData, rows, {l.inputs, l.outputs}});
        }
        break;
      }
      case LayerSpec::kMask:
        specs.push_back({elementwise::kMultiply, cur, {}});
        specs.push_back({elementwise::kAdd, cur, {}});
        specs.push_back({elementwise::kScale, cur, {}});
        specs.push_back({elementwise::kCopyBlock, cur, {}});
        if (l.query_mask || l.value_mask) specs.push_back({matmul::kBatchMatMul, cur, {}});
        break;
      case LayerSpec::kSequenceMask:
        specs.push_back({mask::kSequenceMask, cur, {}});
        break;
      case LayerSpec::kMaskRows:
        specs.push_back({mask::kSelectRows, cur, {}});
        break;
      case LayerSpec::kMaskedMean:
        add(mask::kMaskedMean, mask::kMaskedMeanBackward, {});
        break;
      case LayerSpec::kRepeat:
        specs.push_back({elementwise::kCopyBlock, out, {}});
        if (training) {
          specs.push_back({pooling::kGlobalPool, out, {}});
          specs.push_back({elementwise::kScale, cur, {}});
        }
        break;

      case LayerSpec::kBiasAdd: {
        const Shape kernel = l.window.Kernel(cur[3], cur[3]);
        specs.push_back({conv::kConv2D, cur, kernel, l.window});
        if (training) {
          specs.push_back({conv::kConv2DBackwardWeights, cur, kernel, l.window});
          specs.push_back({elementwise::kCopy, cur, {}});
        }
        break;
      }
    }
    const bool weights = AppliesActivation(l.kind);
    if (weights && l.relu && training) specs.push_back({elementwise::kReluBackward, out, {}});
    if (weights && l.activation) {
      specs.push_back({elementwise::kActivate, out, {}});
      if (training) specs.push_back({elementwise::kActivateBackward, out, {}});
    }
    // A shared output's gradient is the sum of its consumers' contributions.
    if (training && graph.IsShared(LayerGraph::OutputOf(i)))
      specs.push_back({elementwise::kAdd, out, {}});
  }
  // A softmax cross-entropy runs on the backend; the binary one on the host.
  if (model.output_activation() == "linear" || model.output_softmax()) {
    specs.push_back({loss::kSoftmaxCrossEntropy, {n, model.classes()}, {}});
  }
  return specs;
}

absl::Status Executor::Predict(absl::Span<const float> images, std::vector<float>* outputs) {
  const int64_t per = model_->input_elements();
  const int64_t n = per > 0 ? static_cast<int64_t>(images.size()) / per : 0;
  if (n < 1) return absl::InvalidArgumentError("empty batch");
  PSC_ASSIGN_OR_RETURN(auto buffers, BuffersFor(n, /*forward_only=*/true));
  PSC_RETURN_IF_ERROR(Forward(*buffers, images, n, /*training=*/false));
  return CopyOutputsOf(*buffers->acts.back(), outputs);
}

absl::Status Executor::CopyOutputs(std::vector<float>* outputs) {
  if (last_ == nullptr) {
    return absl::FailedPreconditionError("CopyOutputs before any ComputeGradients or Evaluate");
  }
  return CopyOutputsOf(*last_->acts.back(), outputs);
}

absl::Status Executor::CopyOutputsOf(const DeviceTensor& logits, std::vector<float>* outputs) {
  const int64_t classes = model_->classes();
  const int64_t n = classes > 0 ? logits.size() / classes : 0;
  outputs->resize(static_cast<size_t>(n * classes));
  PSC_RETURN_IF_ERROR(backend_->CopyToHost(logits, absl::MakeSpan(*outputs)));
  if (!model_->output_softmax()) return absl::OkStatus();
  for (int64_t i = 0; i < n; ++i) {  // as Keras's softmax: exp(x - max) / sum
    float* row = outputs->data() + i * classes;
    const float max = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(row[k] - max));
    for (int64_t k = 0; k < classes; ++k) {
      row[k] = static_cast<float>(std::exp(static_cast<double>(row[k] - max)) / sum);
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::Evaluate(absl::Span<const float> images, absl::Span<const int32_t> labels,
                                const LossOptions& loss, StepResult* result) {
  const int64_t n = static_cast<int64_t>(labels.size());
  if (n < 1) return absl::InvalidArgumentError("empty batch");
  PSC_ASSIGN_OR_RETURN(auto buffers, BuffersFor(n, /*forward_only=*/true));
  PSC_RETURN_IF_ERROR(Forward(*buffers, images, n, /*training=*/false));
  return Loss(*buffers, labels, loss, result, /*dlogits=*/nullptr);
}

}  // namespace compute
}  // namespace psc
