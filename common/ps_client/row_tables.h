// The embedding tables a worker trains row by row (their gradient declared
// GRADIENT_ROW_SPARSE; issue 38): no worker holds a whole table. Each step
// the ids of the batch's inputs that tables read are deduplicated per input
// (ascending) and rewritten as local rows (an id's place among them), the
// tables' rows for those ids are pulled from the servers that own them
// (PullRequest.rows), and the worker computes with local tables of
// `capacity` rows (the most ids a step can hold: LocalModel); the local
// gradient's first rows, back under their ids, go to their owners as
// row-sparse tensors, each part's rows counted from its first.
//
// Thread-compatible: one step at a time.
#ifndef PSC_COMMON_PS_CLIENT_ROW_TABLES_H_
#define PSC_COMMON_PS_CLIENT_ROW_TABLES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compute/model.h"
#include "proto/job.pb.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace ps_client {

class RowTables {
 public:
  // The tables of `model` (global shapes) that `placement` declares
  // row-sparse, for steps of at most `examples` examples. Null when there is
  // none. FAILED_PRECONDITION when an input of ids is read by a row-sparse
  // table and by another (frozen) one.
  static absl::StatusOr<std::unique_ptr<RowTables>> Create(const compute::Model& model,
                                                           const proto::Placement& placement,
                                                           int64_t examples);

  // `model` with each row-sparse table `capacity` rows long.
  absl::StatusOr<compute::Model> LocalModel(const compute::Model& model) const;
  // The model variables that are not row-sparse tables, ascending.
  const std::vector<int>& dense_variables() const { return dense_; }
  bool is_table(int v) const { return table_of_[v] >= 0; }

  // A step's `n` packed examples (`inputs`, of `per_example` values each):
  // its ids rewritten as local rows. INVALID_ARGUMENT for an id that is not
  // a whole number below its table's rows (the data check refuses them
  // before).
  absl::Status Remap(std::vector<float>* inputs, int64_t n, int64_t per_example);
  // The row selections of the step's rows, per shard, added to `requests`.
  void AddRowPulls(std::vector<proto::PullRequest>* requests) const;
  // The pulled rows into each table's local values (`values[v]`, resized to
  // capacity x width; rows past the step's zero). INVALID_ARGUMENT for rows
  // that are not the ones asked.
  absl::Status TakeRows(const std::vector<proto::PullResponse>& responses,
                        std::vector<std::vector<float>>* values) const;
  // The step's rows of each table's local gradient (`grads[v]`) as
  // row-sparse tensors, appended to the shards' gradients `split` in
  // `wire`. EncodeFloats's errors.
  absl::Status EncodeGradients(const std::vector<std::vector<float>>& grads, proto::DataType wire,
                               std::vector<std::vector<proto::NamedTensor>>* split) const;

  // The step's distinct ids of table `t` (for tests and logs).
  int num_tables() const { return static_cast<int>(tables_.size()); }
  const std::vector<int64_t>& step_ids(int t) const { return inputs_[tables_[t].input].ids; }

 private:
  struct Input {
    int64_t offset = 0, count = 0;  // its values in a packed example
    int64_t limit = 0;              // the rows of the smallest table reading it
    std::vector<int64_t> ids;       // the step's distinct ids, ascending
  };
  struct Part {
    int shard = 0;
    std::string name;  // the shard variable
    int64_t first = 0, rows = 0;
  };
  struct Table {
    int variable = 0;
    int input = 0;
    int64_t rows = 0, width = 0, capacity = 0;
    std::vector<int64_t> shape;
    std::string layer;
    std::vector<Part> parts;
  };
  RowTables() = default;

  std::vector<Input> inputs_;
  std::vector<Table> tables_;
  std::vector<int> table_of_;  // per model variable: its table, or -1
  std::vector<int> dense_;
  int num_shards_ = 0;
};

}  // namespace ps_client
}  // namespace psc

#endif  // PSC_COMMON_PS_CLIENT_ROW_TABLES_H_
