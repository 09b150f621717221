#include "common/compute/model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

absl::StatusOr<Model> Model::Create(const std::string& name) {
  Model m;
  m.name_ = name;
  if (name == "seed_cnn") {
    const int64_t filters[] = {32, 32, 64, 64, 128, 128};
    int64_t in = 1;
    for (int i = 0; i < 6; ++i) {
      m.layers_.push_back(
          {LayerSpec::kConv, i == 0 ? "conv2d" : absl::StrCat("conv2d_", i), in, filters[i], true});
      in = filters[i];
      if (i % 2 == 1) m.layers_.push_back({LayerSpec::kPool, "", in, in, false});
    }
    m.layers_.push_back({LayerSpec::kDense, "dense", 3 * 3 * 128, 128, true});
    m.layers_.push_back({LayerSpec::kDense, "dense_1", 128, 10, false});
  } else if (name == "mlp") {
    m.layers_.push_back({LayerSpec::kDense, "dense", 28 * 28, 128, true});
    m.layers_.push_back({LayerSpec::kDense, "dense_1", 128, 10, false});
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown model \"", name, "\"; expected seed_cnn or mlp"));
  }
  for (const LayerSpec& l : m.layers_) {
    if (l.kind == LayerSpec::kConv) {
      m.variables_.push_back({l.name + "/kernel", {3, 3, l.inputs, l.outputs}});
      m.variables_.push_back({l.name + "/bias", {l.outputs}});
    } else if (l.kind == LayerSpec::kDense) {
      m.variables_.push_back({l.name + "/kernel", {l.inputs, l.outputs}});
      m.variables_.push_back({l.name + "/bias", {l.outputs}});
    }
  }
  return m;
}

int64_t Model::num_parameters() const {
  int64_t total = 0;
  for (const tensor::VariableShape& v : variables_) total += ShapeSize(v.shape);
  return total;
}

std::vector<std::vector<float>> Model::Initialize(uint64_t seed) const {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < variables_.size(); ++i) {
    const Shape& shape = variables_[i].shape;
    std::vector<float> values(ShapeSize(shape), 0.0f);
    if (shape.size() > 1) {  // a kernel
      const int64_t receptive = shape.size() == 4 ? shape[0] * shape[1] : 1;
      const double fan_in = static_cast<double>(receptive * shape[shape.size() - 2]);
      const double fan_out = static_cast<double>(receptive * shape.back());
      const double limit = std::sqrt(6.0 / (fan_in + fan_out));
      uint64_t state = seed * 0x9e3779b97f4a7c15ULL + (i + 1) * 0xd1b54a32d192ed03ULL;
      for (float& v : values) {
        const double u = static_cast<double>(SplitMix64(&state) >> 11) * (1.0 / 9007199254740992.0);
        v = static_cast<float>((2 * u - 1) * limit);
      }
    }
    out.push_back(std::move(values));
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
  int next = 0;
  for (const LayerSpec& l : model->layers()) {
    e->layer_param_.push_back(l.kind == LayerSpec::kPool ? -1 : next);
    if (l.kind != LayerSpec::kPool) next += 2;
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
      return absl::InvalidArgumentError(
          absl::StrCat(model_->variables()[i].name, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Executor::Buffers*> Executor::BuffersFor(int64_t n) {
  auto it = buffers_.find(n);
  if (it != buffers_.end()) return &it->second;
  Buffers b;
  int64_t h = model_->height(), w = model_->width(), c = 1;
  PSC_ASSIGN_OR_RETURN(auto input, backend_->Allocate({n, h, w, c}));
  b.input = std::move(input);
  for (const LayerSpec& l : model_->layers()) {
    Shape out;
    if (l.kind == LayerSpec::kConv) {
      c = l.outputs;
      out = {n, h, w, c};
    } else if (l.kind == LayerSpec::kPool) {
      h /= 2;
      w /= 2;
      out = {n, h, w, c};
    } else {
      out = {n, l.outputs};
    }
    PSC_ASSIGN_OR_RETURN(auto act, backend_->Allocate(out));
    b.acts.push_back(std::move(act));
  }
  return &buffers_.emplace(n, std::move(b)).first->second;
}

absl::Status Executor::AllocateGradients(Buffers& b) {
  if (!b.grads.empty()) return absl::OkStatus();
  std::vector<std::unique_ptr<DeviceTensor>> grads;
  for (const auto& act : b.acts) {
    PSC_ASSIGN_OR_RETURN(auto grad, backend_->Allocate(act->shape()));
    grads.push_back(std::move(grad));
  }
  b.grads = std::move(grads);
  return absl::OkStatus();
}

absl::Status Executor::Forward(Buffers& b, absl::Span<const float> images, int64_t n) {
  if (static_cast<int64_t>(images.size()) != n * model_->height() * model_->width()) {
    return absl::InvalidArgumentError(
        absl::StrCat(images.size(), " pixels for ", n, " images of 28x28"));
  }
  PSC_RETURN_IF_ERROR(backend_->CopyFromHost(images, b.input.get()));
  const DeviceTensor* x = b.input.get();
  const auto& layers = model_->layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    DeviceTensor* y = b.acts[i].get();
    absl::Status s;
    if (l.kind == LayerSpec::kConv) {
      const int p = layer_param_[i];
      s = backend_->Conv2D(*x, *params_[p], *params_[p + 1], l.relu, y);
    } else if (l.kind == LayerSpec::kPool) {
      s = backend_->MaxPool2x2(*x, y);
    } else {
      const int p = layer_param_[i];
      s = backend_->Dense(*x, *params_[p], *params_[p + 1], l.relu, y);
    }
    if (!s.ok()) return s;
    x = y;
  }
  return absl::OkStatus();
}

absl::Status Executor::Loss(Buffers& b, absl::Span<const int32_t> labels, float grad_scale,
                            StepResult* result, DeviceTensor* dlogits) {
  result->loss_sum = 0;
  result->correct = 0;
  result->examples = static_cast<int64_t>(labels.size());
  if (dlogits ==
      nullptr) {  // evaluation: the gradient goes to a scratch tensor of the logits' size
    if (b.eval_dlogits == nullptr) {
      PSC_ASSIGN_OR_RETURN(b.eval_dlogits, backend_->Allocate(b.acts.back()->shape()));
    }
    dlogits = b.eval_dlogits.get();
  }
  return backend_->SoftmaxCrossEntropy(*b.acts.back(), labels, grad_scale, dlogits,
                                       &result->loss_sum, &result->correct);
}

absl::Status Executor::ComputeGradients(absl::Span<const float> images,
                                        absl::Span<const int32_t> labels, float grad_scale,
                                        StepResult* result) {
  const int64_t n = static_cast<int64_t>(labels.size());
  if (n < 1) return absl::InvalidArgumentError("empty batch");
  PSC_ASSIGN_OR_RETURN(auto buffers, BuffersFor(n));
  Buffers& b = *buffers;
  PSC_RETURN_IF_ERROR(AllocateGradients(b));
  PSC_RETURN_IF_ERROR(Forward(b, images, n));
  PSC_RETURN_IF_ERROR(Loss(b, labels, grad_scale, result, b.grads.back().get()));
  const auto& layers = model_->layers();
  for (int i = static_cast<int>(layers.size()) - 1; i >= 0; --i) {
    const LayerSpec& l = layers[i];
    DeviceTensor* g = b.grads[i].get();  // gradient w.r.t. this layer's output
    if (l.relu) {
      PSC_RETURN_IF_ERROR(backend_->ReluBackward(*b.acts[i], *g, g));
    }
    const DeviceTensor* x = i == 0 ? b.input.get() : b.acts[i - 1].get();
    DeviceTensor* dx = i == 0 ? nullptr : b.grads[i - 1].get();
    absl::Status s;
    if (l.kind == LayerSpec::kConv) {
      const int p = layer_param_[i];
      s = backend_->Conv2DBackwardWeights(*x, *g, param_grads_[p].get(), param_grads_[p + 1].get());
      if (s.ok() && dx != nullptr) s = backend_->Conv2DBackwardData(*g, *params_[p], dx);
    } else if (l.kind == LayerSpec::kPool) {
      s = backend_->MaxPool2x2Backward(*x, *g, dx);
    } else {
      const int p = layer_param_[i];
      s = backend_->DenseBackwardWeights(*x, *g, param_grads_[p].get(), param_grads_[p + 1].get());
      if (s.ok() && dx != nullptr) s = backend_->DenseBackwardData(*g, *params_[p], dx);
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Executor::CopyGradient(int index, absl::Span<float> out) {
  if (index < 0 || index >= static_cast<int>(param_grads_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no parameter ", index));
  }
  return backend_->CopyToHost(*param_grads_[index], out);
}

absl::Status Executor::CopyGradients(std::vector<std::vector<float>>* grads) {
  grads->resize(param_grads_.size());
  std::vector<const DeviceTensor*> src;
  std::vector<absl::Span<float>> dst;
  for (size_t i = 0; i < param_grads_.size(); ++i) {
    (*grads)[i].resize(param_grads_[i]->size());
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

std::vector<OpSpec> ModelOpSpecs(const Model& model, int64_t batch, bool training) {
  std::vector<OpSpec> specs;
  const int64_t n = std::max<int64_t>(batch, 1);
  int64_t h = model.height(), w = model.width(), c = 1;
  for (const LayerSpec& l : model.layers()) {
    if (l.kind == LayerSpec::kConv) {
      specs.push_back({Op::kConv2D, {n, h, w, c}, {3, 3, c, l.outputs}});
      if (training) {
        specs.push_back({Op::kConv2DBackwardData, {n, h, w, c}, {3, 3, c, l.outputs}});
        specs.push_back({Op::kConv2DBackwardWeights, {n, h, w, c}, {3, 3, c, l.outputs}});
      }
      c = l.outputs;
      if (l.relu && training) specs.push_back({Op::kReluBackward, {n, h, w, c}, {}});
    } else if (l.kind == LayerSpec::kPool) {
      specs.push_back({Op::kMaxPool2x2, {n, h, w, c}, {}});
      if (training) specs.push_back({Op::kMaxPool2x2Backward, {n, h, w, c}, {}});
      h /= 2;
      w /= 2;
    } else {
      const Shape x = {n, l.inputs};
      specs.push_back({Op::kDense, x, {l.inputs, l.outputs}});
      if (training) {
        specs.push_back({Op::kDenseBackwardData, x, {l.inputs, l.outputs}});
        specs.push_back({Op::kDenseBackwardWeights, x, {l.inputs, l.outputs}});
      }
      if (l.relu && training) specs.push_back({Op::kReluBackward, {n, l.outputs}, {}});
    }
  }
  specs.push_back({Op::kSoftmaxCrossEntropy, {n, model.classes()}, {}});
  return specs;
}

absl::Status Executor::Evaluate(absl::Span<const float> images, absl::Span<const int32_t> labels,
                                StepResult* result) {
  const int64_t n = static_cast<int64_t>(labels.size());
  if (n < 1) return absl::InvalidArgumentError("empty batch");
  PSC_ASSIGN_OR_RETURN(auto buffers, BuffersFor(n));
  PSC_RETURN_IF_ERROR(Forward(*buffers, images, n));
  return Loss(*buffers, labels, 1.0f, result, /*dlogits=*/nullptr);
}

}  // namespace compute
}  // namespace psc
