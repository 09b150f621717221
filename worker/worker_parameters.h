// The variables as a worker holds them between steps: the values pulled
// from the servers (or from the worker's embedded replica), the version of
// each shard's, and the buffers of the step's gradients. Shared by the step
// exchanges (step_exchange.h), which pull into it, push from it and take
// the parameters of the next step from the push's reply.
//
// Frozen variables never change: once a pull has brought them, later pulls
// and push replies leave them out (skip_frozen) until a unit fails.
#ifndef PSC_WORKER_WORKER_PARAMETERS_H_
#define PSC_WORKER_WORKER_PARAMETERS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/ps_client/parameter_client.h"
#include "common/ps_client/sharded_parameters.h"
#include "proto/job.pb.h"
#include "proto/parameter_server.pb.h"
#include "proto/worker.pb.h"

namespace psc {
namespace ps_client {
class RowTables;  // common/ps_client/row_tables.h
}  // namespace ps_client
namespace worker {

// Thread-compatible.
class WorkerParameters {
 public:
  // How long a step may wait on the servers (a sync step waits for the
  // slowest replica).
  static constexpr absl::Duration kStepTimeout = absl::Minutes(10);

  // `embedded`: the client is the worker's own replica (multi_worker_mirrored),
  // which is checked rather than waited for, and takes every push as
  // worker 0's. Not owned.
  WorkerParameters(const proto::JobSpec* job, int worker_index, ps_client::ParameterClient* client,
                   const ps_client::ShardedParameters* sharded, bool embedded);

  // Fetches the parameters of `step`, the first of a unit: in sync exactly
  // that version (from the servers; an embedded replica answers what it
  // holds); in ssp the worker runs at `step` from now.
  absl::Status Pull(int64_t step);
  // Whether a unit starting at `first_step` may use the parameters the last
  // unit ended with (sync, a unit that ended cleanly there, not embedded).
  // Either way they count as spent until EndUnit.
  bool Reuse(int64_t first_step);
  // A unit ended cleanly at `end`, or failed midway.
  void Ended(int64_t end);
  void Failed();

  // Shard `shard`'s push of `step` without its gradients: the id, the
  // version computed on, the clock and the pull after it in `wire`.
  void PushHeader(const proto::RunUnitRequest& unit, int64_t step, int identity,
                  proto::DataType wire, int shard, proto::PushRequest* p) const;
  // The parameters and versions from the replies to a step's pushes.
  absl::Status TakeReplies(const std::vector<proto::PushResponse>& replies);

  // OK when the step's loss and gradients are finite, or the job skips
  // non-finite steps; else the job error naming the worker (`identity`),
  // the step and the variable, with the push's outcome `pushed`. Under loss
  // scaling only the loss counts: an overflowed gradient is a skipped step
  // (UnscaleGradients), not a divergence.
  absl::Status CheckFinite(double loss_sum, int identity, int64_t step,
                           const absl::Status& pushed) const;
  // The report of what is not finite (empty: all finite), as the pushes'
  // step_refused carries it, unless the job skips non-finite steps.
  std::string RefusalReport(double loss_sum) const;

  // Loss scaling (UpdatePolicy.loss_scale): the scale the next step
  // multiplies its loss by, shard 0's as of the parameters held (its pulls
  // and push replies carry it); 1 without loss scaling.
  float loss_scale() const { return loss_scale_; }
  // Divides the step's gradients by loss_scale() and says whether they
  // overflowed (then zeroes them: optimizer::UnscaleGradients), the
  // trainable ones only (`trainable`: Model::trainable_variables()). False
  // without loss scaling. An overflow at the smallest scale
  // (optimizer::kMinLossScale) is the job error naming the worker
  // (`identity`) and `step`: no scale makes those gradients finite.
  absl::StatusOr<bool> UnscaleGradients(const std::vector<bool>& trainable, int identity,
                                        int64_t step);

  std::vector<std::vector<float>>& values() { return values_; }
  std::vector<std::vector<float>>& grads() { return grads_; }
  const std::vector<std::vector<float>>& grads() const { return grads_; }
  int64_t version(int shard) const { return versions_[shard]; }
  void set_version(int shard, int64_t version) { versions_[shard] = version; }
  bool frozen_held() const { return frozen_held_; }
  // The tables trained row by row (not owned; null: none): pulls and push
  // replies leave them out, and only the other variables are assembled
  // (their entries of values() are the exchange's to fill each step).
  void set_row_tables(const ps_client::RowTables* tables) { tables_ = tables; }
  // Sizes the gradients' buffers as the variables (the exchanges that copy
  // one variable at a time need them sized before the first step).
  void SizeGradients();

 private:
  // A pull's or push reply's scale (shard 0's) as the next step's.
  void TakeLossScale(double scale);
  // The pulled pieces into values_ (the tables' entries left alone).
  absl::Status Assemble(
      const std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*>& parts);

  const proto::JobSpec* job_;
  const int worker_index_;
  ps_client::ParameterClient* const client_;
  const ps_client::ShardedParameters* const sharded_;
  const bool embedded_;
  const ps_client::RowTables* tables_ = nullptr;
  std::vector<std::vector<float>> values_;
  std::vector<std::vector<float>> grads_;
  std::vector<int64_t> versions_;  // per shard, of values_
  bool have_ = false;
  int64_t next_step_ = -1;  // the step values_ are for (sync), or -1
  float loss_scale_ = 1.0f;
  // values_ holds the frozen variables' values: set by a pull that brought
  // them; cleared when a unit fails, which may have left them half-written.
  bool frozen_held_ = false;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_WORKER_PARAMETERS_H_
