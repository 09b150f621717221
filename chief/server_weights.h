// The servers' variables and optimizer state as an export reads them
// (keras::WeightsSource): the variables whose gradient travels row-sparse
// (embedding tables trained by rows) are read a range of rows at a time,
// values and slots (chief/table_rows.h), when the writer asks; the rest
// are pulled, and their slots taken from every shard's ExportState (with
// the tables left out), when the source is made. The chief thus holds a
// chunk of a table, never a whole one.
//
// Thread-compatible.
#ifndef PSC_CHIEF_SERVER_WEIGHTS_H_
#define PSC_CHIEF_SERVER_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/compute/model.h"
#include "common/keras/weights_source.h"
#include "common/ps_client/parameter_client.h"
#include "common/ps_client/sharded_parameters.h"
#include "proto/job.pb.h"

namespace psc {
namespace chief {

class ServerWeights : public keras::WeightsSource {
 public:
  // The servers' state now. With `with_optimizer`, also the optimizer's
  // (optimizer_state(): the iteration count shard 0 applied,
  // `learning_rate`, the slots in Keras's order). Not owned: all must
  // outlive this. DATA_LOSS for a state that does not parse or whose
  // variables hold unequal numbers of slots; the servers' errors as they
  // are.
  static absl::StatusOr<std::unique_ptr<ServerWeights>> Create(
      const proto::JobSpec* job, const compute::Model* model, ps_client::ParameterClient* servers,
      const ps_client::ShardedParameters* sharded, bool with_optimizer, double learning_rate,
      absl::Duration timeout);

  // Whether variable `v` is read by rows from the servers.
  bool by_rows(int v) const { return by_rows_[v]; }
  const keras::OptimizerState& optimizer_state() const { return state_; }

  absl::Status Variable(int v, int64_t first, int64_t count, float* out) override;
  absl::Status Slot(int v, int slot, int64_t first, int64_t count, float* out) override;

 private:
  ServerWeights() = default;
  absl::Status TakeOptimizerState(double learning_rate);

  const proto::JobSpec* job_ = nullptr;
  const compute::Model* model_ = nullptr;
  ps_client::ParameterClient* servers_ = nullptr;
  const ps_client::ShardedParameters* sharded_ = nullptr;
  absl::Duration timeout_;
  std::vector<bool> by_rows_;
  std::vector<int> whole_;                              // the variables held here, ascending
  std::vector<std::vector<float>> values_;              // [v]; empty for by_rows
  std::vector<std::vector<std::vector<float>>> slots_;  // [v][slot]; empty for by_rows
  keras::OptimizerState state_;
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_SERVER_WEIGHTS_H_
