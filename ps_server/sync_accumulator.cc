#include "ps_server/sync_accumulator.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "common/tensor/tensor.h"

namespace psc {
namespace ps_server {
SyncAccumulator::Step::Step(std::vector<Gradient> gradients) : gradients_(std::move(gradients)) {
  std::sort(gradients_.begin(), gradients_.end(), [](const Gradient& a, const Gradient& b) {
    return std::make_tuple(a.id.replica_slot(), a.id.worker(), a.id.unit(), a.id.step()) <
           std::make_tuple(b.id.replica_slot(), b.id.worker(), b.id.unit(), b.id.step());
  });
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

SyncAccumulator::Verdict SyncAccumulator::Add(const proto::PushId& id, int64_t computed_on_version,
                                              absl::Span<const absl::string_view> tensors,
                                              Step* step) {
  if (computed_on_version < step_) return Verdict::kStale;
  Gradient g{id, {}};
  g.tensors.reserve(tensors.size());
  for (absl::string_view t : tensors) g.tensors.emplace_back(t);
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
