#include "worker/topk_compressor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/tensor/tensor.h"
#include "common/tensor/topk.h"
#include "common/tensor/wire_dtype.h"

namespace psc {
namespace worker {

absl::StatusOr<std::unique_ptr<TopKCompressor>> TopKCompressor::Create(
    double ratio, const proto::Placement& placement) {
  PSC_RETURN_IF_ERROR(tensor::CheckTopKRatio(ratio));
  if (ratio == 0) return absl::InvalidArgumentError("--topk_ratio=0 sparsifies nothing");
  std::unique_ptr<TopKCompressor> c(new TopKCompressor(ratio));
  absl::MutexLock lock(&c->mu_);
  for (const proto::VariablePlacement& var : placement.variables()) {
    if (var.gradient() != proto::GRADIENT_TOP_K) continue;
    // Elements per row of the first axis (a scalar: one row of one).
    const int64_t per_row =
        var.shape().empty() ? 1 : tensor::NumElements(absl::MakeConstSpan(var.shape()).subspan(1));
    for (const proto::VariablePlacement::Part& part : var.parts()) {
      const int64_t rows = var.shape().empty() ? 1 : part.first_axis_size();
      if (per_row < 0 || rows < 1 || (per_row > 0 && rows > tensor::kMaxSparseElements / per_row)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--topk_ratio: \"", part.shard_variable(), "\" has more than ",
                         tensor::kMaxSparseElements, " elements (or a bad shape)"));
      }
      c->residuals_[part.shard_variable()].assign(rows * per_row, 0.0f);
    }
  }
  return c;
}

absl::Status TopKCompressor::Encode(proto::DataType wire,
                                    std::vector<proto::NamedTensor>* tensors) {
  absl::MutexLock lock(&mu_);
  std::vector<float> acc, sent;
  for (proto::NamedTensor& t : *tensors) {
    const std::vector<float> g = tensor::FloatValues(t.tensor());  // Split's float32
    const std::vector<int64_t> shape(t.tensor().shape().begin(), t.tensor().shape().end());
    auto it = residuals_.find(t.name());
    if (it == residuals_.end()) {  // declared dense
      PSC_RETURN_IF_ERROR(tensor::SetWireTensor(shape, g, wire, t.mutable_tensor()));
      continue;
    }
    std::vector<float>& residual = it->second;
    if (residual.size() != g.size()) {
      return absl::InternalError(absl::StrCat("gradient \"", t.name(), "\" has ", g.size(),
                                              " elements; its residual ", residual.size()));
    }
    acc.resize(g.size());
    for (size_t i = 0; i < g.size(); ++i) acc[i] = residual[i] + g[i];
    const std::vector<uint32_t> top =
        tensor::SelectTopK(acc, tensor::TopKCount(static_cast<int64_t>(acc.size()), ratio_));
    PSC_RETURN_IF_ERROR(tensor::SetSparseTensor(shape, acc, top, wire, t.mutable_tensor(), &sent));
    // What was not sent (all of the rest, and the rounding of what was)
    // waits for the next step.
    for (size_t j = 0; j < top.size(); ++j) acc[top[j]] -= sent[j];
    residual.swap(acc);
  }
  return absl::OkStatus();
}

proto::ErrorFeedback TopKCompressor::Save(int worker, int64_t step) const {
  absl::MutexLock lock(&mu_);
  proto::ErrorFeedback out;
  out.set_worker(worker);
  out.set_step(step);
  std::vector<std::string> names;
  for (const auto& [name, residual] : residuals_) {
    if (std::any_of(residual.begin(), residual.end(), [](float x) { return x != 0.0f; })) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());  // a deterministic order
  for (const std::string& name : names) {
    const std::vector<float>& r = residuals_.at(name);
    proto::NamedTensor* t = out.add_residuals();
    t->set_name(name);
    tensor::SetFloatTensor({static_cast<int64_t>(r.size())}, r, t->mutable_tensor());
  }
  return out;
}

absl::Status TopKCompressor::Load(const proto::ErrorFeedback& feedback) {
  proto::ErrorFeedbackState state;
  *state.add_workers() = feedback;
  PSC_RETURN_IF_ERROR(tensor::CheckErrorFeedback(state, "the unit"));
  absl::MutexLock lock(&mu_);
  absl::flat_hash_map<std::string, std::vector<float>> next;
  for (const auto& [name, residual] : residuals_) next[name].assign(residual.size(), 0.0f);
  for (const proto::NamedTensor& t : feedback.residuals()) {
    auto it = next.find(t.name());
    const int64_t size = tensor::NumElements(t.tensor().shape());
    if (it == next.end() || size != static_cast<int64_t>(it->second.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "error feedback of worker ", feedback.worker(), ": residual \"", t.name(), "\" (", size,
          " elements) is not one of this job's sparsified shard variables"));
    }
    it->second = tensor::FloatValues(t.tensor());
  }
  residuals_.swap(next);
  return absl::OkStatus();
}

void TopKCompressor::Reset() {
  absl::MutexLock lock(&mu_);
  for (auto& [name, residual] : residuals_) std::fill(residual.begin(), residual.end(), 0.0f);
}

}  // namespace worker
}  // namespace psc
