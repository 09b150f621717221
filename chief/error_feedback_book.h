// The workers' error-feedback residuals (--topk_ratio) as the chief keeps
// them (worker/topk_compressor.h): each identity's as its last completed
// unit left them, and what each worker process holds. A unit brings the
// residuals of the identity it pushes as (RunUnitRequest.error_feedback)
// only where its worker does not hold them already: the first unit, an
// heir's redo of a lost worker's unit, the units after a restore or after
// the worker's unit failed. The chief records the residuals with each
// checkpoint (shard 0's) and takes them back with a restore, so that a
// recovered run pushes what an uninterrupted one does.
//
// Thread-safe.
#ifndef PSC_CHIEF_ERROR_FEEDBACK_BOOK_H_
#define PSC_CHIEF_ERROR_FEEDBACK_BOOK_H_

#include <cstdint>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace psc {
namespace chief {

class ErrorFeedbackBook {
 public:
  // Starts over at `step` (the job's start, or a restore): every identity's
  // residuals are `state`'s (CheckErrorFeedback'd), those it leaves out
  // zero at `step`; no worker holds any.
  absl::Status Reset(int64_t step, const proto::ErrorFeedbackState& state);

  // Adds to `request` (worker `worker`'s, possibly pushing as another) the
  // residuals of the identity it pushes as, unless the worker holds them.
  // FAILED_PRECONDITION when the book's are not at the unit's first step.
  absl::Status Attach(int worker, proto::RunUnitRequest* request) const;
  // Worker `worker` finished a unit: the residuals it returned are its
  // identity's now, and the worker holds them. INVALID_ARGUMENT when the
  // unit returned none.
  absl::Status Record(int worker, const proto::UnitMetrics& metrics);
  // Worker `worker`'s unit failed: what it holds is half-updated.
  void Forget(int worker);

  // Every identity's residuals, for a checkpoint.
  proto::ErrorFeedbackState State() const;

  // async and ssp (the work queue): an identity's next unit may start at
  // any step, so every unit brings its identity's latest residuals, stamped
  // with the unit's first step, and Attach never fails.
  void set_any_step(bool any_step) {
    absl::MutexLock lock(&mu_);
    any_step_ = any_step;
  }

 private:
  mutable absl::Mutex mu_;
  bool any_step_ ABSL_GUARDED_BY(mu_) = false;
  int64_t start_ ABSL_GUARDED_BY(mu_) = 0;  // the step of the identities not in latest_
  std::map<int, proto::ErrorFeedback> latest_ ABSL_GUARDED_BY(mu_);   // by identity
  std::map<int, std::pair<int, int64_t>> held_ ABSL_GUARDED_BY(mu_);  // worker -> (identity, step)
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_ERROR_FEEDBACK_BOOK_H_
