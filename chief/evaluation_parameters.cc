#include "chief/evaluation_parameters.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "chief/table_rows.h"
#include "common/base/status_context.h"
#include "common/base/status_macros.h"
#include "common/job/job_loss.h"
#include "common/job/job_result.h"
#include "common/tensor/row_sparse.h"
#include "common/tensor/wire_dtype.h"

namespace psc {
namespace chief {

absl::StatusOr<std::unique_ptr<EvaluationParameters>> EvaluationParameters::Create(
    const proto::JobSpec* job, const compute::Model* model, compute::ComputeBackend* backend,
    ps_client::ParameterClient* servers, const ps_client::ShardedParameters* sharded,
    int64_t batch) {
  std::unique_ptr<EvaluationParameters> p(new EvaluationParameters());
  p->job_ = job;
  p->model_ = model;
  p->servers_ = servers;
  p->sharded_ = sharded;
  p->batch_ = batch;
  PSC_ASSIGN_OR_RETURN(p->tables_, ps_client::RowTables::Create(*model, job->placement(), batch));
  const compute::Model* runs = model;
  if (p->tables_ != nullptr) {
    PSC_ASSIGN_OR_RETURN(compute::Model local, p->tables_->LocalModel(*model));
    p->local_ = std::make_unique<compute::Model>(std::move(local));
    runs = p->local_.get();
    p->values_.resize(model->variables().size());
    for (int v : p->tables_->dense_variables()) {
      p->values_[v].resize(compute::ShapeSize(model->variables()[v].shape));
    }
  }
  PSC_ASSIGN_OR_RETURN(p->executor_, compute::Executor::Create(runs, backend));
  return p;
}

absl::Status EvaluationParameters::PullDense(absl::Duration timeout) {
  std::vector<proto::PullRequest> requests(servers_->num_shards());
  for (auto& r : requests) r.set_skip_row_sparse(by_rows());
  std::vector<proto::PullResponse> responses;
  PSC_RETURN_IF_ERROR(servers_->PullAll(requests, &responses, timeout));
  std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> parts;
  for (const auto& r : responses) parts.push_back(&r.variables());
  if (!by_rows()) return sharded_->Assemble(parts, &values_);
  return sharded_->AssembleVariables(parts, tables_->dense_variables(), &values_);
}

absl::Status EvaluationParameters::PullBatchRows(std::vector<float>* inputs, int64_t n,
                                                 int64_t per_example, absl::Duration timeout) {
  PSC_RETURN_IF_ERROR(tables_->Remap(inputs, n, per_example));
  std::vector<proto::PullRequest> requests(servers_->num_shards());
  tables_->AddRowPulls(&requests);
  // Every shard holding a part of a table is asked (for none of its rows,
  // maybe); a shard holding none is not: its empty request would pull every
  // variable it holds.
  std::vector<int> asked;
  for (int s = 0; s < servers_->num_shards(); ++s) {
    if (requests[s].rows_size() > 0) asked.push_back(s);
  }
  std::vector<proto::PullResponse> responses(servers_->num_shards());
  for (int s : asked) {
    PSC_RETURN_IF_ERROR(servers_->Pull(s, requests[s], &responses[s], timeout));
  }
  PSC_RETURN_IF_ERROR(tables_->TakeRows(responses, &values_));
  return executor_->SetParameters(values_);
}

absl::StatusOr<job::SplitMetrics> EvaluationParameters::Evaluate(const data::Split& split,
                                                                 absl::Duration timeout) {
  PSC_RETURN_IF_ERROR(PullDense(timeout));
  if (!by_rows()) {
    PSC_RETURN_IF_ERROR(executor_->SetParameters(values_));
    return job::EvaluateSplit(executor_.get(), split, job::JobLoss(*job_), job::MetricsOf(*job_),
                              batch_);
  }
  return job::EvaluateSplit(executor_.get(), split, job::JobLoss(*job_), job::MetricsOf(*job_),
                            batch_,
                            [&](std::vector<float>* inputs, int64_t n, int64_t per_example) {
                              return PullBatchRows(inputs, n, per_example, timeout);
                            });
}

absl::StatusOr<job::SplitMetrics> EvaluationParameters::EvaluateWith(
    const std::vector<std::vector<float>>& params, const data::Split& split) {
  if (by_rows()) {
    return absl::FailedPreconditionError("a job with row tables evaluates the servers' variables");
  }
  PSC_RETURN_IF_ERROR(executor_->SetParameters(params));
  return job::EvaluateSplit(executor_.get(), split, job::JobLoss(*job_), job::MetricsOf(*job_),
                            batch_);
}

absl::StatusOr<std::string> EvaluationParameters::Sha256(absl::Duration timeout,
                                                         int64_t chunk_bytes) {
  if (chunk_bytes < 1) return absl::InvalidArgumentError("chunk_bytes must be >= 1");
  PSC_RETURN_IF_ERROR(PullDense(timeout));
  const std::vector<tensor::VariableShape>& variables = model_->variables();
  std::vector<int> order(variables.size());
  for (size_t v = 0; v < order.size(); ++v) order[v] = static_cast<int>(v);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return variables[a].name < variables[b].name; });
  job::VariablesDigest digest;
  for (int v : order) {
    if (!by_rows() || !tables_->is_table(v)) {
      digest.Add(values_[v]);
      continue;
    }
    // The table read chunk by chunk, in row order.
    const proto::VariablePlacement& vp = job_->placement().variables(v);
    const compute::Shape& shape = variables[v].shape;
    const int64_t width = tensor::RowWidth(shape);
    const int64_t chunk_rows = std::max<int64_t>(
        1, chunk_bytes / (std::max<int64_t>(1, width) * static_cast<int64_t>(sizeof(float))));
    std::vector<float> rows;
    for (int64_t first = 0; first < shape[0]; first += chunk_rows) {
      const int64_t count = std::min(chunk_rows, shape[0] - first);
      rows.resize(static_cast<size_t>(count * width));
      PSC_RETURN_IF_ERROR(ReadTableRows(servers_, vp, 0, first, count, timeout, rows.data()));
      digest.Add(rows);
    }
  }
  return digest.Finish();
}

}  // namespace chief
}  // namespace psc
