// Placement of model variables on parameter-server shards.
//
// The chief places the model's float32 variables on P shards, balancing by bytes. A variable larger
// than PlacementOptions::min_shard_bytes is partitioned along its first axis over several shards,
// as TensorFlow's MinSizePartitioner does. The result is a deterministic function of the variables
// and the options and is recorded in every checkpoint, so that a restore can detect a different P.
//
// Also here: what each shard holds, and the row-major slicing between a full variable and its
// parts. All functions are pure and thread-safe.
#ifndef PSC_COMMON_PLACEMENT_PLACEMENT_H_
#define PSC_COMMON_PLACEMENT_PLACEMENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor/tensor.h"
#include "proto/job.pb.h"

namespace psc {
namespace placement {

struct PlacementOptions {
  int num_shards = 1;
  // A variable larger than this is split along its first axis (TF's MinSizePartitioner
  // min_slice_size).
  int64_t min_shard_bytes = 256 << 10;
};

// Places `variables` (in model order) on options.num_shards shards.
//
// Partitioning: for a variable of B bytes with first dimension d0 (rank >= 1), the number of parts
// is k = min(num_shards, d0, ceil(B / min_shard_bytes)), at least 1. With k > 1 its rows are split
// as evenly as possible, earlier parts getting the extra rows (10 rows over 3 parts -> 4, 3, 3),
// and the parts are named "<name>/part_<j>"; with k == 1 the single part keeps the variable's own
// name. A scalar is never split.
//
// Assignment: deterministic greedy by bytes. All parts are considered in order of decreasing bytes
// (ties: model order of the variable, then part index); each goes on the currently least-loaded
// shard (ties: lowest shard index), except that two parts of the same variable never share a shard
// (k <= num_shards makes that always possible).
//
// The returned Placement lists variables in the input (model) order and parts in part order, with
// first_axis_offset/first_axis_size filled (an unpartitioned variable: offset 0 and size d0, or 1
// for a scalar).
//
// INVALID_ARGUMENT, with a message naming the variable where there is one, for: num_shards < 1;
// min_shard_bytes < 1; an empty variable list; an empty or duplicate name; a name containing
// "/part_"; a dimension < 1; a variable (or all variables together) too large to count in int64
// bytes.
absl::StatusOr<proto::Placement> PlaceVariables(const std::vector<tensor::VariableShape>& variables,
                                                const PlacementOptions& options);

// OK if `saved` (read from a checkpoint) and `current` are identical: the same num_shards and the
// same variables in the same order, with the same shapes and the same parts (names, shards, rows).
// FAILED_PRECONDITION otherwise, with a message naming the first difference, e.g.
//   checkpoint placement has 2 shards; this cluster has 1
//   checkpoint has variable "dense/kernel" with shape [1152,128]; the model has [1152,64]
absl::Status CheckSamePlacement(const proto::Placement& saved, const proto::Placement& current);

// What each shard holds: result[s] lists the shard variables on shard s (part names, and part
// shapes: the full shape with the first dimension replaced by first_axis_size), in placement order
// (variable order, then part order). result has max(num_shards, 0) entries.
//
// Expects a placement made by PlaceVariables (or one that CheckSamePlacement matched against such
// a placement); a part whose shard is outside [0, num_shards) is left out.
std::vector<std::vector<tensor::VariableShape>> ShardVariables(const proto::Placement& placement);

// Bytes (float32) held by each shard, for logs and tests; same expectations and size as
// ShardVariables.
std::vector<int64_t> ShardBytes(const proto::Placement& placement);

// Declares how each variable's gradient travels (VariablePlacement.gradient):
// GRADIENT_ROW_SPARSE for the trainable embedding tables (`row_tables[v]`;
// empty: none), GRADIENT_TOP_K for the other trainable variables
// (moving_averages[v] unset) when topk_ratio > 0, else GRADIENT_DENSE.
// `moving_averages` (and `row_tables` when given) are parallel to
// placement->variables() (model order); INVALID_ARGUMENT when not.
absl::Status DeclareGradients(double topk_ratio,
                              const std::vector<std::optional<float>>& moving_averages,
                              proto::Placement* placement,
                              const std::vector<bool>& row_tables = {});

// Marks the variables pulled in float32 under a 16-bit wire dtype
// (VariablePlacement.pull_float32): `float32[v]`, parallel to
// placement->variables() (INVALID_ARGUMENT when not).
absl::Status DeclareFloat32Pulls(const std::vector<bool>& float32, proto::Placement* placement);

// Row-major helpers for partitioned variables. A part holds the rows
// [first_axis_offset, first_axis_offset + first_axis_size) of the full variable, which in row-major
// order are one contiguous run of elements.
//
// SlicePart returns the elements of part `part` of `full`, which holds product(shape) floats.
// AssemblePart writes `part_values` (the elements of part `part`) into their place in `*full`,
// which must already hold product(shape) floats; elements outside the part are left unchanged.
//
// INVALID_ARGUMENT if `part` is out of range, `full` is null, a size does not match the shape, or
// the variable's shape or part rows are malformed.
absl::StatusOr<std::vector<float>> SlicePart(const proto::VariablePlacement& variable, int part,
                                             const std::vector<float>& full);
absl::Status AssemblePart(const proto::VariablePlacement& variable, int part,
                          const std::vector<float>& part_values, std::vector<float>* full);

}  // namespace placement
}  // namespace psc

#endif  // PSC_COMMON_PLACEMENT_PLACEMENT_H_
