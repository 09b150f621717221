// One worker's training: it runs units of steps for the chief, each step a
// pull, a forward/backward pass on its replica slot's share of the batch,
// and one push per shard (with the next parameters coming back in the same
// round trip), or with --overlap that push in parts sent while the backward
// pass runs (overlapped_push.h). Transport-free: the servers are a ParameterClient.
//
// The replica computes on the worker's devices (DeviceSetup): one model
// replica per logical device, the batch split over them and their gradients
// summed before the push (MirroredReplicas); by default the CPU alone.
//
// Per mode (DESIGN.md): sync pulls "version >= step" (the step's
// parameters) and pushes gradients computed on it; async takes whatever is
// newest; ssp also sends the worker's clock (finished steps), and the
// servers hold a pull that runs too far ahead. Sync with backup workers
// (common/job/step_batch.h): each slot reads batch_size / R examples; a
// worker whose gradient arrives after the step's first R (dropped as
// stale, UnitMetrics.examples_dropped) goes on at the step the servers
// reached, skipping the ones it missed, and its unit ends with the others'.
//
// multi_worker_mirrored (job.strategy): `client` is the worker's embedded
// replica (embedded_shard_client.h) and there is no ps. Each step the
// replica's gradients (scaled by 1/global batch, the moving statistics by
// 1/group size) are summed over the group by an all-reduce, in buckets
// that start as the backward pass makes them (BucketedReducer, through the
// executor's gradient-ready hook when the worker has one local replica),
// and the sum is pushed to the embedded replica as its step's one
// gradient: every member applies the same bits. The unit names the group
// (RunUnitRequest.group); a new name forms a new one (Gloo on the CPU,
// NCCL on a GPU) through the chief's store. A failed step leaves the group
// at once, so the peers' all-reduces fail too instead of waiting.
#ifndef PSC_WORKER_REPLICA_TRAINER_H_
#define PSC_WORKER_REPLICA_TRAINER_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/collective/bucketed_reducer.h"
#include "common/collective/collective.h"
#include "common/compute/model.h"
#include "common/data/batch_plan.h"
#include "common/data/dataset.h"
#include "common/ps_client/parameter_client.h"
#include "common/ps_client/sharded_parameters.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"
#include "worker/device_plan.h"
#include "worker/mirrored_replicas.h"
#include "worker/overlapped_push.h"
#include "worker/topk_compressor.h"

namespace psc {
namespace worker {

// How a multi_worker_mirrored worker reaches its group.
struct CollectiveSetup {
  collective::KeyValueStore* store = nullptr;  // the chief's store; not owned
  std::string hostname = "127.0.0.1";          // where this worker's peers reach it
};

// What one step took, as ReplicaTrainer::RunUnit reports it to its
// `step_done` (the worker's metrics).
// The times are those accrued since the previous sample (the unit's first
// pull goes with its first step), so a unit's samples add up to its
// UnitMetrics.
struct StepSample {
  int64_t step = 0;
  int64_t examples = 0;        // this slot's share of the step's batch
  double seconds = 0;          // the step itself, wall time
  double compute_seconds = 0;  // as UnitMetrics counts it (idle included)
  double comm_seconds = 0;
  double idle_seconds = 0;  // --straggler_factor's idle time
};

// Thread-compatible: one unit at a time.
class ReplicaTrainer {
 public:
  // Loads the data and builds the model for `job` (validated, with its
  // placement) on `devices` (see replica_backends.h for its errors).
  // `client` is not owned.
  // `clock` (not owned; the system clock when null) times the compute and
  // the communication.
  static absl::StatusOr<std::unique_ptr<ReplicaTrainer>> Create(
      const proto::JobSpec& job, int worker_index, ps_client::ParameterClient* client,
      const DeviceSetup& devices = DeviceSetup(), base::Clock* clock = nullptr,
      const CollectiveSetup* collective = nullptr);

  // Runs steps [first_step, first_step + num_steps) as slot `replica_slot`
  // of `num_slots`. `cancelled` (may be empty) is polled between steps
  // (CANCELLED); `step_done` (may be empty) is told each step pushed.
  using StepDone = std::function<void(const StepSample&)>;
  absl::StatusOr<proto::UnitMetrics> RunUnit(const proto::RunUnitRequest& unit,
                                             const std::function<bool()>& cancelled,
                                             const StepDone& step_done = nullptr);

  // An experiment knob (worker --straggler_factor): after computing each
  // step's gradients the worker idles for (factor - 1) times that compute
  // time before it pushes, so its compute per step is `factor` times
  // another worker's; the idle time counts as compute
  // (UnitMetrics.idle_seconds says how much). factor >= 1; 1 = off.
  void set_straggler_factor(double factor) { straggler_factor_ = factor; }

  // multi_worker_mirrored: how long an all-reduce may wait for a peer (the
  // job's collective timeout, 60 s by default); zero for other strategies.
  absl::Duration collective_timeout() const;

  // How long a step may wait on the servers (a sync step waits for the
  // slowest replica).
  static constexpr absl::Duration kStepTimeout = absl::Minutes(10);

 private:
  ReplicaTrainer() = default;
  // Fetches the parameters for `step` (see the header comment).
  absl::Status Pull(int64_t step);
  absl::StatusOr<proto::UnitMetrics> RunSteps(const proto::RunUnitRequest& unit,
                                              const std::function<bool()>& cancelled,
                                              const StepDone& step_done);
  bool collective() const { return job_.strategy() == proto::MULTI_WORKER_MIRRORED; }
  // Publishes what this member runs under the group's prefix and checks
  // that every other member runs the same (FAILED_PRECONDITION naming the
  // rank; DEADLINE_EXCEEDED if one never arrives), before any connection.
  absl::Status CheckPeersRunThisJob(const proto::RunUnitRequest& unit, absl::Duration timeout,
                                    const std::function<bool()>& cancelled);
  // Joins the unit's group unless this worker is in it already.
  // `cancelled` (may be empty) ends the waits for the peers (CANCELLED).
  absl::Status JoinGroup(const proto::RunUnitRequest& unit, const std::function<bool()>& cancelled);
  // The gradients of the step just computed into the reducer's slots (when
  // the hook did not), then the all-reduce's sums into grads_.
  absl::Status ReduceStep(collective::ReduceTiming* timing);
  // Variable v's gradient is in its slot: scale a moving statistic, mark it.
  absl::Status SlotFilled(int v);
  // parameter_server --overlap: pushes in parts from the backward pass's
  // hook (overlapped_push.h); with several local replicas, whole pushes.
  absl::Status SetUpOverlap(base::Clock* clock);
  // Shard `shard`'s push of `step` without its gradients: the id, the
  // version computed on, the clock and the pull after it.
  void PushHeader(const proto::RunUnitRequest& unit, int64_t step, int identity,
                  proto::DataType wire, int shard, proto::PushRequest* p) const;
  // --topk_ratio: the residuals the unit starts from (the request's, or
  // this worker's own when they are the identity's at the unit's first
  // step: FAILED_PRECONDITION otherwise).
  // OK when step `step`'s loss and gradients (grads_) are finite; else the
  // job error naming this worker (`identity`), the step and the variable,
  // with the push's outcome `pushed` (divergence.h).
  absl::Status CheckFinite(double loss_sum, int identity, int64_t step,
                           const absl::Status& pushed) const;
  absl::Status TakeErrorFeedback(const proto::RunUnitRequest& unit, int identity);
  // `split` (one vector per shard, float32) as they travel: sparsified
  // under --topk_ratio, else in `wire`.
  absl::Status EncodeGradients(proto::DataType wire,
                               std::vector<std::vector<proto::NamedTensor>>* split);
  // Waits `idle` on the clock; CANCELLED as soon as `cancelled` says so.
  absl::Status Idle(absl::Duration idle, const std::function<bool()>& cancelled);

  proto::JobSpec job_;
  int worker_index_ = 0;
  ps_client::ParameterClient* client_ = nullptr;
  base::RealClock real_clock_;
  base::Clock* clock_ = &real_clock_;
  data::FashionMnist data_;
  std::unique_ptr<data::BatchPlan> plan_;
  std::unique_ptr<compute::Model> model_;
  std::unique_ptr<MirroredReplicas> replicas_;  // one per logical device
  std::unique_ptr<ps_client::ShardedParameters> sharded_;
  std::vector<std::vector<float>> params_;
  std::vector<std::vector<float>> grads_;
  std::vector<int64_t> versions_;  // per shard, of params_
  bool have_params_ = false;
  // params_ holds the frozen variables' values (they never change), so
  // pulls leave them out (skip_frozen). Set by a pull that brought them;
  // cleared when a unit fails, which may have left them half-written.
  bool frozen_held_ = false;
  bool logged_algorithms_ = false;
  int64_t next_step_ = -1;  // the step params_ are for (sync), or -1
  double straggler_factor_ = 1.0;

  // multi_worker_mirrored.
  CollectiveSetup collective_setup_;
  std::unique_ptr<collective::Collective> group_;
  std::string group_prefix_;
  std::unique_ptr<collective::BucketedReducer> reducer_;
  std::vector<int> ready_order_;  // variables in the order the backward pass makes them
  std::vector<bool> trainable_;   // Model::trainable_variables(), for global_clipnorm
  bool hooked_ = false;           // the executor's hook fills the reducer's slots

  // parameter_server --topk_ratio: the residuals, and whose at which step
  // they are (worker -1: none valid, as while a unit runs).
  std::unique_ptr<TopKCompressor> topk_;
  int residual_worker_ = -1;
  int64_t residual_step_ = -1;

  // parameter_server --overlap.
  std::unique_ptr<OverlappedPush> overlapped_;
  bool overlap_step_ = false;  // the hook sends this step's parts
  bool pull_step_ = false;     // the forward hook takes this step's parameters
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_REPLICA_TRAINER_H_
