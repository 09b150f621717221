// Fakes at the chief core's seams: a ParameterClient that records what the
// chief tells the shards, and a WorkerClient whose units answer from a
// script or hang until cancelled.
#ifndef PSC_CHIEF_TESTING_FAKES_H_
#define PSC_CHIEF_TESTING_FAKES_H_

#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "chief/worker_client.h"
#include "common/ps_client/testing/fake_parameter_client.h"

namespace psc {
namespace chief {
namespace testing {

// Thread-safe. Records every UpdateMembership and CreateVariables;
// everything else succeeds.
class RecordingParameterClient : public ps_client::testing::FakeParameterClient {
 public:
  explicit RecordingParameterClient(int shards) : FakeParameterClient(shards) {}
  absl::Status UpdateMembership(int shard, const proto::UpdateMembershipRequest& request,
                                proto::UpdateMembershipResponse*) override {
    absl::MutexLock lock(&mu_);
    updates_.emplace_back(shard, request);
    return absl::OkStatus();
  }
  absl::Status CreateVariables(int shard, const proto::CreateVariablesRequest& request) override {
    absl::MutexLock lock(&mu_);
    creates_.emplace_back(shard, request);
    return absl::OkStatus();
  }
  std::vector<std::pair<int, proto::UpdateMembershipRequest>> updates() {
    absl::MutexLock lock(&mu_);
    return updates_;
  }
  std::vector<std::pair<int, proto::CreateVariablesRequest>> creates() {
    absl::MutexLock lock(&mu_);
    return creates_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<int, proto::UpdateMembershipRequest>> updates_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, proto::CreateVariablesRequest>> creates_ ABSL_GUARDED_BY(mu_);
};

// Thread-safe. A worker's units succeed (examples = its slot's steps)
// unless it is scripted to fail or to hang; `dead` workers do not answer.
class FakeWorkerClient : public WorkerClient {
 public:
  explicit FakeWorkerClient(int workers) : workers_(workers) {}

  void Fail(int worker, absl::Status error) {
    absl::MutexLock lock(&mu_);
    fail_[worker] = std::move(error);
  }
  void Hang(int worker) {
    absl::MutexLock lock(&mu_);
    hang_[worker] = true;
  }
  void Kill(int worker) {
    absl::MutexLock lock(&mu_);
    dead_[worker] = true;
  }
  // A hung worker's unit ends, done, and the worker no longer hangs.
  void Release(int worker) {
    absl::MutexLock lock(&mu_);
    hang_[worker] = false;
    released_[worker] = true;
  }
  // A killed worker restarted: it answers again.
  void Revive(int worker) {
    absl::MutexLock lock(&mu_);
    dead_[worker] = false;
    fail_.erase(worker);
  }
  // --topk_ratio: each worker holds residuals as a real one does (a tag of
  // identity and step): a unit without them that does not match the tag
  // fails FAILED_PRECONDITION, and a unit that ends returns them.
  void EmulateErrorFeedback() {
    absl::MutexLock lock(&mu_);
    error_feedback_ = true;
  }
  // The worker restarted: it holds no residuals.
  void Restart(int worker) {
    absl::MutexLock lock(&mu_);
    holds_.erase(worker);
  }
  std::vector<proto::RunUnitRequest> calls(int worker) {
    absl::MutexLock lock(&mu_);
    return calls_[worker];
  }

  int num_workers() const override { return workers_; }
  absl::Status StartJob(int, const proto::JobSpec&) override { return absl::OkStatus(); }
  absl::StatusOr<proto::UnitMetrics> RunUnit(int worker,
                                             const proto::RunUnitRequest& unit) override {
    absl::MutexLock lock(&mu_);
    calls_[worker].push_back(unit);
    if (hang_[worker]) {
      // Until CancelUnit; bounded, so that a test that never cancels fails.
      auto cancelled = [this, worker]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return cancelled_[worker] || released_[worker];
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&cancelled), absl::Seconds(30))) {
        return absl::DeadlineExceededError("never cancelled");
      }
      if (!released_[worker]) {
        cancelled_[worker] = false;
        return absl::CancelledError("cancelled");
      }
    }
    if (auto it = fail_.find(worker); it != fail_.end()) return it->second;
    proto::UnitMetrics m;
    m.set_examples(unit.num_steps());
    if (error_feedback_) {
      const int identity = unit.has_push_as_worker() ? unit.push_as_worker() : worker;
      const std::pair<int, int64_t> want = {identity, unit.first_step()};
      if (!unit.has_error_feedback() && (!holds_.count(worker) || holds_[worker] != want)) {
        return absl::FailedPreconditionError("brings no error feedback");
      }
      holds_[worker] = {identity, unit.first_step() + unit.num_steps()};
      m.mutable_error_feedback()->set_worker(identity);
      m.mutable_error_feedback()->set_step(unit.first_step() + unit.num_steps());
    }
    return m;
  }
  void CancelUnit(int worker) override {
    absl::MutexLock lock(&mu_);
    cancelled_[worker] = true;
  }
  bool Alive(int worker) override {
    absl::MutexLock lock(&mu_);
    return !dead_[worker];
  }

 private:
  const int workers_;
  absl::Mutex mu_;
  std::map<int, absl::Status> fail_ ABSL_GUARDED_BY(mu_);
  std::map<int, bool> hang_ ABSL_GUARDED_BY(mu_);
  std::map<int, bool> dead_ ABSL_GUARDED_BY(mu_);
  std::map<int, bool> cancelled_ ABSL_GUARDED_BY(mu_);
  std::map<int, bool> released_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::vector<proto::RunUnitRequest>> calls_ ABSL_GUARDED_BY(mu_);
  bool error_feedback_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int, std::pair<int, int64_t>> holds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing
}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_TESTING_FAKES_H_
