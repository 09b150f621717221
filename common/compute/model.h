// The models a worker trains (seed_cnn and mlp), their variables with Keras
// names and layouts, Glorot-uniform initialization, and the Executor that
// runs one replica's forward and backward pass on a ComputeBackend.
#ifndef PSC_COMMON_COMPUTE_MODEL_H_
#define PSC_COMMON_COMPUTE_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compute/backend.h"
#include "common/tensor/tensor.h"

namespace psc {
namespace compute {

struct LayerSpec {
  enum Kind { kConv, kPool, kDense };
  Kind kind;
  std::string name;     // Keras name: "conv2d", "conv2d_1", "dense", ...; empty for pools
  int64_t inputs = 0;   // conv: input channels; dense: input features
  int64_t outputs = 0;  // conv: filters; dense: units
  bool relu = false;
};

// Immutable; thread-safe.
class Model {
 public:
  // "seed_cnn": six 3x3 "same" ReLU convolutions (32, 32, 64, 64, 128, 128),
  // a 2x2 max pool after each pair (28 -> 14 -> 7 -> 3), flatten (1152),
  // Dense 128 ReLU, Dense 10 (logits; softmax is in the loss): 435,306
  // parameters. "mlp": flatten (784), Dense 128 ReLU, Dense 10: 101,770.
  // INVALID_ARGUMENT naming the known models for anything else.
  static absl::StatusOr<Model> Create(const std::string& name);

  const std::string& name() const { return name_; }
  int height() const { return 28; }
  int width() const { return 28; }
  int classes() const { return 10; }
  const std::vector<LayerSpec>& layers() const { return layers_; }
  // Kernel then bias of each layer with weights, in model order.
  const std::vector<tensor::VariableShape>& variables() const { return variables_; }
  int64_t num_parameters() const;

  // Keras defaults: Glorot-uniform kernels (limit sqrt(6 / (fan_in +
  // fan_out)), fans counting the 3x3 receptive field), zero biases. The
  // values depend only on `seed` and the variable's position.
  std::vector<std::vector<float>> Initialize(uint64_t seed) const;

 private:
  std::string name_;
  std::vector<LayerSpec> layers_;
  std::vector<tensor::VariableShape> variables_;
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
  // `model` and `backend` are not owned and must outlive the executor.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const Model* model,
                                                          ComputeBackend* backend);

  // Host parameters in model.variables() order and Keras layouts.
  // INVALID_ARGUMENT on a count or size mismatch.
  absl::Status SetParameters(const std::vector<std::vector<float>>& params);
  absl::Status SetParameter(int index, absl::Span<const float> values);

  // Forward and backward on a batch: `images` holds n*28*28 standardized
  // pixels (NHWC with one channel), `labels` n classes. The loss gradient is
  // scaled by `grad_scale` (1/n for the batch mean). Gradients stay on the
  // backend until CopyGradients.
  absl::Status ComputeGradients(absl::Span<const float> images, absl::Span<const int32_t> labels,
                                float grad_scale, StepResult* result);
  // Host copies of the last gradients, in model.variables() order.
  absl::Status CopyGradients(std::vector<std::vector<float>>* grads);
  absl::Status CopyGradient(int index, absl::Span<float> out);

  // Plans the backend's ops for each batch size in `batches` (training: the
  // backward pass too), so that no first step of a size pays for it (CUDA:
  // the convolution algorithms). Sizes < 1 are skipped.
  absl::Status Prepare(const std::vector<int64_t>& batches, bool training);

  // Forward only: loss and accuracy.
  absl::Status Evaluate(absl::Span<const float> images, absl::Span<const int32_t> labels,
                        StepResult* result);

 private:
  // Activations per batch size; the gradients only once the executor trains
  // at that size (an executor that only evaluates never holds them).
  struct Buffers {
    std::unique_ptr<DeviceTensor> input;
    std::vector<std::unique_ptr<DeviceTensor>> acts;   // output of each layer
    std::vector<std::unique_ptr<DeviceTensor>> grads;  // gradient w.r.t. each layer's output
    std::unique_ptr<DeviceTensor> eval_dlogits;        // the loss's unused gradient in Evaluate
  };

  Executor(const Model* model, ComputeBackend* backend) : model_(model), backend_(backend) {}
  absl::StatusOr<Buffers*> BuffersFor(int64_t n);
  absl::Status AllocateGradients(Buffers& b);
  absl::Status Forward(Buffers& b, absl::Span<const float> images, int64_t n);
  absl::Status Loss(Buffers& b, absl::Span<const int32_t> labels, float grad_scale,
                    StepResult* result, DeviceTensor* dlogits);

  const Model* const model_;
  ComputeBackend* const backend_;
  std::vector<std::unique_ptr<DeviceTensor>> params_;
  std::vector<std::unique_ptr<DeviceTensor>> param_grads_;
  std::vector<int> layer_param_;  // index of each layer's kernel in params_, or -1
  std::map<int64_t, Buffers> buffers_;
};

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_MODEL_H_
