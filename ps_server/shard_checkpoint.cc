// Shard::SaveCheckpoint and Shard::RestoreCheckpoint: the shard's state to
// and from a proto::ShardCheckpoint, stored by common/checkpoint/checkpoint_files.h.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_files.h"
#include "common/tensor/tensor.h"
#include "ps_server/shard.h"

namespace psc {
namespace ps_server {

absl::Status Shard::SaveCheckpoint(const proto::SaveCheckpointRequest& request,
                                   proto::SaveCheckpointResponse* response) {
  if (request.directory().empty()) return absl::InvalidArgumentError("empty checkpoint directory");
  if (request.step() < 0) return absl::InvalidArgumentError("checkpoint step must not be negative");
  proto::ShardCheckpoint ckpt;
  int shard, num_shards;
  {
    // Exclusive: no apply is half done while the snapshot is taken.
    absl::WriterMutexLock values_lock(&values_mu_);
    if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
    shard = config_.shard_index();
    num_shards = config_.num_shards();
    absl::MutexLock lock(&mu_);
    ckpt.set_format(1);
    ckpt.set_shard_index(shard);
    ckpt.set_num_shards(num_shards);
    ckpt.set_step(request.step());
    ckpt.set_version(version_);
    ckpt.set_updates(updates_);
    *ckpt.mutable_optimizer() = config_.optimizer();
    for (const auto& v : variables_) {
      proto::ShardCheckpoint::Variable* out = ckpt.add_variables();
      out->set_name(v->name);
      absl::MutexLock var_lock(&v->mu);
      tensor::SetFloatTensor(v->shape, v->values, out->mutable_value());
      for (const auto& slot : v->slots) tensor::SetFloatTensor(v->shape, slot, out->add_slots());
    }
    for (const PushKey& key : seen_) {
      proto::PushId* id = ckpt.add_seen_pushes();
      id->set_worker(std::get<0>(key));
      id->set_unit(std::get<1>(key));
      id->set_step(std::get<2>(key));
      id->set_replica_slot(std::get<3>(key));
    }
    for (size_t w = 0; w < clocks_.size(); ++w) {
      proto::ShardCheckpoint::WorkerClock* c = ckpt.add_clocks();
      c->set_worker(static_cast<int32_t>(w));
      c->set_clock(clocks_[w]);
    }
    *ckpt.mutable_placement() = request.placement();
    response->set_version(version_);
  }
  std::string data;
  if (!ckpt.SerializeToString(&data)) {
    return absl::InternalError("cannot serialize the checkpoint (over 2 GiB?)");
  }
  auto files = checkpoint::WriteShardCheckpoint(request.directory(), request.step(), shard,
                                                num_shards, data);
  if (!files.ok()) return files.status();
  for (const std::string& f : *files) response->add_files(f);
  return checkpoint::PruneShardCheckpoints(request.directory(), shard, num_shards,
                                           std::max(1, options_.keep_checkpoints));
}

absl::Status Shard::RestoreCheckpoint(const proto::RestoreCheckpointRequest& request,
                                      proto::RestoreCheckpointResponse* response) {
  if (request.directory().empty()) return absl::InvalidArgumentError("empty checkpoint directory");
  if (request.step() < -1) {
    return absl::InvalidArgumentError("checkpoint step must be -1 (latest) or a step >= 0");
  }
  int shard, num_shards, num_workers;
  proto::OptimizerConfig optimizer;
  {
    absl::ReaderMutexLock values_lock(&values_mu_);
    if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
    shard = config_.shard_index();
    num_shards = config_.num_shards();
    num_workers = config_.num_workers();
    optimizer = config_.optimizer();
  }
  // Read and verify everything before touching the live state.
  auto file =
      checkpoint::ReadShardCheckpoint(request.directory(), request.step(), shard, num_shards);
  if (!file.ok()) return file.status();
  const std::string where = absl::StrCat(checkpoint::CheckpointDir(request.directory(), file->step),
                                         " shard ", shard, " of ", num_shards);
  proto::ShardCheckpoint ckpt;
  if (!ckpt.ParseFromString(file->data)) {
    return absl::DataLossError(absl::StrCat(where, ": cannot parse the checkpoint data"));
  }
  if (ckpt.format() != 1 || ckpt.shard_index() != shard || ckpt.num_shards() != num_shards ||
      ckpt.step() != file->step || ckpt.version() < 0 || ckpt.updates() < 0) {
    return absl::DataLossError(absl::StrCat(where, ": header does not match its file"));
  }
  if (ckpt.optimizer().kind() != optimizer.kind()) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": written with optimizer ",
                     proto::OptimizerConfig::Kind_Name(ckpt.optimizer().kind()), "; this job uses ",
                     proto::OptimizerConfig::Kind_Name(optimizer.kind())));
  }
  const size_t num_slots = optimizer::Optimizer(optimizer).slot_names().size();
  std::vector<std::unique_ptr<Variable>> variables;
  absl::flat_hash_map<std::string, int> index;
  for (const proto::ShardCheckpoint::Variable& v : ckpt.variables()) {
    const std::string what = absl::StrCat(where, ": variable \"", v.name(), "\"");
    if (absl::Status s = tensor::ValidateFloatTensor(v.value(), what); !s.ok()) {
      return absl::DataLossError(s.message());
    }
    if (v.name().empty() || index.contains(v.name())) {
      return absl::DataLossError(absl::StrCat(what, ": empty or repeated name"));
    }
    if (static_cast<size_t>(v.slots_size()) != num_slots) {
      return absl::DataLossError(
          absl::StrCat(what, ": ", v.slots_size(), " slots, want ", num_slots));
    }
    std::vector<int64_t> shape(v.value().shape().begin(), v.value().shape().end());
    const int64_t n = tensor::NumElements(shape);
    auto var = std::make_unique<Variable>(v.name(), shape, n, static_cast<int>(num_slots));
    {
      absl::MutexLock lock(&var->mu);
      std::memcpy(var->values.data(), v.value().data().data(), n * sizeof(float));
      for (size_t k = 0; k < num_slots; ++k) {
        if (v.slots(k).data().size() != v.value().data().size()) {
          return absl::DataLossError(absl::StrCat(what, ": slot ", k, " has the wrong size"));
        }
        std::memcpy(var->slots[k].data(), v.slots(k).data().data(), n * sizeof(float));
      }
    }
    index[v.name()] = static_cast<int>(variables.size());
    variables.push_back(std::move(var));
  }
  absl::flat_hash_set<PushKey> seen;
  for (const proto::PushId& id : ckpt.seen_pushes()) seen.insert(KeyOf(id));
  std::vector<int64_t> clocks(num_workers, 0);
  for (const auto& c : ckpt.clocks()) {
    if (c.worker() >= 0 && c.worker() < num_workers) clocks[c.worker()] = c.clock();
  }

  // Swap it all in at once.
  std::vector<Waiter> ready;
  {
    absl::WriterMutexLock values_lock(&values_mu_);
    variables_ = std::move(variables);
    index_ = std::move(index);
    absl::MutexLock lock(&mu_);
    stats_.set_gradients_discarded(stats_.gradients_discarded() +
                                   static_cast<int64_t>(pending_.size()));
    pending_.clear();
    stats_.set_gradients_pending(0);
    version_ = ckpt.version();
    accum_step_ = ckpt.version();
    updates_ = ckpt.updates();
    seen_ = std::move(seen);
    clocks_ = std::move(clocks);
    ++restore_epoch_;
    TakeReadyWaiters(&ready);
    response->set_step(file->step);
    response->set_version(version_);
    *response->mutable_placement() = ckpt.placement();
  }
  ServeWaiters(std::move(ready));
  return absl::OkStatus();
}

}  // namespace ps_server
}  // namespace psc
