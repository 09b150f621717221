// Shard::SaveCheckpoint and Shard::RestoreCheckpoint, Shard::ExportState and
// Shard::ImportState: the shard's state to and from a proto::ShardCheckpoint,
// stored by common/checkpoint/checkpoint_files.h or carried in an RPC. Both
// pairs share the snapshot (TakeSnapshot) and the verified swap-in (SwapIn).
#include "ps_server/shard_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/checkpoint/checkpoint_files.h"
#include "common/tensor/topk.h"
#include "google/protobuf/util/message_differencer.h"
#include "ps_server/shard.h"

namespace psc {
namespace ps_server {

absl::StatusOr<VerifiedCheckpoint> VerifyShardCheckpoint(absl::string_view data,
                                                         const CheckpointExpectation& expect) {
  const std::string& where = expect.where;
  VerifiedCheckpoint out;
  proto::ShardCheckpoint& ckpt = out.header;
  if (!ckpt.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    return absl::DataLossError(absl::StrCat(where, ": cannot parse the checkpoint data"));
  }
  if (ckpt.format() != 1 || ckpt.shard_index() != expect.shard ||
      ckpt.num_shards() != expect.num_shards || ckpt.step() != expect.step || ckpt.version() < 0 ||
      ckpt.updates() < 0 || ckpt.version() > kMaxCount || ckpt.updates() > kMaxCount) {
    return absl::DataLossError(absl::StrCat(where, ": header does not match its file"));
  }
  if (ckpt.row_sparse_left_out()) {
    return absl::DataLossError(absl::StrCat(
        where, ": an export's state without its row-sparse variables, not a checkpoint"));
  }
  if (ckpt.optimizer().kind() != expect.optimizer.kind()) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": written with optimizer ",
                     proto::OptimizerConfig::Kind_Name(ckpt.optimizer().kind()), "; this job uses ",
                     proto::OptimizerConfig::Kind_Name(expect.optimizer.kind())));
  }
  PSC_ASSIGN_OR_RETURN(out.store, VariableStore::Restore(ckpt, expect.optimizer, where));
  absl::StatusOr<PushLedger> ledger = PushLedger::Restore(ckpt);
  if (!ledger.ok()) {
    return absl::DataLossError(absl::StrCat(where, ": ", ledger.status().message()));
  }
  out.ledger = *std::move(ledger);
  if (absl::Status s = tensor::CheckErrorFeedback(ckpt.worker_state(), where); !s.ok()) {
    return absl::DataLossError(s.message());
  }
  out.clocks.assign(expect.num_workers, 0);
  for (const auto& c : ckpt.clocks()) {
    // A job restarted with fewer workers restores the clocks it still has;
    // a negative worker or clock is not something a shard writes.
    if (c.worker() < 0 || c.clock() < 0 || c.clock() > kMaxCount) {
      return absl::DataLossError(
          absl::StrCat(where, ": clock ", c.clock(), " of worker ", c.worker(), " out of range"));
    }
    if (c.worker() < expect.num_workers) out.clocks[c.worker()] = c.clock();
  }
  // The variables are now in the store; the header keeps the rest.
  ckpt.clear_variables();
  return out;
}

absl::StatusOr<Shard::Snapshot> Shard::TakeSnapshot(int64_t step, const proto::Placement& placement,
                                                    const proto::ErrorFeedbackState& worker_state,
                                                    bool skip_row_sparse) {
  proto::ShardCheckpoint ckpt;
  Snapshot snapshot;
  {
    // Exclusive: no apply is half done while the snapshot is taken.
    absl::WriterMutexLock values_lock(&values_mu_);
    if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
    snapshot.shard = config_.shard_index();
    snapshot.num_shards = config_.num_shards();
    absl::MutexLock lock(&mu_);
    ckpt.set_format(1);
    ckpt.set_shard_index(snapshot.shard);
    ckpt.set_num_shards(snapshot.num_shards);
    ckpt.set_step(step);
    ckpt.set_version(version_);
    ckpt.set_updates(updates_);
    *ckpt.mutable_optimizer() = config_.optimizer();
    ckpt.set_learning_rate(learning_rate_);
    store_.Save(&ckpt, skip_row_sparse);
    ckpt.set_row_sparse_left_out(skip_row_sparse);
    ledger_.Save(&ckpt);
    for (size_t w = 0; w < clocks_.clocks().size(); ++w) {
      proto::ShardCheckpoint::WorkerClock* c = ckpt.add_clocks();
      c->set_worker(static_cast<int32_t>(w));
      c->set_clock(clocks_.clocks()[w]);
    }
    *ckpt.mutable_placement() = placement;
    *ckpt.mutable_worker_state() = worker_state;
    if (loss_scale_) *ckpt.mutable_loss_scale() = loss_scale_->State();
    snapshot.version = version_;
  }
  if (!ckpt.SerializeToString(&snapshot.data)) {
    return absl::InternalError("cannot serialize the checkpoint (over 2 GiB?)");
  }
  return snapshot;
}

absl::StatusOr<proto::ConfigureRequest> Shard::Configuration() const {
  absl::ReaderMutexLock values_lock(&values_mu_);
  if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
  return config_;
}

absl::StatusOr<proto::ShardCheckpoint> Shard::SwapIn(const proto::ConfigureRequest& config,
                                                     absl::string_view data, int64_t step,
                                                     std::string where) {
  // Verify everything before touching the live state.
  CheckpointExpectation expect;
  expect.where = std::move(where);
  expect.step = step;
  expect.shard = config.shard_index();
  expect.num_shards = config.num_shards();
  expect.num_workers = config.num_workers();
  expect.optimizer = config.optimizer();
  PSC_ASSIGN_OR_RETURN(VerifiedCheckpoint verified, VerifyShardCheckpoint(data, expect));
  // The loss scale goes on from the checkpoint's (one written without it
  // starts from the policy's initial scale).
  std::optional<optimizer::LossScale> loss_scale;
  if (config.policy().has_loss_scale()) {
    loss_scale.emplace(config.policy().loss_scale());
    if (verified.header.has_loss_scale()) {
      PSC_RETURN_IF_ERROR(loss_scale->Restore(verified.header.loss_scale(), expect.where.c_str()));
    }
  }

  // Swap it all in at once.
  std::vector<Waiter> ready;
  {
    absl::WriterMutexLock values_lock(&values_mu_);
    if (!google::protobuf::util::MessageDifferencer::Equals(config_, config)) {
      return absl::AbortedError("the shard was configured again during the restore; retry it");
    }
    GradientRules rules = store_.gradient_rules();
    store_ = std::move(verified.store);
    store_.set_gradient_rules(std::move(rules));  // job configuration, not checkpointed
    const double lr = verified.header.learning_rate();
    SetLearningRate(std::isfinite(lr) && lr > 0 ? lr : 0);
    absl::MutexLock lock(&mu_);
    stats_.set_gradients_discarded(stats_.gradients_discarded() +
                                   accumulator_.Restart(verified.header.version()));
    refusals_.Clear();
    stats_.set_gradients_pending(0);
    stats_.set_push_parts_abandoned(stats_.push_parts_abandoned() + assembler_.Clear());
    version_ = verified.header.version();
    updates_ = verified.header.updates();
    ledger_ = std::move(verified.ledger);
    clocks_.set_clocks(std::move(verified.clocks));
    loss_scale_ = std::move(loss_scale);
    ++restore_epoch_;
    TakeReadyWaiters(&ready);
  }
  ServeWaiters(std::move(ready));
  return std::move(verified.header);
}

absl::Status Shard::SaveCheckpoint(const proto::SaveCheckpointRequest& request,
                                   proto::SaveCheckpointResponse* response) {
  if (request.directory().empty()) return absl::InvalidArgumentError("empty checkpoint directory");
  if (request.step() < 0) return absl::InvalidArgumentError("checkpoint step must not be negative");
  PSC_RETURN_IF_ERROR(tensor::CheckErrorFeedback(request.worker_state(), "worker_state"));
  PSC_ASSIGN_OR_RETURN(const Snapshot snapshot,
                       TakeSnapshot(request.step(), request.placement(), request.worker_state()));
  response->set_version(snapshot.version);
  PSC_ASSIGN_OR_RETURN(
      const std::vector<std::string> files,
      checkpoint::WriteShardCheckpoint(request.directory(), request.step(), snapshot.shard,
                                       snapshot.num_shards, snapshot.data, options_.fs));
  for (const std::string& f : files) response->add_files(f);
  return checkpoint::PruneShardCheckpoints(request.directory(), snapshot.shard, snapshot.num_shards,
                                           std::max(1, options_.keep_checkpoints), options_.fs);
}

absl::Status Shard::RestoreCheckpoint(const proto::RestoreCheckpointRequest& request,
                                      proto::RestoreCheckpointResponse* response) {
  if (request.directory().empty()) return absl::InvalidArgumentError("empty checkpoint directory");
  if (request.step() < -1) {
    return absl::InvalidArgumentError("checkpoint step must be -1 (latest) or a step >= 0");
  }
  PSC_ASSIGN_OR_RETURN(const proto::ConfigureRequest config, Configuration());
  const int shard = config.shard_index(), num_shards = config.num_shards();
  PSC_ASSIGN_OR_RETURN(checkpoint::ShardCheckpointData file,
                       checkpoint::ReadShardCheckpoint(request.directory(), request.step(), shard,
                                                       num_shards, options_.fs));
  PSC_ASSIGN_OR_RETURN(
      const proto::ShardCheckpoint header,
      SwapIn(config, file.data, file.step,
             absl::StrCat(checkpoint::CheckpointDir(request.directory(), file.step), " shard ",
                          shard, " of ", num_shards)));
  response->set_step(file.step);
  response->set_version(header.version());
  *response->mutable_placement() = header.placement();
  *response->mutable_worker_state() = header.worker_state();
  return absl::OkStatus();
}

absl::Status Shard::ExportState(const proto::ExportStateRequest& request,
                                proto::ExportStateResponse* response) {
  if (request.step() < 0) return absl::InvalidArgumentError("state step must not be negative");
  PSC_ASSIGN_OR_RETURN(Snapshot snapshot, TakeSnapshot(request.step(), request.placement(), {},
                                                       request.skip_row_sparse()));
  response->set_state(std::move(snapshot.data));
  response->set_version(snapshot.version);
  return absl::OkStatus();
}

absl::Status Shard::ImportState(const proto::ImportStateRequest& request,
                                proto::ImportStateResponse* response) {
  if (request.step() < 0) return absl::InvalidArgumentError("state step must not be negative");
  PSC_ASSIGN_OR_RETURN(const proto::ConfigureRequest config, Configuration());
  PSC_ASSIGN_OR_RETURN(const proto::ShardCheckpoint header,
                       SwapIn(config, request.state(), request.step(),
                              absl::StrCat("imported state of step ", request.step(), " for shard ",
                                           config.shard_index(), " of ", config.num_shards())));
  response->set_version(header.version());
  response->set_step(request.step());
  return absl::OkStatus();
}

}  // namespace ps_server
}  // namespace psc
