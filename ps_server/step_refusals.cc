#include "ps_server/step_refusals.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace ps_server {

void StepRefusals::Refuse(int64_t step, int worker, const absl::Status& status) {
  if (step != step_) Clear();
  step_ = step;
  if (workers_.empty()) {
    first_worker_ = worker;
    first_ = status;
  }
  workers_.insert(worker);
}

absl::Status StepRefusals::Blocked(int64_t step, int32_t replicas, int live) const {
  if (step != step_ || workers_.empty()) return absl::OkStatus();
  const int able = live - static_cast<int>(workers_.size());
  if (able >= replicas) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("sync step ", step, " cannot complete: worker:", first_worker_,
                   "'s gradient was refused (", first_.message(), ")",
                   workers_.size() > 1 ? absl::StrCat(", and ", workers_.size() - 1, " more") : "",
                   ", and the ", able < 0 ? 0 : able, " other live worker(s) cannot make up the ",
                   replicas, " replicas to aggregate"));
}

void StepRefusals::Clear() {
  step_ = -1;
  workers_.clear();
  first_worker_ = -1;
  first_ = absl::OkStatus();
}

}  // namespace ps_server
}  // namespace psc
