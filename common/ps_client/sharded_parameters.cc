#include "common/ps_client/sharded_parameters.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_context.h"
#include "common/base/status_macros.h"
#include "common/tensor/tensor.h"
#include "common/tensor/wire_dtype.h"

namespace psc {
namespace ps_client {

absl::StatusOr<ShardedParameters> ShardedParameters::Create(
    const proto::Placement& placement, const std::vector<tensor::VariableShape>& variables,
    std::vector<bool> frozen) {
  ShardedParameters out;
  out.num_shards_ = placement.num_shards();
  out.variables_ = variables;
  if (!frozen.empty() && frozen.size() != variables.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(frozen.size(), " frozen flags for ", variables.size(), " variables"));
  }
  out.frozen_ = std::move(frozen);
  out.by_shard_.resize(std::max(0, placement.num_shards()));
  if (placement.num_shards() < 1) return absl::InvalidArgumentError("placement has no shards");
  if (placement.variables_size() != static_cast<int>(variables.size())) {
    return absl::InvalidArgumentError(absl::StrCat("placement has ", placement.variables_size(),
                                                   " variables; the model has ", variables.size()));
  }
  for (int v = 0; v < placement.variables_size(); ++v) {
    const proto::VariablePlacement& vp = placement.variables(v);
    const tensor::VariableShape& model = variables[v];
    if (vp.name() != model.name ||
        !std::equal(vp.shape().begin(), vp.shape().end(), model.shape.begin(), model.shape.end())) {
      return absl::InvalidArgumentError(absl::StrCat("placement variable ", v, " is \"", vp.name(),
                                                     "\"; the model's is \"", model.name, "\""));
    }
    const int64_t total = tensor::NumElements(model.shape);
    const int64_t rows = model.shape.empty() ? 1 : model.shape[0];
    const int64_t row_size = rows > 0 ? total / rows : 0;
    int64_t next_row = 0;
    for (const auto& part : vp.parts()) {
      if (part.shard() < 0 || part.shard() >= placement.num_shards() ||
          part.first_axis_offset() != next_row || part.first_axis_size() < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("placement of \"", vp.name(), "\": parts do not tile its rows"));
      }
      PartRef ref{v, part.first_axis_offset() * row_size, part.first_axis_size() * row_size,
                  part.shard()};
      next_row += part.first_axis_size();
      out.by_shard_[part.shard()].emplace_back(part.shard_variable(), ref);
      out.by_name_[part.shard_variable()] = ref;
    }
    if (next_row != rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement of \"", vp.name(), "\": parts cover ", next_row, " of ", rows, " rows"));
    }
  }
  return out;
}

void ShardedParameters::Split(const std::vector<std::vector<float>>& full,
                              std::vector<std::vector<proto::NamedTensor>>* out) const {
  // float32 cannot fail.
  SplitIf(
      full, proto::DT_FLOAT32,
      [&](int v) { return !full[v].empty() || tensor::NumElements(variables_[v].shape) == 0; }, out)
      .IgnoreError();
}

absl::Status ShardedParameters::Split(const std::vector<std::vector<float>>& full,
                                      proto::DataType wire,
                                      std::vector<std::vector<proto::NamedTensor>>* out) const {
  return SplitIf(
      full, wire, [&](int v) { return !frozen(v); }, out);
}

absl::StatusOr<std::vector<bool>> ShardedParameters::Mask(const std::vector<int>& variables) const {
  std::vector<bool> mask(variables_.size(), false);
  for (int v : variables) {
    if (v < 0 || v >= static_cast<int>(variables_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable ", v, " out of range [0, ", variables_.size(), ")"));
    }
    mask[v] = true;
  }
  return mask;
}

absl::Status ShardedParameters::SplitVariables(
    const std::vector<std::vector<float>>& full, const std::vector<int>& variables,
    proto::DataType wire, std::vector<std::vector<proto::NamedTensor>>* out) const {
  PSC_ASSIGN_OR_RETURN(const std::vector<bool> wanted, Mask(variables));
  return SplitIf(
      full, wire, [&](int v) { return wanted[v] && !frozen(v); }, out);
}

absl::StatusOr<std::vector<std::vector<std::string>>> ShardedParameters::ShardNames(
    const std::vector<int>& variables) const {
  PSC_ASSIGN_OR_RETURN(const std::vector<bool> wanted, Mask(variables));
  std::vector<std::vector<std::string>> out(num_shards_);
  for (int s = 0; s < num_shards_; ++s) {
    for (const auto& [name, ref] : by_shard_[s]) {
      if (wanted[ref.variable]) out[s].push_back(name);
    }
  }
  return out;
}

template <typename Wanted>
absl::Status ShardedParameters::SplitIf(const std::vector<std::vector<float>>& full,
                                        proto::DataType wire, Wanted wanted,
                                        std::vector<std::vector<proto::NamedTensor>>* out) const {
  out->assign(num_shards_, {});
  for (int s = 0; s < num_shards_; ++s) {
    for (const auto& [name, ref] : by_shard_[s]) {
      if (!wanted(ref.variable)) continue;
      proto::NamedTensor t;
      t.set_name(name);
      std::vector<int64_t> shape = variables_[ref.variable].shape;
      if (!shape.empty())
        shape[0] = ref.size / std::max<int64_t>(1, tensor::NumElements(shape) / shape[0]);
      const auto values = absl::MakeConstSpan(full[ref.variable]).subspan(ref.offset, ref.size);
      if (wire == proto::DT_FLOAT32) {
        tensor::SetFloatTensor(shape, values, t.mutable_tensor());
      } else if (absl::Status e = tensor::SetWireTensor(shape, values, wire, t.mutable_tensor());
                 !e.ok()) {
        return base::Prefix(e, absl::StrCat("\"", name, "\" as ", tensor::WireDtypeName(wire)));
      }
      (*out)[s].push_back(std::move(t));
    }
  }
  return absl::OkStatus();
}

absl::Status ShardedParameters::Assemble(
    const std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*>& per_shard,
    std::vector<std::vector<float>>* full, bool frozen_held) const {
  full->resize(variables_.size());
  for (size_t v = 0; v < variables_.size(); ++v)
    (*full)[v].resize(tensor::NumElements(variables_[v].shape));
  return AssembleIf(
      per_shard, [](int) { return true; }, frozen_held, full);
}

absl::Status ShardedParameters::AssembleVariables(
    const std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*>& per_shard,
    const std::vector<int>& variables, std::vector<std::vector<float>>* full,
    bool frozen_held) const {
  PSC_ASSIGN_OR_RETURN(const std::vector<bool> wanted, Mask(variables));
  full->resize(variables_.size());
  for (int v : variables) (*full)[v].resize(tensor::NumElements(variables_[v].shape));
  return AssembleIf(
      per_shard, [&](int v) { return static_cast<bool>(wanted[v]); }, frozen_held, full);
}

template <typename Wanted>
absl::Status ShardedParameters::AssembleIf(
    const std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*>& per_shard,
    Wanted wanted, bool frozen_held, std::vector<std::vector<float>>* full) const {
  std::vector<int64_t> filled(variables_.size(), 0);
  for (const auto* tensors : per_shard) {
    for (const proto::NamedTensor& t : *tensors) {
      auto it = by_name_.find(t.name());
      if (it == by_name_.end()) {
        return absl::InvalidArgumentError(absl::StrCat("unexpected variable \"", t.name(), "\""));
      }
      const PartRef& ref = it->second;
      if (!wanted(ref.variable)) {
        return absl::InvalidArgumentError(
            absl::StrCat("\"", t.name(), "\" is not a piece of the variables asked for"));
      }
      const proto::DataType dtype = tensor::WireDtypeOrFloat32(t.tensor().dtype());
      if (absl::Status s = tensor::DecodeFloats(
              t.tensor().data(), dtype,
              absl::MakeSpan((*full)[ref.variable]).subspan(ref.offset, ref.size));
          !s.ok()) {
        return base::Prefix(s, absl::StrCat("\"", t.name(), "\""));
      }
      filled[ref.variable] += ref.size;
    }
  }
  for (size_t v = 0; v < variables_.size(); ++v) {
    const int i = static_cast<int>(v);
    if (frozen_held && frozen(i) && filled[v] == 0) continue;  // kept from an earlier pull
    if (wanted(i) && filled[v] != static_cast<int64_t>((*full)[v].size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", variables_[v].name, "\" arrived incomplete"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ps_client
}  // namespace psc
