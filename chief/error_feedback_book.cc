#include "chief/error_feedback_book.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/tensor/topk.h"

namespace psc {
namespace chief {

absl::Status ErrorFeedbackBook::Reset(int64_t step, const proto::ErrorFeedbackState& state) {
  PSC_RETURN_IF_ERROR(tensor::CheckErrorFeedback(state, "the restored checkpoint"));
  absl::MutexLock lock(&mu_);
  start_ = step;
  latest_.clear();
  held_.clear();
  for (const proto::ErrorFeedback& f : state.workers()) latest_[f.worker()] = f;
  return absl::OkStatus();
}

absl::Status ErrorFeedbackBook::Attach(int worker, proto::RunUnitRequest* request) const {
  const int identity = request->has_push_as_worker() ? request->push_as_worker() : worker;
  const int64_t first = request->first_step();
  absl::MutexLock lock(&mu_);
  auto held = held_.find(worker);
  if (!any_step_ && held != held_.end() && held->second == std::make_pair(identity, first)) {
    return absl::OkStatus();
  }
  auto it = latest_.find(identity);
  proto::ErrorFeedback* f = request->mutable_error_feedback();
  if (it == latest_.end()) {
    f->set_worker(identity);
    f->set_step(start_);
  } else {
    *f = it->second;
  }
  if (any_step_) f->set_step(first);
  if (f->step() != first) {
    const int64_t at = f->step();
    request->clear_error_feedback();
    return absl::FailedPreconditionError(absl::StrCat(
        "--topk_ratio: the chief holds worker ", identity, "'s error feedback at step ", at,
        ", not at step ", first, " where its unit starts"));
  }
  return absl::OkStatus();
}

absl::Status ErrorFeedbackBook::Record(int worker, const proto::UnitMetrics& metrics) {
  if (!metrics.has_error_feedback()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", worker, " ended a unit of a --topk_ratio job without its error feedback"));
  }
  const proto::ErrorFeedback& f = metrics.error_feedback();
  proto::ErrorFeedbackState one;
  *one.add_workers() = f;
  PSC_RETURN_IF_ERROR(tensor::CheckErrorFeedback(one, absl::StrCat("worker ", worker)));
  absl::MutexLock lock(&mu_);
  latest_[f.worker()] = f;
  held_[worker] = {f.worker(), f.step()};
  return absl::OkStatus();
}

void ErrorFeedbackBook::Forget(int worker) {
  absl::MutexLock lock(&mu_);
  held_.erase(worker);
}

proto::ErrorFeedbackState ErrorFeedbackBook::State() const {
  absl::MutexLock lock(&mu_);
  proto::ErrorFeedbackState state;
  for (const auto& [identity, f] : latest_) *state.add_workers() = f;
  return state;
}

}  // namespace chief
}  // namespace psc
