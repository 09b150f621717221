// Test helper: checkpoints of a model's variables written the way the
// parameter servers write them (one proto::ShardCheckpoint per shard, stored
// by common/checkpoint/checkpoint_files.h), so the evaluator's tests read real files.
#ifndef PSC_EVALUATOR_TEST_CHECKPOINTS_H_
#define PSC_EVALUATOR_TEST_CHECKPOINTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/placement/placement.h"
#include "proto/checkpoint.pb.h"
#include "proto/job.pb.h"

namespace psc {
namespace evaluator {
namespace testing {

// Deterministic values for `variables`, every element (biases included)
// distinct from its neighbours and non-zero, depending on `seed`.
std::vector<std::vector<float>> TestValues(const std::vector<tensor::VariableShape>& variables,
                                           uint64_t seed);

// The shards' checkpoints of `values` (full variables in model order) under
// `placement` at `step`: format 1, SGD, the placement recorded in each.
absl::StatusOr<std::vector<proto::ShardCheckpoint>> MakeShardCheckpoints(
    const proto::Placement& placement, const std::vector<tensor::VariableShape>& variables,
    const std::vector<std::vector<float>>& values, int64_t step);

// Serializes and writes shard i of `shards` as shard i of shards.size() at
// `step` (WriteShardCheckpoint).
absl::Status WriteShards(const std::string& root, int64_t step,
                         const std::vector<proto::ShardCheckpoint>& shards);

// MakeShardCheckpoints + WriteShards.
absl::Status WriteCheckpoint(const std::string& root, int64_t step,
                             const proto::Placement& placement,
                             const std::vector<tensor::VariableShape>& variables,
                             const std::vector<std::vector<float>>& values);

// A fresh, empty directory for the current test.
std::string TestDir();

}  // namespace testing
}  // namespace evaluator
}  // namespace psc

#endif  // PSC_EVALUATOR_TEST_CHECKPOINTS_H_
