#include "evaluator/checkpoint_evaluator.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_backend.h"
#include "common/keras/keras_config.h"
#include "common/ps_client/row_tables.h"
#include "common/tensor/tensor.h"
#include "evaluator/checkpoint_reader.h"
#include "google/protobuf/repeated_field.h"
#include "proto/checkpoint.pb.h"

namespace psc {
namespace evaluator {
absl::StatusOr<std::vector<std::vector<float>>> ReadCheckpointVariables(
    const std::string& root, const checkpoint::CompleteCheckpoint& checkpoint,
    const std::vector<tensor::VariableShape>& variables, io::FileSystem* fs) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                       CheckpointReader::Open(root, checkpoint, variables, fs));
  std::vector<std::vector<float>> full(variables.size());
  for (size_t v = 0; v < variables.size(); ++v) {
    const std::vector<int64_t>& shape = variables[v].shape;
    full[v].resize(static_cast<size_t>(compute::ShapeSize(shape)));
    PSC_RETURN_IF_ERROR(
        reader->Rows(static_cast<int>(v), 0, 0, shape.empty() ? 1 : shape[0], full[v].data()));
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
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                       CheckpointReader::Open(root, checkpoint, model_.variables(), fs_));
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<ps_client::RowTables> tables,
                       ps_client::RowTables::Create(model_, reader->placement(), kBatch));
  const std::vector<tensor::VariableShape>& variables = model_.variables();
  std::vector<std::vector<float>> values(variables.size());
  for (size_t v = 0; v < variables.size(); ++v) {
    if (tables != nullptr && tables->is_table(static_cast<int>(v))) continue;
    const std::vector<int64_t>& shape = variables[v].shape;
    values[v].resize(static_cast<size_t>(compute::ShapeSize(shape)));
    PSC_RETURN_IF_ERROR(
        reader->Rows(static_cast<int>(v), 0, 0, shape.empty() ? 1 : shape[0], values[v].data()));
  }
  if (tables == nullptr) {
    PSC_RETURN_IF_ERROR(executor_->SetParameters(values));
    return job::EvaluateSplit(executor_.get(), *split_, loss_, metrics_, kBatch);
  }
  // Tables trained by rows: a local model whose tables hold one batch's
  // rows, those rows read from the files before each batch (as the chief's
  // evaluation pulls them from the servers).
  PSC_ASSIGN_OR_RETURN(compute::Model local, tables->LocalModel(model_));
  if (local_ == nullptr || local_placement_ != reader->placement().SerializeAsString()) {
    // All three replaced together, or none: the executor runs its model.
    auto model = std::make_unique<compute::Model>(std::move(local));
    PSC_ASSIGN_OR_RETURN(std::unique_ptr<compute::Executor> executor,
                         compute::Executor::Create(model.get(), backend_.get()));
    local_executor_.reset();
    local_ = std::move(model);
    local_executor_ = std::move(executor);
    local_placement_ = reader->placement().SerializeAsString();
  }
  const int num_shards = reader->placement().num_shards();
  return job::EvaluateSplit(
      local_executor_.get(), *split_, loss_, metrics_, kBatch,
      [&](std::vector<float>* inputs, int64_t n, int64_t per_example) -> absl::Status {
        PSC_RETURN_IF_ERROR(tables->Remap(inputs, n, per_example));
        std::vector<proto::PullRequest> requests(num_shards);
        tables->AddRowPulls(&requests);
        std::vector<proto::PullResponse> responses(num_shards);
        for (int s = 0; s < num_shards; ++s) {
          PSC_RETURN_IF_ERROR(reader->FillPull(s, requests[s], &responses[s]));
        }
        PSC_RETURN_IF_ERROR(tables->TakeRows(responses, &values));
        return local_executor_->SetParameters(values);
      });
}

}  // namespace evaluator
}  // namespace psc
