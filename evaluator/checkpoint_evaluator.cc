#include "evaluator/checkpoint_evaluator.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_backend.h"
#include "common/keras/keras_config.h"
#include "common/ps_client/sharded_parameters.h"
#include "common/tensor/tensor.h"
#include "google/protobuf/repeated_field.h"
#include "proto/checkpoint.pb.h"

namespace psc {
namespace evaluator {
namespace {

// "checkpoint <root>/ckpt-<step> shard <i> of <n>".
std::string ShardName(const std::string& root, const checkpoint::CompleteCheckpoint& checkpoint,
                      int shard) {
  return absl::StrCat("checkpoint ", checkpoint::CheckpointDir(root, checkpoint.step), " shard ",
                      shard, " of ", checkpoint.num_shards);
}

// Reads, parses and checks the header of one shard's checkpoint.
absl::StatusOr<proto::ShardCheckpoint> ReadShard(io::FileSystem* fs, const std::string& root,
                                                 const checkpoint::CompleteCheckpoint& checkpoint,
                                                 int shard) {
  PSC_ASSIGN_OR_RETURN(
      checkpoint::ShardCheckpointData file,
      checkpoint::ReadShardCheckpoint(root, checkpoint.step, shard, checkpoint.num_shards, fs));
  const std::string where = ShardName(root, checkpoint, shard);
  proto::ShardCheckpoint ckpt;
  if (!ckpt.ParseFromString(file.data)) {
    return absl::DataLossError(absl::StrCat(where, ": cannot parse the checkpoint data"));
  }
  if (ckpt.format() != 1 || ckpt.shard_index() != shard ||
      ckpt.num_shards() != checkpoint.num_shards || ckpt.step() != checkpoint.step) {
    return absl::DataLossError(absl::StrCat(where, ": header (format ", ckpt.format(), ", shard ",
                                            ckpt.shard_index(), " of ", ckpt.num_shards(),
                                            ", step ", ckpt.step(), ") does not match its file"));
  }
  return ckpt;
}

// Checks that `ckpt` holds exactly the shard variables `expected` (names and
// part shapes, in any order) as valid float tensors.
absl::Status CheckShardVariables(const proto::ShardCheckpoint& ckpt,
                                 const std::vector<tensor::VariableShape>& expected,
                                 const std::string& where) {
  if (ckpt.variables_size() != static_cast<int>(expected.size())) {
    return absl::DataLossError(absl::StrCat(where, ": holds ", ckpt.variables_size(),
                                            " variables; its placement puts ", expected.size(),
                                            " there"));
  }
  absl::flat_hash_map<std::string, const tensor::VariableShape*> by_name;
  for (const tensor::VariableShape& v : expected) by_name[v.name] = &v;
  for (const proto::ShardCheckpoint::Variable& v : ckpt.variables()) {
    const std::string what = absl::StrCat(where, ": variable \"", v.name(), "\"");
    auto it = by_name.find(v.name());
    if (it == by_name.end()) {
      return absl::DataLossError(absl::StrCat(what, " is not placed on this shard"));
    }
    if (absl::Status s = tensor::ValidateFloatTensor(v.value(), what); !s.ok()) {
      return absl::DataLossError(s.message());
    }
    const std::vector<int64_t>& shape = it->second->shape;
    if (!std::equal(v.value().shape().begin(), v.value().shape().end(), shape.begin(),
                    shape.end())) {
      return absl::DataLossError(absl::StrCat(what, " has shape ",
                                              tensor::ShapeString(v.value().shape()),
                                              "; its placement says ", tensor::ShapeString(shape)));
    }
    by_name.erase(it);  // a repeated name is then "not placed"
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::vector<float>>> ReadCheckpointVariables(
    const std::string& root, const checkpoint::CompleteCheckpoint& checkpoint,
    const std::vector<tensor::VariableShape>& variables, io::FileSystem* fs) {
  if (root.empty()) return absl::InvalidArgumentError("checkpoint root is empty");
  if (checkpoint.num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_shards must be >= 1, got ", checkpoint.num_shards));
  }
  const std::string dir = checkpoint::CheckpointDir(root, checkpoint.step);
  std::vector<proto::ShardCheckpoint> shards;
  shards.reserve(checkpoint.num_shards);
  for (int s = 0; s < checkpoint.num_shards; ++s) {
    PSC_ASSIGN_OR_RETURN(proto::ShardCheckpoint ckpt, ReadShard(fs, root, checkpoint, s));
    shards.push_back(std::move(ckpt));
  }

  // The placement: recorded by every shard, the same everywhere, for this
  // many shards, and placing exactly the model's variables.
  const proto::Placement& placement = shards[0].placement();
  if (placement.num_shards() == 0 && placement.variables_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", dir, " records no placement of the variables"));
  }
  for (int s = 1; s < checkpoint.num_shards; ++s) {
    if (absl::Status same = placement::CheckSamePlacement(shards[s].placement(), placement);
        !same.ok()) {
      return absl::DataLossError(
          absl::StrCat(ShardName(root, checkpoint, s),
                       " records another placement than shard 0: ", same.message()));
    }
  }
  if (placement.num_shards() != checkpoint.num_shards) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", dir, " has ", checkpoint.num_shards,
                     " shard files but records a placement on ", placement.num_shards()));
  }
  auto sharded = ps_client::ShardedParameters::Create(placement, variables);
  if (!sharded.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", dir, " does not fit the model: ", sharded.status().message()));
  }

  const std::vector<std::vector<tensor::VariableShape>> expected =
      placement::ShardVariables(placement);
  std::vector<google::protobuf::RepeatedPtrField<proto::NamedTensor>> tensors(
      checkpoint.num_shards);
  for (int s = 0; s < checkpoint.num_shards; ++s) {
    PSC_RETURN_IF_ERROR(
        CheckShardVariables(shards[s], expected[s], ShardName(root, checkpoint, s)));
    for (proto::ShardCheckpoint::Variable& v : *shards[s].mutable_variables()) {
      proto::NamedTensor* t = tensors[s].Add();
      t->set_name(v.name());
      t->mutable_tensor()->Swap(v.mutable_value());
    }
  }
  std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> per_shard;
  for (const auto& t : tensors) per_shard.push_back(&t);
  std::vector<std::vector<float>> full;
  if (absl::Status s = sharded->Assemble(per_shard, &full); !s.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint ", dir, ": ", s.message()));
  }
  return full;
}

absl::StatusOr<std::unique_ptr<CheckpointEvaluator>> CheckpointEvaluator::Create(
    const std::string& model_name, const data::Split* split, int threads, io::FileSystem* fs) {
  PSC_ASSIGN_OR_RETURN(compute::Model model, keras::BuiltinModel(model_name));
  return Create(std::move(model), split, threads, fs);
}

absl::StatusOr<std::unique_ptr<CheckpointEvaluator>> CheckpointEvaluator::Create(
    compute::Model model, const data::Split* split, int threads, io::FileSystem* fs) {
  compute::CpuBackendOptions cpu;
  cpu.threads = threads;
  return Create(std::move(model), split, cpu, fs);
}

absl::StatusOr<std::unique_ptr<CheckpointEvaluator>> CheckpointEvaluator::Create(
    compute::Model model, const data::Split* split, const compute::CpuBackendOptions& cpu,
    io::FileSystem* fs) {
  if (split == nullptr || split->count < 1) {
    return absl::InvalidArgumentError("the evaluation split is empty");
  }
  std::unique_ptr<CheckpointEvaluator> evaluator(
      new CheckpointEvaluator(std::move(model), split, fs != nullptr ? fs : io::LocalFileSystem()));
  PSC_ASSIGN_OR_RETURN(evaluator->backend_, compute::CreateCpuBackend(cpu));
  PSC_ASSIGN_OR_RETURN(evaluator->executor_,
                       compute::Executor::Create(&evaluator->model_, evaluator->backend_.get()));
  return evaluator;
}

absl::StatusOr<job::SplitMetrics> CheckpointEvaluator::Evaluate(
    const std::string& root, const checkpoint::CompleteCheckpoint& checkpoint) {
  PSC_ASSIGN_OR_RETURN(const std::vector<std::vector<float>> params,
                       ReadCheckpointVariables(root, checkpoint, model_.variables(), fs_));
  PSC_RETURN_IF_ERROR(executor_->SetParameters(params));
  return job::EvaluateSplit(executor_.get(), *split_, loss_, metrics_);
}

}  // namespace evaluator
}  // namespace psc
