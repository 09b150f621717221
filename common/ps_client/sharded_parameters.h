// Moves a model's variables between the model's view (one full host vector
// per variable, Keras layout, model order) and the servers' view (shard
// variables, possibly parts of a variable split along its first axis), as a
// Placement describes. Used by workers (gradients out, parameters in) and
// the chief (initial values out, parameters in for evaluation).
#ifndef PSC_COMMON_PS_CLIENT_SHARDED_PARAMETERS_H_
#define PSC_COMMON_PS_CLIENT_SHARDED_PARAMETERS_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/placement/placement.h"
#include "google/protobuf/repeated_field.h"
#include "proto/common.pb.h"
#include "proto/job.pb.h"

namespace psc {
namespace ps_client {

// Immutable after Create; thread-safe.
class ShardedParameters {
 public:
  // INVALID_ARGUMENT if `placement` does not place exactly `variables` (in
  // order, with their shapes) or its parts do not tile each variable, or
  // `frozen` is neither empty nor one flag per variable. The frozen ones
  // (compute::Model::frozen_variables(); empty: none) take no gradient:
  // the gradient splits below leave them out.
  static absl::StatusOr<ShardedParameters> Create(
      const proto::Placement& placement, const std::vector<tensor::VariableShape>& variables,
      std::vector<bool> frozen = {});

  int num_shards() const { return num_shards_; }
  const std::vector<tensor::VariableShape>& variables() const { return variables_; }

  // For each shard, the NamedTensors of its variables cut from `full` (one
  // vector per model variable): values, of every variable. `out` is resized
  // to num_shards(). A variable whose entry of `full` is empty (an
  // embedding table its servers make, CreateVariablesRequest.generated) is
  // left out.
  void Split(const std::vector<std::vector<float>>& full,
             std::vector<std::vector<proto::NamedTensor>>* out) const;
  // A worker's gradients: the same for every variable but the frozen ones
  // (whose entries of `full` are not read), with the values as `wire`
  // (tensor/wire_dtype.h; the job's --wire_dtype). OUT_OF_RANGE naming the
  // variable for a value float16 cannot hold.
  absl::Status Split(const std::vector<std::vector<float>>& full, proto::DataType wire,
                     std::vector<std::vector<proto::NamedTensor>>* out) const;
  // The same for the model variables `variables` only (each shard's pieces
  // of them, in the shard's order, the frozen left out): the gradients of
  // one push part. Only those entries of `full` are read. INVALID_ARGUMENT
  // for an index out of range.
  absl::Status SplitVariables(const std::vector<std::vector<float>>& full,
                              const std::vector<int>& variables, proto::DataType wire,
                              std::vector<std::vector<proto::NamedTensor>>* out) const;
  // Per shard, the shard variables of its pieces of `variables` (frozen ones
  // included), in the shard's order: what a pull of them asks for.
  // INVALID_ARGUMENT for an index out of range.
  absl::StatusOr<std::vector<std::vector<std::string>>> ShardNames(
      const std::vector<int>& variables) const;
  bool frozen(int v) const { return !frozen_.empty() && frozen_[v]; }

  // Copies every shard's tensors (per shard, as pulled, each in float32 or a
  // wire dtype) into `full`. INVALID_ARGUMENT naming the variable for an
  // unknown name or dtype, a wrong size or a part that did not arrive. With
  // `frozen_held` (a pull with skip_frozen: `full` holds the frozen
  // variables from an earlier one) a frozen variable none of whose pieces
  // came is left as it is.
  absl::Status Assemble(
      const std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*>& per_shard,
      std::vector<std::vector<float>>* full, bool frozen_held = false) const;
  // The same for the model variables `variables` only (a pull in parts: the
  // pieces of those variables, from every shard that holds one): only those
  // entries of `full` (already sized, as Assemble leaves it) are written.
  // INVALID_ARGUMENT also for a tensor of another variable or an index out
  // of range; those entries of `full` are then unspecified.
  absl::Status AssembleVariables(
      const std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*>& per_shard,
      const std::vector<int>& variables, std::vector<std::vector<float>>* full,
      bool frozen_held = false) const;

 private:
  struct PartRef {
    int variable;
    int64_t offset;  // in floats
    int64_t size;    // in floats
    int shard;
  };
  // Assemble's work for the variables `wanted(v)` says (their entries of
  // `full` sized).
  template <typename Wanted>
  absl::Status AssembleIf(
      const std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*>& per_shard,
      Wanted wanted, bool frozen_held, std::vector<std::vector<float>>* full) const;
  // Marks `variables` in a mask of variables().size(); INVALID_ARGUMENT for
  // an index out of range.
  absl::StatusOr<std::vector<bool>> Mask(const std::vector<int>& variables) const;
  // Split's work for the variables `wanted(v)` says.
  template <typename Wanted>
  absl::Status SplitIf(const std::vector<std::vector<float>>& full, proto::DataType wire,
                       Wanted wanted, std::vector<std::vector<proto::NamedTensor>>* out) const;

  int num_shards_ = 0;
  std::vector<tensor::VariableShape> variables_;
  std::vector<bool> frozen_;  // empty: none
  std::vector<std::vector<std::pair<std::string, PartRef>>>
      by_shard_;  // shard -> its parts in order
  absl::flat_hash_map<std::string, PartRef> by_name_;
};

}  // namespace ps_client
}  // namespace psc

#endif  // PSC_COMMON_PS_CLIENT_SHARDED_PARAMETERS_H_
