// One worker's training: it runs units of steps for the chief. Each step
// reads its slot's share of the batch and hands it to the job's
// StepExchange (step_exchange.h), which runs the forward and backward
// passes and trades the gradients for the next step's parameters: with the
// ps tasks in one push per shard (whole_push_exchange.h) or in parts while
// the passes run (overlapped_exchange.h), or by an all-reduce over a
// multi_worker_mirrored group (collective_exchange.h). Transport-free: the
// servers are a ParameterClient.
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
#ifndef PSC_WORKER_REPLICA_TRAINER_H_
#define PSC_WORKER_REPLICA_TRAINER_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/compute/model.h"
#include "common/data/batch_plan.h"
#include "common/data/dataset.h"
#include "common/job/record_stream.h"
#include "common/ps_client/parameter_client.h"
#include "common/ps_client/sharded_parameters.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"
#include "worker/collective_exchange.h"
#include "worker/device_plan.h"
#include "worker/mirrored_replicas.h"
#include "worker/step_exchange.h"
#include "worker/topk_compressor.h"
#include "worker/worker_parameters.h"

namespace psc {
namespace worker {

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
  static constexpr absl::Duration kStepTimeout = WorkerParameters::kStepTimeout;

 private:
  ReplicaTrainer() = default;
  absl::StatusOr<proto::UnitMetrics> RunSteps(const proto::RunUnitRequest& unit,
                                              const std::function<bool()>& cancelled,
                                              const StepDone& step_done);
  // --topk_ratio: the residuals the unit starts from (the request's, or
  // this worker's own when they are the identity's at the unit's first
  // step: FAILED_PRECONDITION otherwise). Without: INVALID_ARGUMENT for a
  // unit that brings some.
  absl::Status TakeErrorFeedback(const proto::RunUnitRequest& unit, int identity);

  proto::JobSpec job_;
  int worker_index_ = 0;
  ps_client::ParameterClient* client_ = nullptr;
  base::RealClock real_clock_;
  base::Clock* clock_ = &real_clock_;
  data::FashionMnist data_;
  std::unique_ptr<data::BatchPlan> plan_;
  // Streamed data files: the slots' batches instead of plan_'s.
  std::unique_ptr<job::SlotBatches> stream_;
  std::map<std::string, std::set<int64_t>> skipped_told_;  // its records skipped, reported
  std::unique_ptr<compute::Model> model_;
  // Tables trained row by row (null: none), and the model the replicas
  // compute with then: each such table the step's rows long.
  std::unique_ptr<ps_client::RowTables> tables_;
  std::unique_ptr<compute::Model> local_model_;
  std::unique_ptr<MirroredReplicas> replicas_;  // one per logical device
  std::unique_ptr<ps_client::ShardedParameters> sharded_;
  std::unique_ptr<WorkerParameters> params_;
  bool logged_algorithms_ = false;
  double straggler_factor_ = 1.0;

  // parameter_server --topk_ratio: the residuals, and whose at which step
  // they are (worker -1: none valid, as while a unit runs).
  std::unique_ptr<TopKCompressor> topk_;
  int residual_worker_ = -1;
  int64_t residual_step_ = -1;

  // Declared last, destroyed first: its hooks on the replicas refer to it.
  std::unique_ptr<StepExchange> exchange_;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_REPLICA_TRAINER_H_
