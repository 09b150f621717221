// One parameter-server shard (DESIGN.md, "Training modes"): the variables and
// their update rules (VariableStore: the optimizer, or a moving average's
// momentum), the exactly-once ledger (PushLedger), the
// sync rule (SyncAccumulator), the ssp rule (SspClocks) and the pulls waiting
// on them (PullWaiters), under the shard's locks. Transport-free: the
// ShardServer (shard_server.h) serves it to every transport, and tests drive
// a Shard directly.
//
// Lifecycle: NEW -> CONFIGURED (Configure) -> SERVING (CreateVariables,
// RestoreCheckpoint or ImportState; Push/Pull) -> SHUT_DOWN (Shutdown fails every waiting
// pull with UNAVAILABLE and refuses new ones).
//
// A push is: validate (every check before any state changes), the ledger
// (a duplicate is acknowledged, not applied), the mode's rule (sync:
// accumulate toward the step; async and ssp: apply now), the store, and
// waking the pulls that can now be served. A moving average's batch
// statistic travels as its gradient and goes the same way (ledger,
// staleness, counters, finite checks, versions); only the store's update
// differs: sync, one momentum update from the mean of the step's replicas;
// async and ssp, one per push on arrival. Counters:
//   pushes_accepted = gradients_applied + gradients_dropped_stale
//                     + gradients_discarded + gradients_pending
//                     + gradients_skipped_overflow
// with duplicates, rejected requests and skipped non-finite gradients
// counted apart. Under loss scaling (optimizer/loss_scale.h) a push flagged
// as an overflow is accepted and recorded like any other but never applied:
// async and ssp skip it on arrival, sync skips the whole step it belongs to
// (the version still advances, the optimizer's iterations do not), and the
// shard's scale halves; each applied update counts toward its doubling. A bad request changes no
// variable, slot, version or exactly-once state (only the rejection counter).
//
// Thread-safe. Locks, in acquisition order: values_mu_ (reader/writer: held
// shared by pulls and async applies, exclusively by sync step applies,
// CreateVariables, Configure, checkpoints and exported or imported states),
// then mu_ (everything but the variables), then a variable's own mutex (in
// the VariableStore). Callbacks run with no lock held.
#ifndef PSC_PS_SERVER_SHARD_H_
#define PSC_PS_SERVER_SHARD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/io/file_system.h"
#include "common/optimizer/loss_scale.h"
#include "proto/checkpoint.pb.h"
#include "proto/parameter_server.pb.h"
#include "ps_server/pull_waiters.h"
#include "ps_server/push_ledger.h"
#include "ps_server/push_parts.h"
#include "ps_server/ssp_clocks.h"
#include "ps_server/step_refusals.h"
#include "ps_server/sync_accumulator.h"
#include "ps_server/variable_store.h"

namespace psc {
namespace ps_server {

struct ShardOptions {
  base::Clock* clock = nullptr;  // not owned; deadlines and apply times. Required.
  // Requests larger than this are INVALID_ARGUMENT (unless the policy sets
  // its own max_request_bytes).
  int64_t max_request_bytes = int64_t{512} << 20;
  int keep_checkpoints = 5;      // newest checkpoints kept per shard
  io::FileSystem* fs = nullptr;  // not owned; checkpoints. null: the local file system
  int staleness_buckets = 64;
  // The most bytes one CreateVariables may have the shard make itself
  // (generated tables and their optimizer slots), so that a small request
  // cannot have it allocate without bound; 0: this machine's physical
  // memory. Beyond it, RESOURCE_EXHAUSTED and nothing created.
  int64_t max_generated_bytes = 0;
};

class Shard {
 public:
  using PullDone = ps_server::PullDone;

  explicit Shard(ShardOptions options);
  ~Shard();

  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Sets the shard's index, policy and optimizer (Keras defaults filled in).
  // The same configuration again is a no-op; a different one once variables
  // exist is FAILED_PRECONDITION. INVALID_ARGUMENT for bad values.
  absl::Status Configure(const proto::ConfigureRequest& request);

  // All or nothing. The request's moving_averages name the variables that
  // are moving averages (VariableStore::Create: INVALID_ARGUMENT for a name
  // not in the request, a repeated name or a momentum not finite in
  // [0, 1)). An existing variable with the same spec (shape and rule) is
  // left as it is; a different spec is FAILED_PRECONDITION. Values must be
  // finite.
  absl::Status CreateVariables(const proto::CreateVariablesRequest& request,
                               proto::CreateVariablesResponse* response);

  // Validates, dedupes and applies per the mode. Never waits for other
  // workers. Errors: FAILED_PRECONDITION before Configure or for a gradient
  // computed on a version this shard has not reached (pull again);
  // NOT_FOUND for an unknown variable; INVALID_ARGUMENT for a bad request
  // (shapes, missing or repeated gradients, sizes, non-finite values unless
  // the policy skips them). Ignores pull_after (see ShardServer::Push).
  // A part of a push in parts (push_parts.h) is checked (names, shapes,
  // sizes) and held, PART_RECEIVED; the part that completes its push
  // answers as that whole push does.
  absl::Status Push(const proto::PushRequest& request, proto::PushResponse* response);

  // The checks of Push on a request's gradient names and shapes alone (its
  // tensors may lack their data): what a data-channel frame may announce
  // before its bytes are read. NOT_FOUND or INVALID_ARGUMENT as Push would
  // answer; FAILED_PRECONDITION before the shard has variables.
  absl::Status CheckGradientShapes(const proto::PushRequest& meta) const;

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

  // Writes variables, slots, rules, version and exactly-once state to
  // <directory>/ckpt-<step>/ (durably; see common/checkpoint/checkpoint_files.h)
  // and keeps the newest `keep_checkpoints`.
  absl::Status SaveCheckpoint(const proto::SaveCheckpointRequest& request,
                              proto::SaveCheckpointResponse* response);

  // Verifies the checkpoint completely, then replaces the shard's state with
  // it in one step. On any error the live state is unchanged. NOT_FOUND,
  // DATA_LOSS (missing, truncated or corrupt files) or FAILED_PRECONDITION
  // (written by another shard count or optimizer).
  absl::Status RestoreCheckpoint(const proto::RestoreCheckpointRequest& request,
                                 proto::RestoreCheckpointResponse* response);

  // The state SaveCheckpoint would write for request.step() and
  // request.placement(), the same bytes, in response->state() instead of a
  // file. INVALID_ARGUMENT for a negative step; FAILED_PRECONDITION before
  // Configure.
  absl::Status ExportState(const proto::ExportStateRequest& request,
                           proto::ExportStateResponse* response);

  // Verifies request.state() as RestoreCheckpoint verifies a checkpoint's
  // data against this shard's configuration (it must carry request.step()),
  // then replaces the shard's state with it in one step. On any error the
  // live state is unchanged. INVALID_ARGUMENT for a negative step;
  // FAILED_PRECONDITION before Configure or for a state of another
  // optimizer; DATA_LOSS for bytes that do not verify (do not parse, carry
  // another step, shard index or shard count, or would not pass
  // CreateVariables).
  absl::Status ImportState(const proto::ImportStateRequest& request,
                           proto::ImportStateResponse* response);

  proto::ShardStats Stats() const;

  // Fails waiting pulls whose deadline has passed (by the injected clock).
  void ExpireWaiters();

  // Fails every waiting pull with UNAVAILABLE and refuses new waits.
  void Shutdown();

  int num_waiters() const;

 private:
  using Waiter = PullWaiters::Waiter;

  // A serialized proto::ShardCheckpoint of the shard's state.
  struct Snapshot {
    std::string data;
    int shard = 0;
    int num_shards = 1;
    int64_t version = 0;
  };

  // Checkpoints, saved and exported: the state as of now, taken with
  // values_mu_ held exclusively (no apply is half done) and recording `step`,
  // `placement` and the workers' error feedback (`worker_state`, kept as
  // given). `skip_row_sparse` leaves out the row-sparse variables (an
  // export's state, never restored). FAILED_PRECONDITION before Configure.
  absl::StatusOr<Snapshot> TakeSnapshot(int64_t step, const proto::Placement& placement,
                                        const proto::ErrorFeedbackState& worker_state,
                                        bool skip_row_sparse = false)
      ABSL_LOCKS_EXCLUDED(values_mu_, mu_);
  // Checkpoints, restored and imported: the configuration the state must
  // match. FAILED_PRECONDITION before Configure.
  absl::StatusOr<proto::ConfigureRequest> Configuration() const ABSL_LOCKS_EXCLUDED(values_mu_);
  // Verifies `data` (VerifyShardCheckpoint: the shard and optimizer of
  // `config`, step `step`; messages name `where`) before touching the live
  // state, then swaps it all in at once. ABORTED when the shard was
  // configured again since `config` was read. Returns the snapshot's header
  // (version, placement; no variables).
  absl::StatusOr<proto::ShardCheckpoint> SwapIn(const proto::ConfigureRequest& config,
                                                absl::string_view data, int64_t step,
                                                std::string where)
      ABSL_LOCKS_EXCLUDED(values_mu_, mu_);

  // Push, step by step.
  // A whole push (the id's part fields say so, or assembled from parts).
  absl::Status PushWhole(const proto::PushRequest& request, proto::PushResponse* response);
  // A part: held until its push is whole, then PushWhole.
  absl::Status PushPart(const proto::PushRequest& request, proto::PushResponse* response);
  // The checks on a request's id, counters and pull that need no variable
  // data (parts and whole pushes alike).
  absl::Status ValidatePushHeader(const proto::PushRequest& request) const
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_);
  // `gradients`: float32 views, into the request or (wire dtypes) into
  // `decoded`.
  absl::Status ValidatePush(const proto::PushRequest& request,
                            std::vector<absl::string_view>* gradients,
                            std::vector<std::vector<float>>* decoded, bool* nonfinite) const
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_);
  // The verdict on a validated push before the mode's rule: an answer
  // (rejected, duplicate, skipped, from the future) or nullopt to go on, in
  // which case the push is accepted and recorded in the ledger.
  std::optional<absl::Status> Admit(const proto::PushRequest& request, const absl::Status& valid,
                                    bool nonfinite, const std::vector<absl::string_view>& gradients,
                                    proto::PushResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // sync: accumulates; true when that completed the step, now in *step.
  bool Accumulate(const proto::PushRequest& request,
                  const std::vector<absl::string_view>& gradients, proto::PushResponse* response,
                  SyncAccumulator::Step* step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // async/ssp: applies one gradient now (the store), as optimizer
  // iteration `iteration`, and collects the pulls it makes ready;
  // `used_scale`: the loss scale the gradient was computed with.
  void ApplyNow(const std::vector<absl::string_view>& gradients, int64_t iteration,
                float used_scale, proto::PushResponse* response, std::vector<Waiter>* ready)
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // sync: applies a complete step unless a restore since `epoch` replaced
  // the state it was for (its gradients are then discarded).
  void ApplyCompleteStep(SyncAccumulator::Step step, int64_t epoch, proto::PushResponse* response,
                         std::vector<Waiter>* ready) ABSL_LOCKS_EXCLUDED(values_mu_, mu_);
  // Applies the mean of `step` as one update (or skips a step that
  // overflowed) and publishes version + 1.
  void ApplyStep(const SyncAccumulator::Step& step, std::vector<Waiter>* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(values_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // Loss scaling: an update skipped for an overflow, with the `gradients`
  // it held, computed with the scale `used` (0: the current one); the scale
  // halves (LossScale::Update).
  void SkipOverflow(int64_t gradients, float used = 0) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The scale the next step computes with (0 without loss scaling).
  double CurrentLossScale() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return loss_scale_ ? loss_scale_->scale() : 0.0;
  }

  absl::Status ValidatePull(const proto::PullRequest& request) const
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_);
  // A pull may ask for float32 (exact) or the policy's wire dtype.
  absl::Status CheckPullWireDtype(proto::DataType dtype) const
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_);
  bool PullReady(const proto::PullRequest& request) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sync: why a pull waiting for the step being gathered can never be
  // served (StepRefusals), or OK.
  absl::Status PullDoomed(const proto::PullRequest& request) const
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sync: records push `request`'s refusal `why` and, when its step can no
  // longer complete, moves the pulls waiting for it into *doomed with the
  // status to fail them with.
  void NoteRefusal(const proto::PushRequest& request, const absl::Status& why,
                   std::vector<Waiter>* doomed, absl::Status* doom)
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NotReadyReason(const proto::PullRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies the requested variables and the version into `response`.
  void FillPull(const proto::PullRequest& request, proto::PullResponse* response)
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the waiters that can now be served into `ready`.
  void TakeReadyWaiters(std::vector<Waiter>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ssp: moves the clock of the worker that sent `request` (and ends its
  // unit), adding the pulls that may now read to `ready`.
  void NoteClock(const proto::PushRequest& request, std::vector<Waiter>* ready)
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Serves `ready` waiters and calls their callbacks.
  void ServeWaiters(std::vector<Waiter> ready) ABSL_LOCKS_EXCLUDED(values_mu_, mu_);

  void RecordStaleness(int64_t staleness, int64_t count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t MaxRequestBytes() const ABSL_SHARED_LOCKS_REQUIRED(values_mu_);
  // RESOURCE_EXHAUSTED when `generated` would have the shard make more than
  // max_generated_bytes (values and slots).
  absl::Status CheckGeneratedBytes(
      const google::protobuf::RepeatedPtrField<proto::GeneratedVariable>& generated) const
      ABSL_SHARED_LOCKS_REQUIRED(values_mu_);
  proto::TrainingMode mode() const ABSL_SHARED_LOCKS_REQUIRED(values_mu_) {
    return configured_ ? config_.policy().mode() : proto::MODE_UNSPECIFIED;
  }

  // Constant after construction.
  const ShardOptions options_;

  mutable absl::Mutex values_mu_;
  // Configuration: set by Configure under values_mu_ (exclusive).
  bool configured_ ABSL_GUARDED_BY(values_mu_) = false;
  proto::ConfigureRequest config_ ABSL_GUARDED_BY(values_mu_);
  // The set of variables changes only under values_mu_ (exclusive).
  VariableStore store_ ABSL_GUARDED_BY(values_mu_);

  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(values_mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t updates_ ABSL_GUARDED_BY(mu_) = 0;        // optimizer iterations
  int64_t restore_epoch_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by every restore
  PushLedger ledger_ ABSL_GUARDED_BY(mu_);
  // sync: its step runs one ahead of version_ while a completed step is
  // being applied.
  SyncAccumulator accumulator_ ABSL_GUARDED_BY(mu_);
  // Pushes in parts not yet whole.
  PushAssembler assembler_ ABSL_GUARDED_BY(mu_);
  SspClocks clocks_ ABSL_GUARDED_BY(mu_);
  StepRefusals refusals_ ABSL_GUARDED_BY(mu_);  // sync
  // The policy's loss scale (empty without one); updated with the version.
  std::optional<optimizer::LossScale> loss_scale_ ABSL_GUARDED_BY(mu_);
  // A learning rate set since Configure (UpdateMembership, a restored
  // checkpoint); 0: the configuration's.
  double learning_rate_ ABSL_GUARDED_BY(values_mu_) = 0;
  // Makes the store's optimizer apply `lr` (0: the configuration's).
  void SetLearningRate(double lr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(values_mu_);
  PullWaiters waiters_ ABSL_GUARDED_BY(mu_);
  proto::ShardStats stats_ ABSL_GUARDED_BY(mu_);  // counters only
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_SHARD_H_
