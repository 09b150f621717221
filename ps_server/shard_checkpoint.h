// A shard's checkpoint bytes, verified: what Shard::RestoreCheckpoint and
// Shard::ImportState swap in, and what the fuzz target
// tests/fuzz/checkpoint_fuzz.cc drives. A
// checkpoint is held to exactly the validation of the RPCs that create
// state (variable names, overflow-checked shapes, finite values, moving
// averages' momenta, id bounds), plus its own consistency (header, slots,
// ledger, clocks). A variable's rule (trainable, or a moving average and its
// momentum) is restored with it; a checkpoint from before moving averages
// restores every variable as trainable.
#ifndef PSC_PS_SERVER_SHARD_CHECKPOINT_H_
#define PSC_PS_SERVER_SHARD_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/checkpoint.pb.h"
#include "ps_server/push_ledger.h"
#include "ps_server/variable_store.h"

namespace psc {
namespace ps_server {

// What the restoring (or importing) shard expects of the checkpoint.
struct CheckpointExpectation {
  // For messages: "<dir>/ckpt-<step> shard <i> of <n>" (an imported state:
  // "imported state of step <step> for shard <i> of <n>").
  std::string where;
  int64_t step = 0;
  int shard = 0;
  int num_shards = 1;
  int num_workers = 1;
  proto::OptimizerConfig optimizer;  // completed (Keras defaults filled in)
};

struct VerifiedCheckpoint {
  VariableStore store;
  PushLedger ledger;
  std::vector<int64_t> clocks;    // one per worker of the job
  proto::ShardCheckpoint header;  // version, updates, placement (no variables)
};

// DATA_LOSS naming expect.where for anything that does not parse, does not
// match its file, or would not pass CreateVariables; FAILED_PRECONDITION for
// a checkpoint of another optimizer.
absl::StatusOr<VerifiedCheckpoint> VerifyShardCheckpoint(absl::string_view data,
                                                         const CheckpointExpectation& expect);

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_SHARD_CHECKPOINT_H_
