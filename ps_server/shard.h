// One parameter-server shard: its variables, optimizer slots, version,
// accumulators and exactly-once state, and the three update modes
// (DESIGN.md, "Training modes"). Transport-free: the gRPC service
// (ps_service.h) is a thin adapter, and tests drive a Shard directly.
//
// Lifecycle: NEW -> CONFIGURED (Configure) -> SERVING (CreateVariables or
// RestoreCheckpoint; Push/Pull) -> SHUT_DOWN (Shutdown fails every waiting
// pull with UNAVAILABLE and refuses new ones).
//
// Modes:
//  - sync: gradients computed on version v count toward step v only. When
//    replicas_to_aggregate have arrived, their mean (summed in a fixed
//    order: replica slot, then worker, then unit) is applied once and
//    version v+1 is published. Older gradients are dropped and counted.
//  - async: each gradient is applied on arrival; staleness = version at
//    apply - computed_on_version goes into a histogram. Each apply is one
//    version.
//  - ssp: applied on arrival as in async; a worker's Pull waits while its
//    clock is more than `staleness` ahead of the slowest live worker's.
//
// Exactly once: a PushId seen before is acknowledged (DUPLICATE) and not
// applied again. The seen ids are part of a checkpoint, so a restored shard
// forgets exactly the pushes made after it. Counters:
//   pushes_accepted = gradients_applied + gradients_dropped_stale
//                     + gradients_discarded + gradients_pending
// with duplicates, rejected requests and skipped non-finite gradients
// counted apart.
//
// Validation happens before any state changes: a bad request changes no
// variable, slot, version or exactly-once state (only the rejection counter).
//
// Thread-safe. Locks, in acquisition order: values_mu_ (reader/writer: held
// shared by pulls and async applies, exclusively by sync step applies,
// CreateVariables, Configure and checkpoints), then mu_ (metadata), then a
// Variable's mu (its values and slots). Callbacks run with no lock held.
#ifndef PSC_PS_SERVER_SHARD_H_
#define PSC_PS_SERVER_SHARD_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/optimizer/optimizer.h"
#include "proto/checkpoint.pb.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace ps_server {

struct ShardOptions {
  base::Clock* clock = nullptr;  // not owned; deadlines of waiting pulls. Required.
  // Requests larger than this are INVALID_ARGUMENT (unless the policy sets
  // its own max_request_bytes).
  int64_t max_request_bytes = int64_t{512} << 20;
  int keep_checkpoints = 5;  // newest checkpoints kept per shard
  int staleness_buckets = 64;
};

class Shard {
 public:
  using PullDone = std::function<void(absl::Status)>;

  explicit Shard(ShardOptions options);
  ~Shard();

  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Sets the shard's index, policy and optimizer (Keras defaults filled in).
  // The same configuration again is a no-op; a different one once variables
  // exist is FAILED_PRECONDITION. INVALID_ARGUMENT for bad values.
  absl::Status Configure(const proto::ConfigureRequest& request);

  // All or nothing. An existing variable with the same spec is left as it
  // is; a different spec is FAILED_PRECONDITION. Values must be finite.
  absl::Status CreateVariables(const proto::CreateVariablesRequest& request,
                               proto::CreateVariablesResponse* response);

  // Validates, dedupes and applies per the mode. Never waits for other
  // workers. Errors: FAILED_PRECONDITION before Configure or for a gradient
  // computed on a version this shard has not reached (pull again);
  // NOT_FOUND for an unknown variable; INVALID_ARGUMENT for a bad request
  // (shapes, missing or repeated gradients, sizes, non-finite values unless
  // the policy skips them). Ignores pull_after (see Pull).
  absl::Status Push(const proto::PushRequest& request, proto::PushResponse* response);

  // Serves `request` into `response` once the shard's version is at least
  // min_version (and, in ssp, the worker is within `staleness` of the
  // slowest live worker), then calls `done` exactly once, possibly before
  // Pull returns. DEADLINE_EXCEEDED when `deadline` passes first (see
  // ExpireWaiters), UNAVAILABLE after Shutdown. `response` must stay valid
  // until `done` runs.
  void Pull(const proto::PullRequest& request, absl::Time deadline, proto::PullResponse* response,
            PullDone done);

  // Changes replicas_to_aggregate (sync) and the live workers (ssp) at a step
  // boundary. A half-filled accumulator is applied if it now holds enough
  // gradients (COMPLETE, the default) or dropped and counted (DISCARD).
  absl::Status UpdateMembership(const proto::UpdateMembershipRequest& request,
                                proto::UpdateMembershipResponse* response);

  // Writes variables, slots, version and exactly-once state to
  // <directory>/ckpt-<step>/ (durably; see common/checkpoint/checkpoint_files.h) and keeps the
  // newest `keep_checkpoints`.
  absl::Status SaveCheckpoint(const proto::SaveCheckpointRequest& request,
                              proto::SaveCheckpointResponse* response);

  // Verifies the checkpoint completely, then replaces the shard's state with
  // it in one step. On any error the live state is unchanged. NOT_FOUND,
  // DATA_LOSS (missing, truncated or corrupt files) or FAILED_PRECONDITION
  // (written by another shard count or optimizer).
  absl::Status RestoreCheckpoint(const proto::RestoreCheckpointRequest& request,
                                 proto::RestoreCheckpointResponse* response);

  proto::ShardStats Stats() const;

  // Fails waiting pulls whose deadline has passed (by the injected clock).
  void ExpireWaiters();

  // Fails every waiting pull with UNAVAILABLE and refuses new waits.
  void Shutdown();

  int num_waiters() const;

 private:
  struct Variable {
    Variable(std::string n, std::vector<int64_t> s, int64_t size, int num_slots);
    const std::string name;
    const std::vector<int64_t> shape;
    const int64_t size;  // elements
    absl::Mutex mu;
    std::vector<float> values ABSL_GUARDED_BY(mu);
    std::vector<std::vector<float>> slots ABSL_GUARDED_BY(mu);
  };

  // One gradient waiting in the sync accumulator.
  struct Pending {
    proto::PushId id;
    std::vector<std::string> gradients;  // in variables_ order
  };

  struct Waiter {
    proto::PullRequest request;
    absl::Time deadline;
    proto::PullResponse* response;
    PullDone done;
  };

  using PushKey = std::tuple<int32_t, int64_t, int64_t, int32_t>;  // worker, unit, step, slot
  static PushKey KeyOf(const proto::PushId& id) {
    return {id.worker(), id.unit(), id.step(), id.replica_slot()};
  }

  absl::Status ValidatePush(const proto::PushRequest& request,
                            std::vector<absl::string_view>* gradients) const
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_);
  absl::Status ValidatePull(const proto::PullRequest& request) const
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_);
  bool PullReady(const proto::PullRequest& request) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NotReadyReason(const proto::PullRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies the requested variables and the version into `response`.
  void FillPull(const proto::PullRequest& request, proto::PullResponse* response)
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the waiters that can now be served into `ready`.
  void TakeReadyWaiters(std::vector<Waiter>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Serves `ready` waiters and calls their callbacks.
  void ServeWaiters(std::vector<Waiter> ready) ABSL_LOCKS_EXCLUDED(values_mu_, mu_);
  // Applies the mean of `pending` as one step. Publishes version + 1.
  void ApplySyncStep(std::vector<Pending> pending, std::vector<Waiter>* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(values_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // Applies one gradient per variable (async/ssp).
  void ApplyGradients(const std::vector<absl::string_view>& gradients, int64_t iteration)
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_);
  void RecordStaleness(int64_t staleness, int64_t count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t MaxRequestBytes() const ABSL_SHARED_LOCKS_REQUIRED(values_mu_);

  // Constant after construction.
  const ShardOptions options_;

  mutable absl::Mutex values_mu_;
  // Configuration: set by Configure under values_mu_ (exclusive).
  bool configured_ ABSL_GUARDED_BY(values_mu_) = false;
  proto::ConfigureRequest config_ ABSL_GUARDED_BY(values_mu_);
  std::unique_ptr<optimizer::Optimizer> optimizer_ ABSL_GUARDED_BY(values_mu_);
  // The variables: the set changes only under values_mu_ (exclusive).
  std::vector<std::unique_ptr<Variable>> variables_ ABSL_GUARDED_BY(values_mu_);
  absl::flat_hash_map<std::string, int> index_ ABSL_GUARDED_BY(values_mu_);

  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(values_mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t updates_ ABSL_GUARDED_BY(mu_) = 0;  // optimizer iterations
  // sync: the step gradients count toward; runs one ahead of version_ while
  // a completed step is being applied.
  int64_t accum_step_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t replicas_to_aggregate_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t staleness_ ABSL_GUARDED_BY(mu_) = 0;  // ssp
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
  int64_t restore_epoch_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by every restore
  absl::flat_hash_set<PushKey> seen_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> clocks_ ABSL_GUARDED_BY(mu_);  // ssp, per worker
  std::vector<bool> live_ ABSL_GUARDED_BY(mu_);       // ssp, per worker
  std::list<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  proto::ShardStats stats_ ABSL_GUARDED_BY(mu_);  // counters only
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_SHARD_H_
