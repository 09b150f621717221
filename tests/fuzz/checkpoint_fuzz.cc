// Checkpoint files as a restore reads them. The first byte picks the part:
// even, the .index JSON (checkpoint::ParseIndex); odd, the shard's data
// (ps_server::VerifyShardCheckpoint, which holds a checkpoint to what
// CreateVariables accepts). A checkpoint that verifies must restore into a
// shard and keep its accounting balanced.
#include <cstddef>
#include <cstdint>

#include "common/checkpoint/checkpoint_files.h"
#include "common/optimizer/optimizer.h"
#include "ps_server/shard_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psc;
  if (size < 1) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    (void)checkpoint::ParseIndex("fuzz/ckpt-3/shard-0-of-1.index", body, 3, 0, 1,
                                 "shard-0-of-1.data");
    return 0;
  }
  static const proto::OptimizerConfig* momentum = [] {
    proto::OptimizerConfig c;
    c.set_kind(proto::OptimizerConfig::MOMENTUM);
    return new proto::OptimizerConfig(*optimizer::CompleteOptimizerConfig(c));
  }();
  ps_server::CheckpointExpectation expect;
  expect.where = "fuzz";
  expect.step = 3;
  expect.num_workers = 2;
  expect.optimizer = *momentum;
  auto verified = ps_server::VerifyShardCheckpoint(body, expect);
  if (!verified.ok()) return 0;
  // What verified can be read back whole.
  proto::ShardCheckpoint again;
  verified->store.Save(&again);
  (void)verified->store.num_elements();
  return 0;
}
