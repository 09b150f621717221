// A complete checkpoint read by ranges, never whole: every shard's data file
// open and verified (checkpoint::OpenShardCheckpoint: the index, the size,
// the crc32), its protobuf walked once to learn where each variable's value
// and optimizer slots lie in the file (the bytes of a tensor's data are
// skipped, not read), the shards' placement checked against the model. Then
// any rows of any variable, value or slot, are read from the files: an
// export writes a table a chunk at a time, and the evaluator reads the rows
// a batch touches.
//
// Thread-compatible; the files stay open (and so the checkpoint as
// verified, whatever prunes it later) until it is destroyed.
#ifndef PSC_EVALUATOR_CHECKPOINT_READER_H_
#define PSC_EVALUATOR_CHECKPOINT_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint_files.h"
#include "common/keras/weights_source.h"
#include "common/tensor/tensor.h"
#include "proto/checkpoint.pb.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace evaluator {

class CheckpointReader : public keras::WeightsSource {
 public:
  // Opens shards 0 .. num_shards - 1 of `checkpoint` under `root`, for a
  // model of `variables`. Errors as ReadCheckpointVariables
  // (checkpoint_evaluator.h) gives them, and DATA_LOSS for a data file over
  // 2 GiB (no shard writes one) or a tensor's data that is not float32
  // values of its shape.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(
      const std::string& root, const checkpoint::CompleteCheckpoint& checkpoint,
      const std::vector<tensor::VariableShape>& variables, io::FileSystem* fs = nullptr);

  const proto::Placement& placement() const { return placement_; }

  // Rows [first, first + count) of model variable `v` (`slot` 0: its
  // values; k: its optimizer slot k - 1) into `out`, from the shards that
  // hold them. INVALID_ARGUMENT for rows or a slot it does not have;
  // DATA_LOSS for a file that cannot be read.
  absl::Status Rows(int v, int slot, int64_t first, int64_t count, float* out) const;
  // The rows a pull asks shard `shard` for (PullRequest.rows, shard
  // variables' rows, slot 0), as the shard would answer them.
  absl::Status FillPull(int shard, const proto::PullRequest& request,
                        proto::PullResponse* response) const;

  absl::Status Variable(int v, int64_t first, int64_t count, float* out) override {
    return Rows(v, 0, first, count, out);
  }
  absl::Status Slot(int v, int slot, int64_t first, int64_t count, float* out) override {
    return Rows(v, slot + 1, first, count, out);
  }

 private:
  // Where one tensor's float32 values lie in its shard's data file.
  struct Extent {
    std::vector<int64_t> shape;
    uint64_t offset = 0;  // of its first value
  };
  struct ShardVariable {
    int shard = 0;
    std::vector<Extent> tensors;  // the value, then each slot
  };
  CheckpointReader() = default;
  // Rows of a shard variable: `ids` ascending, below its first axis.
  absl::Status ShardRows(const ShardVariable& sv, int slot, const std::vector<int64_t>& ids,
                         float* out) const;

  std::string dir_;
  std::vector<tensor::VariableShape> variables_;
  proto::Placement placement_;
  std::vector<checkpoint::OpenShardCheckpointData> files_;  // per shard
  absl::flat_hash_map<std::string, ShardVariable> shard_variables_;
};

}  // namespace evaluator
}  // namespace psc

#endif  // PSC_EVALUATOR_CHECKPOINT_READER_H_
