// How a worker's step trades its gradients for the next step's parameters.
// The trainer's loop (replica_trainer.cc) reads each step's batch and hands
// the step to its StepExchange, which sets the replicas' parameters, has
// the passes run (ExchangeStep::compute), sends the gradients and leaves
// the parameters of the step after in WorkerParameters. One per job, chosen
// by the strategy and --overlap:
//
//   WholePushExchange (whole_push_exchange.h)   parameter_server: after the
//       backward pass, one push per shard, the next parameters in its reply;
//   OverlappedExchange (overlapped_exchange.h)  parameter_server --overlap:
//       pushes in parts while the backward pass runs, pulls in parts while
//       the next forward pass runs;
//   CollectiveExchange (collective_exchange.h)  multi_worker_mirrored: an
//       all-reduce over the group, its sum pushed to the worker's embedded
//       replica.
//
// How each variable's gradient travels (dense, top-k) is the placement's
// declaration (VariablePlacement.gradient), which every exchange follows.
#ifndef PSC_WORKER_STEP_EXCHANGE_H_
#define PSC_WORKER_STEP_EXCHANGE_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/compute/model.h"
#include "common/ps_client/parameter_client.h"
#include "common/ps_client/row_tables.h"
#include "common/ps_client/sharded_parameters.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"
#include "worker/mirrored_replicas.h"
#include "worker/topk_compressor.h"
#include "worker/worker_parameters.h"

namespace psc {
namespace worker {

// What a unit's steps took, as UnitMetrics counts it.
struct ExchangeTimes {
  absl::Duration compute;  // the worker's own work, `exposed` and `idle` included
  absl::Duration comm;     // with the servers or the group
  absl::Duration exposed;  // of `compute`, the waits for comm that overlaps it
  absl::Duration idle;     // --straggler_factor's idle time
};

// One step as the loop hands it over.
struct ExchangeStep {
  int64_t step = 0;
  int64_t end = 0;   // the unit's end
  int identity = 0;  // the worker the push is from (a lost one's, handed over)
  const proto::RunUnitRequest* unit = nullptr;
  // Runs the forward and backward passes on the replicas, whose parameters
  // the exchange has set (or sets from the forward pass's hook), with the
  // loss multiplied by `loss_scale` (WorkerParameters::loss_scale: 1
  // without loss scaling).
  std::function<absl::Status(float loss_scale, compute::StepResult*)> compute;
  const std::function<bool()>* cancelled = nullptr;  // may hold an empty function
  double straggler_factor = 1.0;                     // ReplicaTrainer::set_straggler_factor
  // The step's packed examples, which `compute` reads: `examples` of
  // `per_example` values. An exchange of row-sparse tables rewrites their
  // ids as local rows (row_tables.h) before the passes.
  std::vector<float>* inputs = nullptr;
  int64_t examples = 0, per_example = 0;
};

// What the step computed and the servers answered.
struct ExchangeResult {
  compute::StepResult result;  // the passes' loss, correct and examples
  int64_t version = 0;         // of the parameters now held (shard 0's)
  bool dropped = false;        // a backup's gradient that came after the step's first R
};

// What the exchanges work on; not owned.
struct ExchangeContext {
  const proto::JobSpec* job = nullptr;
  int worker_index = 0;
  compute::Model* model = nullptr;
  MirroredReplicas* replicas = nullptr;
  ps_client::ParameterClient* client = nullptr;
  const ps_client::ShardedParameters* sharded = nullptr;
  WorkerParameters* params = nullptr;
  TopKCompressor* topk = nullptr;          // --topk_ratio; null without
  ps_client::RowTables* tables = nullptr;  // tables trained row by row; null: none
  base::Clock* clock = nullptr;
  std::vector<int> ready_order;  // variables in the order the backward pass makes them
  std::vector<bool> trainable;   // Model::trainable_variables(), for global_clipnorm
};

// Thread-compatible: one unit at a time.
class StepExchange {
 public:
  virtual ~StepExchange() = default;

  // Before a unit's first step: joins what the unit needs (a group), and
  // holds the parameters of unit.first_step() (a pull, unless the last unit
  // ended there in sync). Adds its time to `times`.
  // By default (the ps tasks') a pull, its time comm.
  virtual absl::Status BeginUnit(const proto::RunUnitRequest& unit,
                                 const std::function<bool()>& cancelled, ExchangeTimes* times);

  // One step: the passes, the gradients sent, and the parameters of the
  // step after held. A non-finite step is the job error naming the worker
  // (divergence.h) unless the job skips them.
  virtual absl::StatusOr<ExchangeResult> Step(const ExchangeStep& step, ExchangeTimes* times) = 0;

  // The unit ended after its steps (`end`), or failed midway (what it holds
  // is then of unknown state: the next unit pulls everything again).
  virtual void EndUnit(int64_t end) { params().Ended(end); }
  virtual void FailUnit() { params().Failed(); }

 protected:
  explicit StepExchange(ExchangeContext context) : ctx_(std::move(context)) {}
  WorkerParameters& params() { return *ctx_.params; }
  // Keras's global_clipnorm over the whole gradient the worker sends.
  void Clip();

  ExchangeContext ctx_;
};

// The step a worker goes on at after `step`: the next, or under backup
// workers the servers' `version` when it is further (a late worker skips
// the steps completed without it), and no further than the unit's `end`.
int64_t NextStep(int64_t step, int64_t version, int64_t end, bool backups);

// Waits `idle` on `clock`; CANCELLED as soon as `cancelled` says so.
absl::Status IdleFor(base::Clock* clock, absl::Duration idle,
                     const std::function<bool()>& cancelled);

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_STEP_EXCHANGE_H_
