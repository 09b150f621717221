// The parameters the chief evaluates with, and the digest of the final
// variables. Without embedding tables pulled by rows, every variable is
// pulled whole. With them (issue 38), the dense variables are pulled once
// per evaluation and each batch's rows of the tables before the batch runs,
// on a local model whose tables hold one batch's rows
// (ps_client::RowTables); the digest reads the tables in chunks. The chief
// holds no whole table for either.
//
// Thread-compatible.
#ifndef PSC_CHIEF_EVALUATION_PARAMETERS_H_
#define PSC_CHIEF_EVALUATION_PARAMETERS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/compute/backend.h"
#include "common/compute/model.h"
#include "common/data/dataset.h"
#include "common/job/evaluation.h"
#include "common/ps_client/parameter_client.h"
#include "common/ps_client/row_tables.h"
#include "common/ps_client/sharded_parameters.h"
#include "proto/job.pb.h"

namespace psc {
namespace chief {

class EvaluationParameters {
 public:
  // Evaluations run `batch` examples at a time. Not owned: all must outlive
  // this.
  static absl::StatusOr<std::unique_ptr<EvaluationParameters>> Create(
      const proto::JobSpec* job, const compute::Model* model, compute::ComputeBackend* backend,
      ps_client::ParameterClient* servers, const ps_client::ShardedParameters* sharded,
      int64_t batch);

  // Whether tables are pulled by rows (then whole parameters are never
  // assembled here but for an export).
  bool by_rows() const { return tables_ != nullptr; }

  // `split` evaluated with the servers' variables now.
  absl::StatusOr<job::SplitMetrics> Evaluate(const data::Split& split, absl::Duration timeout);
  // `split` evaluated with `params` (every variable, whole: the best
  // epoch's weights, which only a job without row tables keeps).
  absl::StatusOr<job::SplitMetrics> EvaluateWith(const std::vector<std::vector<float>>& params,
                                                 const data::Split& split);

  // job::VariablesSha256 of the servers' variables now: the tables read
  // from their shards in chunks of at most `chunk_bytes` (at least a row).
  absl::StatusOr<std::string> Sha256(absl::Duration timeout, int64_t chunk_bytes = 64 << 20);

 private:
  EvaluationParameters() = default;
  // The dense variables into values_ (every variable without row tables).
  absl::Status PullDense(absl::Duration timeout);
  // The batch's ids as local rows, and their rows into values_.
  absl::Status PullBatchRows(std::vector<float>* inputs, int64_t n, int64_t per_example,
                             absl::Duration timeout);

  const proto::JobSpec* job_ = nullptr;
  const compute::Model* model_ = nullptr;
  ps_client::ParameterClient* servers_ = nullptr;
  const ps_client::ShardedParameters* sharded_ = nullptr;
  int64_t batch_ = 0;
  std::unique_ptr<ps_client::RowTables> tables_;  // null: no row tables
  std::unique_ptr<compute::Model> local_;         // with tables: one batch's rows each
  std::unique_ptr<compute::Executor> executor_;
  std::vector<std::vector<float>> values_;  // the executor's, local shapes
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_EVALUATION_PARAMETERS_H_
