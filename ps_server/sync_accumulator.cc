#include "ps_server/sync_accumulator.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "common/tensor/tensor.h"
#include "ps_server/row_gradient.h"

namespace psc {
namespace ps_server {
SyncAccumulator::Step::Step(std::vector<Gradient> gradients) : gradients_(std::move(gradients)) {
  std::sort(gradients_.begin(), gradients_.end(), [](const Gradient& a, const Gradient& b) {
    return std::make_tuple(a.id.replica_slot(), a.id.worker(), a.id.unit(), a.id.step()) <
           std::make_tuple(b.id.replica_slot(), b.id.worker(), b.id.unit(), b.id.step());
  });
}

bool SyncAccumulator::Step::overflow() const {
  return std::any_of(gradients_.begin(), gradients_.end(),
                     [](const Gradient& g) { return g.overflow; });
}

void SyncAccumulator::Step::Mean(size_t variable, int64_t n, float* out) const {
  std::fill(out, out + n, 0.0f);
  for (const Gradient& g : gradients_) {
    tensor::FloatView v(g.tensors[variable]);
    const float* src = v.data();
    for (int64_t k = 0; k < n; ++k) out[k] += src[k];
  }
  const float count = static_cast<float>(gradients_.size());
  for (int64_t k = 0; k < n; ++k) out[k] /= count;
}

tensor::RowSparse SyncAccumulator::Step::MeanRows(size_t variable, int64_t width) const {
  std::map<int64_t, size_t> at;  // row id -> its row in `sums`
  std::vector<float> sums;
  for (const Gradient& g : gradients_) {
    const RowsView rows(g.tensors[variable]);
    for (int64_t j = 0; j < rows.size(); ++j) {
      auto [it, fresh] = at.emplace(rows.id(j), sums.size() / static_cast<size_t>(width));
      if (fresh) sums.resize(sums.size() + static_cast<size_t>(width), 0.0f);
      float* out = sums.data() + it->second * static_cast<size_t>(width);
      const float* src = rows.row(j, width);
      for (int64_t k = 0; k < width; ++k) out[k] += src[k];
    }
  }
  const float count = static_cast<float>(gradients_.size());
  tensor::RowSparse mean;
  mean.ids.reserve(at.size());
  mean.values.reserve(sums.size());
  for (const auto& [id, row] : at) {
    mean.ids.push_back(id);
    const float* src = sums.data() + row * static_cast<size_t>(width);
    for (int64_t k = 0; k < width; ++k) mean.values.push_back(src[k] / count);
  }
  return mean;
}

SyncAccumulator::Verdict SyncAccumulator::Add(const proto::PushId& id, int64_t computed_on_version,
                                              absl::Span<const absl::string_view> tensors,
                                              Step* step, bool overflow) {
  if (computed_on_version < step_) return Verdict::kStale;
  Gradient g{id, {}, overflow};
  if (!overflow) {
    g.tensors.reserve(tensors.size());
    for (absl::string_view t : tensors) g.tensors.emplace_back(t);
  }
  pending_.push_back(std::move(g));
  return TakeIfComplete(step) ? Verdict::kComplete : Verdict::kAccumulated;
}

bool SyncAccumulator::TakeIfComplete(Step* step) {
  if (pending_.empty() || static_cast<int32_t>(pending_.size()) < replicas_) return false;
  *step = Step(std::move(pending_));
  pending_.clear();
  ++step_;
  return true;
}

int64_t SyncAccumulator::Discard() {
  const int64_t n = pending();
  pending_.clear();
  return n;
}

int64_t SyncAccumulator::Restart(int64_t step) {
  step_ = step;
  return Discard();
}

}  // namespace ps_server
}  // namespace psc
