// The model a worker trains: a chain of layers read from a Keras config
// (common/keras/keras_config.h; the built-in seed_cnn and mlp are such configs, shipped in
// models/), its variables with Keras names and layouts, their initializers,
// and the Executor that runs one replica's forward and backward pass on a
// ComputeBackend.
#ifndef PSC_COMMON_COMPUTE_MODEL_H_
#define PSC_COMMON_COMPUTE_MODEL_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compute/backend.h"
#include "common/compute/layer_graph.h"
#include "common/compute/layer_spec.h"
#include "common/tensor/tensor.h"

namespace psc {
namespace compute {

// Where a layer's variables are in Model::variables(), -1 for none; in
// Keras's order (kernel, bias; gamma, beta, moving_mean, moving_variance).
struct LayerVariables {
  int kernel = -1, bias = -1;
  int gamma = -1, beta = -1, mean = -1, variance = -1;
  int recurrent = -1;  // an LSTM's recurrent_kernel (between its kernel and bias)
};

// The indices of `v` that are not -1, ascending (model.variables() order);
// empty for a layer without variables (pooling, activation, dropout).
std::vector<int> LayerVariableIndices(const LayerVariables& v);

// One line of `pscluster describe`, as Keras's summary() prints a layer.
struct SummaryRow {
  std::string name;         // "conv2d"
  std::string keras_class;  // "Conv2D"
  Shape output;             // without the batch: {28, 28, 32}
  int64_t params = 0;       // all of its variables' elements, trainable or not
  int variables = 0;        // its variables, in Keras's order (.weights.h5 "vars/0", ...)
  // A layer whose variables Keras keeps in its sublayers (MultiHeadAttention's
  // "query_dense", ...): each variable's sublayer, in order (its "vars/i"
  // counted within the sublayer); empty for a layer's own "vars".
  std::vector<std::string> sublayers;
};

// A Keras Rescaling or Normalization layer at the model's input (the first
// layer after its InputLayer). It is not an op: the examples are read
// through it, as the job's own preprocessing is (data::Preprocessing),
// and it has no variables.
// One of a model's several inputs (keras.Input x N), in the model's input
// order: its Keras name and example shape, and where its values start in a
// packed example (the model's input tensor holds them all, input_shape()
// being {their total}).
struct ModelInput {
  std::string name;
  Shape shape;
  int64_t offset = 0;
  // An input of ids (an Embedding takes it): each id must be below
  // `id_limit`, the smallest input_dim of the Embeddings that take it
  // (`table` names the first of them); 0 for an input of values.
  int64_t id_limit = 0;
  std::string table;
  // A MultiHeadAttention's attention_mask: every value 0 or 1 (the data
  // check refuses others, naming the example).
  bool mask = false;
};

struct InputTransform {
  enum class Kind { kNone, kRescale, kNormalize };
  Kind kind = Kind::kNone;
  std::string layer;  // the Keras layer's name
  float scale = 1;    // kRescale: x * scale + offset, in float32
  float offset = 0;
  // kNormalize: (x - mean) / max(sqrt(variance), 1e-7) in float32, as
  // Keras computes it: one value (axis=None, or one broadcast), or one per
  // index of the example's last axis (axis=-1).
  std::vector<float> mean, variance;
};

// Immutable; thread-safe.
class Model {
 public:
  // The model of `layers` on examples of `input` shape ({H, W, C}, or {F}
  // for a first Dense), checked: each layer's inputs match the previous
  // one's outputs, every window has an output, a BatchNormalization gets
  // (H, W, C) or the output of a Dense, global pooling or (F,) input, the
  // last layer is a Dense (its activation, if any, is the model's output;
  // whether the loss fits it is the job's check, job_loss.h).
  // `summary` is what describe prints; `output_softmax` whether the Keras
  // model ends in a softmax (its predictions are probabilities) rather than
  // logits. keras_config.h builds these. INVALID_ARGUMENT naming the layer.
  static absl::StatusOr<Model> Build(std::string name, Shape input, std::vector<LayerSpec> layers,
                                     std::vector<SummaryRow> summary, bool output_softmax);

  const std::string& name() const { return name_; }
  // One example's shape: {H, W, C}, or {F} for a model of vectors (its
  // input tensor is [N, F]).
  const Shape& input_shape() const { return input_; }
  int64_t input_elements() const { return ShapeSize(input_); }
  // The output's size: a Dense's units, or a Dot's (K,)·(K,) 1.
  int classes() const {
    return static_cast<int>(ShapeSize(graph_.tensor(graph_.num_tensors() - 1).shape));
  }
  bool spatial_input() const { return input_.size() == 3; }
  bool output_softmax() const { return output_softmax_; }
  // What the last Dense ends in: "softmax" (output_softmax), "linear"
  // (logits), or its activation's name ("sigmoid", "relu", ...).
  std::string output_activation() const;
  // The Rescaling or Normalization layer at the input; kNone without one.
  const InputTransform& input_transform() const { return input_transform_; }
  // Set by the Keras reader before the model is shared.
  void set_input_transform(InputTransform t) { input_transform_ = std::move(t); }
  // A model of several inputs, or of one input of ids: each, in order
  // (empty for one input of values: the input is input_shape() itself).
  // The data packs their values per example (data::PackInputs), the
  // model's kInput layers take them apart.
  const std::vector<ModelInput>& inputs() const { return inputs_; }
  // Per variable: whether it is an Embedding's table.
  std::vector<bool> table_variables() const;
  // Per variable: whether its layer uses it in float32 when the model
  // computes in a 16-bit dtype: a layer of a float32 policy, or a
  // normalization (BatchNormalization, LayerNormalization), whose
  // variables Keras creates with autocast=False. The others a 16-bit layer
  // casts to its dtype before use. All true for a float32 model.
  std::vector<bool> float32_variables() const;
  // Sets them, and marks those of ids (ModelInput::id_limit) from the
  // Embeddings that take them (the model's input: the first one).
  void set_inputs(std::vector<ModelInput> inputs);
  const std::vector<LayerSpec>& layers() const { return layers_; }
  // Which tensors each layer takes and makes, and their shapes.
  const LayerGraph& graph() const { return graph_; }
  const std::vector<SummaryRow>& summary() const { return summary_; }
  // Each layer's variables in Keras's order (kernel then bias; gamma, beta,
  // moving_mean, moving_variance), in model order.
  const std::vector<tensor::VariableShape>& variables() const { return variables_; }
  // Of each of layers(): where its variables are in variables().
  const std::vector<LayerVariables>& layer_variables() const { return layer_variables_; }
  // The initializer of each of variables().
  const std::vector<Initializer>& initializers() const { return initializers_; }
  // Of each of variables(): its momentum when it is a moving average
  // (BatchNormalization's moving_mean and moving_variance: not trained; a
  // replica's "gradient" for it is its batch statistic, and the update is
  // v = v * momentum + statistic * (1 - momentum)), 1 for a frozen layer's
  // variable (trainable=False: never updated; its "gradient" is 0), nullopt
  // for a trainable variable.
  const std::vector<std::optional<float>>& moving_averages() const { return moving_averages_; }
  // Per variable: whether the optimizer trains it (not a moving average,
  // not a frozen layer's): Keras's trainable_variables.
  std::vector<bool> trainable_variables() const {
    std::vector<bool> out;
    for (const auto& m : moving_averages_) out.push_back(!m.has_value());
    return out;
  }
  // Per variable: whether it is frozen (optimizer::IsFrozen: a frozen
  // layer's, or a moving average of momentum 1). Pushes carry no gradient
  // for it, and the backward pass makes none.
  std::vector<bool> frozen_variables() const;
  int64_t num_parameters() const;
  // The dtypes its layers compute in (LayerSpec::compute; not the kInput
  // layers, which take an input's block), ascending, each once: {float32}
  // for a float32 model.
  std::vector<DType> ComputeDtypes() const;
  // What the result file and the logs record: "float32", "bfloat16",
  // "float16", or the dtypes and their layer counts where they differ
  // ("bfloat16 (12 layers), float32 (1 layer)").
  std::string ComputeDtypesText() const;

  // Each variable drawn from its initializer (Keras's defaults:
  // Glorot-uniform kernels, zero biases). The values depend only on `seed`
  // and the variable's position; an embedding table's rows each on its own
  // stream (tensor::InitializeRows), so that the servers draw the same rows
  // themselves. The variables `skip` marks are left empty.
  std::vector<std::vector<float>> Initialize(uint64_t seed,
                                             const std::vector<bool>& skip = {}) const;

 private:
  std::string name_;
  Shape input_;
  std::vector<LayerSpec> layers_;
  LayerGraph graph_;
  std::vector<SummaryRow> summary_;
  bool output_softmax_ = false;
  InputTransform input_transform_;
  std::vector<ModelInput> inputs_;
  std::vector<tensor::VariableShape> variables_;
  std::vector<Initializer> initializers_;
  std::vector<std::optional<float>> moving_averages_;
  std::vector<LayerVariables> layer_variables_;
};

// The ops (with their shapes) one replica runs on a batch of `batch`
// examples of `model`: forward, loss and, when `training`, the backward pass.
std::vector<OpSpec> ModelOpSpecs(const Model& model, int64_t batch, bool training = true);

struct StepResult {
  double loss_sum = 0;  // summed over the batch
  int64_t correct = 0;
  int64_t examples = 0;
};

// One model replica on one backend. Activations, gradients and parameters
// live on the backend and are allocated once per batch size, then reused.
// Thread-compatible.
class Executor {
 public:
  // Told by ComputeGradients that the gradients of layer `layer`'s
  // variables are final (see SetGradientReadyHook).
  using GradientReadyHook = std::function<absl::Status(int layer)>;
  // Asked by ComputeGradients for layer `layer`'s parameters (see
  // SetParametersNeededHook).
  using ParametersNeededHook = std::function<absl::Status(int layer)>;

  // `model` and `backend` are not owned and must outlive the executor.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const Model* model,
                                                          ComputeBackend* backend);
  const Model& model() const { return *model_; }

  // Host parameters in model.variables() order and Keras layouts (the
  // moving statistics too: evaluation and Predict normalize with them).
  // INVALID_ARGUMENT on a count or size mismatch.
  absl::Status SetParameters(const std::vector<std::vector<float>>& params);
  absl::Status SetParameter(int index, absl::Span<const float> values);

  // The key of the dropout masks of the next ComputeGradients: example i of
  // its batch is example first_example + i of global step `step`, and each
  // mask element depends only on (seed, step, layer, that example, the
  // element), so a redone step, and any split of a step's batch over
  // replicas, draws the same masks. Without a key: seed 0, step 0, 0.
  void SetDropoutKey(uint64_t seed, int64_t step, int64_t first_example);

  // Forward and backward on a batch: `images` holds n examples of the
  // model's input shape, preprocessed (NHWC), `labels` n classes (a
  // regression's: n zeros, its targets in loss.targets). The loss
  // is `loss`'s (backend.h: smoothed targets, per-example weights) and its
  // gradient scaled by loss.grad_scale (1/n for the batch mean; the float
  // overload: that scale alone). Gradients stay on the
  // backend until CopyGradients. For a moving-average variable
  // (Model::moving_averages()) the "gradient" is the batch's statistic
  // (BatchNormalization's mean or biased variance over the n examples),
  // unscaled: what the servers fold into the moving average.
  absl::Status ComputeGradients(absl::Span<const float> images, absl::Span<const int32_t> labels,
                                const LossOptions& loss, StepResult* result);
  absl::Status ComputeGradients(absl::Span<const float> images, absl::Span<const int32_t> labels,
                                float grad_scale, StepResult* result) {
    return ComputeGradients(images, labels, LossOptions{grad_scale}, result);
  }
  // Host copies of the last gradients, in model.variables() order (a frozen
  // variable's, always 0, written without a device copy).
  absl::Status CopyGradients(std::vector<std::vector<float>>* grads);
  absl::Status CopyGradient(int index, absl::Span<float> out);
  // The backend tensor behind CopyGradient(index) (model.variables()
  // order), for reductions that stay on the device (the NCCL all-reduce of
  // mirrored replicas); null for an index out of range. Owned by the
  // executor, allocated at Create and valid as long as it. Every
  // ComputeGradients overwrites it whole (queued on the backend: read or
  // write it in order with the backend's work); between two, a caller may
  // change it in place, and CopyGradient(s) then return what it holds.
  DeviceTensor* GradientTensor(int index);

  // So that a layer's gradients can be sent (all-reduced, pushed) while the
  // backward pass still runs for the layers below: ComputeGradients calls
  // `hook` on the calling thread, once per layer that has variables
  // (LayerVariableIndices(model.layer_variables()[layer]) not empty: kernel,
  // bias, gamma, beta, and BatchNormalization's moving mean and variance,
  // whose "gradients" the forward pass made), in descending layer order, as
  // soon as all of that layer's variable gradients are final: for Conv2D and
  // Dense after the weight (and bias) gradient and before the gradient of
  // the data to the layer below is computed; for BatchNormalization after
  // its backward op. Layers without variables get no call. Inside the hook,
  // CopyGradient(index) of that layer's (and every higher layer's)
  // variables returns the values CopyGradients returns once ComputeGradients
  // is done; lower layers' gradients are not final yet. The hook may call
  // CopyGradient and CopyGradients, nothing else of this executor. The
  // layers below are not queued until it returns, so on an asynchronous
  // backend (CUDA) a copy inside it waits for the ops queued so far and
  // holds up the rest of the pass. A hook's non-OK status ends
  // ComputeGradients at once with that status (the lower layers' gradients
  // are then not computed). An empty hook (the default) is never called;
  // Evaluate and Predict never call it.
  void SetGradientReadyHook(GradientReadyHook hook) { gradient_ready_ = std::move(hook); }

  // The other half of hiding communication: so that the parameters of the
  // higher layers can still be arriving while the forward pass runs the
  // lower ones (a worker's pulls in parts). ComputeGradients calls `hook` on
  // the calling thread once per layer that has variables, in ascending
  // layer order, just before the layer's forward op is queued; inside it the
  // hook may call SetParameter for that layer's (and any higher layer's)
  // variables, and the forward op then reads what it set. The layers below
  // have been queued with the parameters they had. The hook may call
  // SetParameter, nothing else of this executor. A non-OK status ends
  // ComputeGradients at once with that status. An empty hook (the default)
  // is never called; Evaluate and Predict never call it.
  void SetParametersNeededHook(ParametersNeededHook hook) { parameters_needed_ = std::move(hook); }

  // Plans the backend's ops for each batch size in `batches` (training: the
  // backward pass too), so that no first step of a size pays for it (CUDA:
  // the convolution algorithms). Sizes < 1 are skipped.
  absl::Status Prepare(const std::vector<int64_t>& batches, bool training);

  // Forward only: the model's outputs for n examples (n = images.size() /
  // the input's elements), n x classes into `outputs`: the last layer's
  // logits, or their softmax when the Keras model ends in one (what Keras's
  // predict returns).
  absl::Status Predict(absl::Span<const float> images, std::vector<float>* outputs);

  // The model's outputs of the last ComputeGradients or Evaluate, n x
  // classes into `outputs`: as Predict returns them (the softmax when the
  // Keras model ends in one), for the compiled metrics.
  // FAILED_PRECONDITION before either ran.
  absl::Status CopyOutputs(std::vector<float>* outputs);

  // Forward only: loss and accuracy (the loss as `loss` says; its
  // grad_scale is unused).
  absl::Status Evaluate(absl::Span<const float> images, absl::Span<const int32_t> labels,
                        const LossOptions& loss, StepResult* result);
  absl::Status Evaluate(absl::Span<const float> images, absl::Span<const int32_t> labels,
                        StepResult* result) {
    return Evaluate(images, labels, LossOptions{}, result);
  }

  // The elements of the tensors that hold the layers' outputs and, in
  // training, their gradients, at every batch size run so far (shared by
  // liveness: PlanForward, PlanTraining).
  int64_t BufferElements() const;
  // Keeps every training activation to the end of the step, as before
  // tensors were shared in training (the gradients still share by
  // liveness): what the tests compare the sharing with. Before the first
  // step.
  void set_share_training_activations_for_testing(bool share) {
    share_training_activations_ = share;
  }

 private:
  // The tensors of one batch size, for training or for the forward pass
  // alone (an executor that only evaluates holds no gradient).
  struct Buffers {
    std::unique_ptr<DeviceTensor> input;
    // The output of each layer, and in training the gradient w.r.t. it
    // (null where none is needed): tensors of `pool`, shared where their
    // lives do not meet (PlanForward, PlanTraining).
    std::vector<DeviceTensor*> acts;
    std::vector<DeviceTensor*> grads;
    std::vector<std::unique_ptr<DeviceTensor>> pool;
    // Per tensor with several consumers (LayerGraph::IsShared): where a
    // consumer's contribution to its gradient is made before it is added
    // to the others'; null elsewhere.
    std::vector<std::unique_ptr<DeviceTensor>> contributions;
    std::unique_ptr<DeviceTensor> eval_dlogits;  // the loss's unused gradient in Evaluate
    // The softmax cross-entropy's labels (int32), weights (when a batch
    // has them) and totals (float64, int64), on the backend.
    std::unique_ptr<DeviceTensor> labels, weights, loss_sum, correct;
    std::vector<std::unique_ptr<DeviceTensor>> masks;  // per layer: Dropout's, else null
    // Per Dot(normalize=True) layer: its normalized operands and their
    // gradients (a, b, da, db), made at its first forward pass (DotScratch).
    std::vector<std::array<DeviceTensor*, 4>> dot_scratch;
    std::vector<std::vector<std::unique_ptr<DeviceTensor>>> dot_scratch_owned;
    // Per LayerNormalization layer: its rows' mean and rstd, which the
    // forward pass makes and the backward reads (NormStats).
    std::map<size_t, std::array<std::unique_ptr<DeviceTensor>, 2>> norm_stats;
    // Per attention mask layer (LayerSpec::kMask): which scores it keeps
    // (1) and the -1e9 that replaces the others (MaskKeep), its causal
    // part's (constant), and -1e9 everywhere.
    // With the query's or the value's Keras mask: their outer product
    // (T, S) per example (`outer`; `ones` stands in for the one absent),
    // and the product of it and the input mask (`pair`).
    struct MaskTensors {
      std::unique_ptr<DeviceTensor> keep, bias, causal, minus, pair, outer, ones;
    };
    std::map<size_t, MaskTensors> masks_bias;
    // Per LSTM layer: its steps' tensors (RunLstm, LstmBackward).
    struct LstmTensors {
      // [n, T, 4U]: the input's projection x W + b; each step's gates z and
      // their gradients, at the input step's slot. [n, T, U]: each step's
      // h_prev (zero at the first step's slot) and c.
      std::unique_ptr<DeviceTensor> xz, zs, dzs, hp, cs;
      // [n, 4U]: a step's gates and h_prev U; [n, U]: h, c (two each, the
      // step's and the previous), and the backward's dh, dh_next, dc
      // (two), c, c_prev.
      std::unique_ptr<DeviceTensor> z, r, h[2], c[2], dh, dh_next, dc[2], c_step, c_prev;
      // With a mask (RecurrentMask): the step's [n] of it, the cell's own h
      // and c before the masked rows keep the previous step's, a zeroed
      // output, and what passes a masked step back to the previous one.
      std::unique_ptr<DeviceTensor> m, hn, cn, out, dh_pass, dc_pass;
      // Run whole (FusedLstm): every step's h [n, T, U], and the gradient of
      // the last alone (its other steps' zeros) for a layer returning it.
      std::unique_ptr<DeviceTensor> ys, dys;
    };
    std::map<size_t, LstmTensors> lstm;
    // Per GRU layer: as an LSTM's, with xz = x W + b_in and hz = h_prev U +
    // b_rec ([n, T, 3U], and their gradients) and the two biases apart.
    struct GruTensors {
      std::unique_ptr<DeviceTensor> xz, hzs, dxz, dhz, hp;
      std::unique_ptr<DeviceTensor> x, hz, h[2], zero, dh, dh_next, dh_direct, dx, dhzt;
      std::unique_ptr<DeviceTensor> b_in, b_rec, db_in, db_rec;
      std::unique_ptr<DeviceTensor> m, hn, out, dh_pass;  // with a mask, as an LSTM's
      // reset_after=False (GruResetBefore): the recurrent kernel's candidate
      // columns u_h [U, U] and their gradient; each step's r h_prev and
      // candidate gradient [n, T, U]; a step's r, r h_prev, (r h_prev) u_h,
      // and scratch [n, U].
      std::unique_ptr<DeviceTensor> u_h, du_h, rhs, dcands, r, rh, cand, a, c;
    };
    std::map<size_t, GruTensors> gru;
    // Per SimpleRNN layer, as an LSTM's: [n, T, U] the input's projection
    // x W + b, what each step's activation gradient takes (its input or its
    // output), the pre-activation gradients, h_prev; [n, U] a step's z and
    // h_prev U, h (two), dh and dh_next.
    struct RnnTensors {
      std::unique_ptr<DeviceTensor> xz, acts, dzs, hp;
      std::unique_ptr<DeviceTensor> z, r, h[2], dh, dh_next;
      std::unique_ptr<DeviceTensor> m, hn, out, dh_pass;  // with a mask, as an LSTM's
    };
    std::map<size_t, RnnTensors> rnn;
    std::vector<const DeviceTensor*> outputs;  // what the last Forward left per layer
    // The output and its gradient on the host, for a loss computed there
    // (binary_cross_entropy.h).
    std::vector<float> host_outputs, host_doutputs;
  };

  Executor(const Model* model, ComputeBackend* backend) : model_(model), backend_(backend) {}
  // Which of its scores x mask layer `layer` keeps this step, and the
  // -1e9 it puts in the others' place (y = x keep + bias).
  absl::StatusOr<Buffers::MaskTensors*> MaskKeep(Buffers& b, size_t layer, const DeviceTensor& x,
                                                 int64_t n);
  // An LSTM layer's forward pass over its steps (y: its output), keeping
  // what the backward needs when `training`; and its backward pass from g
  // (dx: null when its input needs no gradient). `mask`: the input's Keras
  // mask [n, T], or null.
  absl::Status RunLstm(Buffers& b, size_t layer, const DeviceTensor& x, const DeviceTensor* mask,
                       DeviceTensor* y, int64_t n, bool training);
  absl::Status LstmBackward(Buffers& b, size_t layer, const DeviceTensor& x,
                            const DeviceTensor* mask, const DeviceTensor& g, DeviceTensor* dx,
                            const std::function<absl::Status()>& ready);
  // Whether LSTM layer `layer` runs whole, as the backend's LstmLayer
  // (unmasked, its sequence in the input's order, two steps or more, on a
  // backend that has the op); else cell by cell. And its passes so.
  bool FusedLstm(size_t layer, const DeviceTensor* mask) const;
  absl::Status RunLstmLayer(Buffers& b, size_t layer, const DeviceTensor& x, DeviceTensor* y,
                            int64_t n, bool training);
  absl::Status LstmLayerBackward(Buffers& b, size_t layer, const DeviceTensor& x,
                                 const DeviceTensor& g, DeviceTensor* dx,
                                 const std::function<absl::Status()>& ready);
  // The same for a GRU layer.
  absl::Status RunGru(Buffers& b, size_t layer, const DeviceTensor& x, const DeviceTensor* mask,
                      DeviceTensor* y, int64_t n, bool training);
  absl::Status GruBackward(Buffers& b, size_t layer, const DeviceTensor& x,
                           const DeviceTensor* mask, const DeviceTensor& g, DeviceTensor* dx,
                           const std::function<absl::Status()>& ready);
  // The same for a SimpleRNN layer.
  absl::Status RunSimpleRnn(Buffers& b, size_t layer, const DeviceTensor& x,
                            const DeviceTensor* mask, DeviceTensor* y, int64_t n, bool training);
  absl::Status SimpleRnnBackward(Buffers& b, size_t layer, const DeviceTensor& x,
                                 const DeviceTensor* mask, const DeviceTensor& g, DeviceTensor* dx,
                                 const std::function<absl::Status()>& ready);
  // A GRU with reset_after=False at step i: its reset gate r applied to
  // h_prev before the candidate's product with u_h, folded into the step's
  // x (xz's candidate columns + (r h_prev) u_h) and hz (its candidate
  // columns 0), so that GruCell computes Keras's step; and backward, what
  // GruCellBackward leaves out: the reset gate's gradient and r's path to
  // dh_prev.
  absl::Status GruResetBefore(Buffers::GruTensors& t, const DeviceTensor& h_prev, int64_t n,
                              int64_t units, int64_t slot, int64_t steps, bool training);
  absl::Status GruResetBeforeBackward(Buffers::GruTensors& t, const DeviceTensor& h_prev, int64_t n,
                                      int64_t units, int64_t slot, int64_t steps);
  // b.norm_stats[layer] for x's rows (made once).
  absl::StatusOr<std::array<DeviceTensor*, 2>> NormStats(Buffers& b, size_t layer,
                                                         const DeviceTensor& x);
  // Makes b.dot_scratch[layer] for operands of a's and bt's shapes, once.
  absl::Status DotScratch(Buffers& b, size_t layer, const DeviceTensor& a, const DeviceTensor& bt);
  // The buffers for batches of n, for training or for the forward pass
  // alone (evaluation, predict), which keeps no activation for a backward.
  absl::StatusOr<Buffers*> BuffersFor(int64_t n, bool forward_only);
  // A tensor's life, in a plan's time steps, both ends included, and where
  // the tensor it gets goes.
  struct Life {
    int start, end;
    Shape shape;
    DType dtype;
    DeviceTensor** slot;
  };
  // Gives each life a tensor of `pool` of its shape and dtype that no life
  // meeting it holds, allocating one where none is free.
  absl::Status AssignByLiveness(std::vector<Life> lives,
                                std::vector<std::unique_ptr<DeviceTensor>>* pool);
  // The forward pass alone: an output lives from its layer to its last
  // consumer (an identity Dropout passes its input's tensor on).
  absl::Status PlanForward(Buffers& b, int64_t n);
  // A training step's outputs and gradients, on one timeline (model.cc).
  absl::Status PlanTraining(Buffers& b, int64_t n);
  // `training` applies Dropout; outputs()[i] is layer i's output (Dropout's
  // input at evaluation).
  absl::Status Forward(Buffers& b, absl::Span<const float> images, int64_t n, bool training);
  absl::Status DrawMasks(Buffers& b, int64_t n);
  absl::Status Loss(Buffers& b, absl::Span<const int32_t> labels, const LossOptions& loss,
                    StepResult* result, DeviceTensor* dlogits);
  // `logits` [n, classes] to the host, through the model's softmax if it
  // ends in one.
  absl::Status CopyOutputsOf(const DeviceTensor& logits, std::vector<float>* outputs);
  // A Concatenate layer's blocks: with the batch, each source is rows x
  // cols[k], placed at column first[k] of the output's rows x total.
  struct ConcatBlocks {
    int64_t rows = 0, total = 0;
    std::vector<int64_t> first, cols;
  };
  ConcatBlocks ConcatOf(const LayerGraph& graph, int layer, int64_t n);
  // ZeroPadding2D's and Cropping2D's copy between the smaller and the
  // larger (H, W, C) tensor of `l`'s pads, row by row: `pad` puts the
  // smaller x inside y and zeros around it; otherwise y is x's inner block.
  absl::Status PadOrCrop(const LayerSpec& l, const DeviceTensor& x, DeviceTensor* y, bool pad,
                         int64_t n);
  absl::Status MergeContribution(const Buffers& b, int layer, size_t k, const DeviceTensor& g,
                                 DeviceTensor* dest);
  // Tensor t's value in the last Forward (LayerGraph ids).
  const DeviceTensor* Value(const Buffers& b, int t) const {
    return t == 0 ? b.input.get() : b.outputs[t - 1];
  }
  // params_[index] and param_grads_[index], or null for index -1 (no bias).
  const DeviceTensor* Param(int index) const;
  DeviceTensor* ParamGrad(int index);

  const Model* const model_;
  ComputeBackend* const backend_;
  Buffers* last_ = nullptr;  // the buffers of the last loss computed
  std::vector<std::unique_ptr<DeviceTensor>> params_;
  std::vector<std::unique_ptr<DeviceTensor>> param_grads_;
  // Per BatchNormalization layer without gamma (scale=False) or beta
  // (center=False): constant ones or zeros in their place, and where their
  // unused gradients go.
  struct BatchNormFill {
    std::unique_ptr<DeviceTensor> gamma, beta, dgamma, dbeta;
    // A frozen one's: zeros [C], the mean and beta of the per-channel scale
    // its backward pass is (BatchNormInference of dy).
    std::unique_ptr<DeviceTensor> zeros;
  };
  std::map<size_t, BatchNormFill> bn_fill_;
  // Per UpSampling2D and bias layer: its depthwise kernel of ones
  // (LayerSpec::kUpSample, kBiasAdd); per bias layer, where that kernel's
  // unused gradient goes.
  std::map<size_t, std::unique_ptr<DeviceTensor>> ones_, bias_dw_;
  // Per Dot layer: its product's geometry (LayerGraph checked it).
  std::map<size_t, DotGeometry> dots_;
  std::map<std::pair<int64_t, bool>, Buffers> buffers_;  // by (n, forward_only)
  // Of each tensor of the graph: whether the backward pass makes its
  // gradient, i.e. whether its producer or one of the producer's ancestors
  // has a variable that is not frozen. The model's inputs and everything a
  // frozen base makes from them need none, so fine-tuning never runs the
  // base's backward pass (as autodiff with respect to the trainable
  // variables does not).
  std::vector<bool> needs_gradient_;
  // This executor's first LstmLayer instance (rnn_ops.h): layer i's is
  // instance_base_ + i, unique in the process.
  int64_t instance_base_ = 0;
  std::vector<bool> frozen_;  // Model::frozen_variables(): their gradients are always 0
  bool share_training_activations_ = true;
  uint64_t dropout_seed_ = 0;
  int64_t dropout_step_ = 0, dropout_first_ = 0;
  std::vector<float> host_mask_;
  std::vector<float> host_zeros_;  // what a padding's border is set from (grown, never written)
  GradientReadyHook gradient_ready_;
  ParametersNeededHook parameters_needed_;
};

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_MODEL_H_
