// The chief's calls that concern every parameter-server shard at once:
// configure them, initialize the variables from the seed or restore the
// latest checkpoint, checkpoint them all at one step, pull every variable,
// and close the last step.
#ifndef PSC_CHIEF_SHARD_CONTROL_H_
#define PSC_CHIEF_SHARD_CONTROL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/compute/model.h"
#include "common/ps_client/parameter_client.h"
#include "common/ps_client/sharded_parameters.h"
#include "proto/job.pb.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace chief {

// For each of placement.num_shards() shards, the moving averages its
// CreateVariablesRequest declares: every part (shard variable) of each model
// variable v whose moving_averages[v] is set, with that momentum.
// `moving_averages` is parallel to placement.variables() (model order, as
// compute::Model::moving_averages()); a missing entry is trainable.
std::vector<std::vector<proto::MovingAverage>> ShardMovingAverages(
    const proto::Placement& placement, const std::vector<std::optional<float>>& moving_averages);

// For each of placement.num_shards() shards, the gradient declarations its
// ConfigureRequest carries: every part of each variable whose gradient is
// not declared dense (VariablePlacement.gradient).
std::vector<std::vector<proto::GradientDeclaration>> ShardGradientDeclarations(
    const proto::Placement& placement);

// The model variables its servers make from the seed: the trainable
// embedding tables (a frozen one, a moving average of momentum 1 on the
// servers, travels with its values).
std::vector<bool> GeneratedTables(const compute::Model& model);

// For each of placement.num_shards() shards, the parts of GeneratedTables
// it makes itself from `seed` (CreateVariablesRequest.generated): the same
// rows Model::Initialize draws.
std::vector<std::vector<proto::GeneratedVariable>> ShardGeneratedTables(
    const proto::Placement& placement, const compute::Model& model, uint64_t seed);

// Thread-compatible.
class ShardControl {
 public:
  // Not owned; `job` carries its placement. `num_workers`: the seats (push
  // identities the shards accept); `initial_workers` (0: all) of them take
  // part from the start, the others are vacant until a worker joins.
  ShardControl(const proto::JobSpec* job, int num_workers, ps_client::ParameterClient* servers,
               const ps_client::ShardedParameters* sharded, const compute::Model* model,
               int initial_workers = 0)
      : job_(job),
        num_workers_(num_workers),
        initial_workers_(initial_workers > 0 ? initial_workers : num_workers),
        servers_(servers),
        sharded_(sharded),
        model_(model) {}

  // Configures every shard with the job's policy and optimizer: the seats'
  // live set is the initial workers, and sync aggregates R of them.
  absl::Status ConfigureAll();

  // The step to start from: the newest checkpoint under `checkpoint_dir`
  // that every shard has (restored on every shard; its placement must be
  // the job's), or 0 after creating the variables from the job's seed when
  // there is none (or no directory; each shard's request names its parts of
  // the model's moving averages, ShardMovingAverages). DATA_LOSS when some
  // shards have checkpoints and others none.
  absl::StatusOr<int64_t> InitializeOrRestore(const std::string& checkpoint_dir);

  // Restores every shard from the newest checkpoint under `checkpoint_dir`
  // that every shard has (a shard killed while the others saved a step
  // lacks that step); returns its step.
  absl::StatusOr<int64_t> RestoreLatest(const std::string& checkpoint_dir);

  // Every shard saves at `step`, recording the placement; shard 0 also
  // records `worker_state` (the workers' error feedback, --topk_ratio).
  absl::Status Checkpoint(const std::string& checkpoint_dir, int64_t step,
                          const proto::ErrorFeedbackState& worker_state = {});
  // The worker state shard 0 recorded with the checkpoint the last restore
  // (InitializeOrRestore, RestoreLatest) took; empty after creating the
  // variables.
  const proto::ErrorFeedbackState& restored_worker_state() const { return restored_worker_state_; }

  // Every variable, assembled in model order.
  absl::StatusOr<std::vector<std::vector<float>>> PullAll(absl::Duration timeout);

  // Drops a half-filled step on every shard (the job's end).
  absl::Status CloseOpenStep();

 private:
  // Given each shard's latest step (already restored), restores the shards
  // that are ahead to the oldest of them, the newest step all have.
  absl::StatusOr<int64_t> RestoreCommonStep(const std::string& checkpoint_dir,
                                            const std::vector<int64_t>& latest);

  const proto::JobSpec* const job_;
  const int num_workers_;
  const int initial_workers_;
  ps_client::ParameterClient* const servers_;
  const ps_client::ShardedParameters* const sharded_;
  const compute::Model* const model_;
  proto::ErrorFeedbackState restored_worker_state_;
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_SHARD_CONTROL_H_
