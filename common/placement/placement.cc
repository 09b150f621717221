#include "common/placement/placement.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"

namespace psc {
namespace placement {
namespace {

constexpr int64_t kFloatBytes = sizeof(float);
// The most elements a variable may have so that its byte count fits in int64.
constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / kFloatBytes;

// The number of elements of `shape`, checking that every dimension is >= 1 and that the byte
// count fits in int64.
template <typename Shape>
absl::StatusOr<int64_t> CountElements(const std::string& name, const Shape& shape) {
  int64_t elements = 1;
  int axis = 0;
  for (int64_t dim : shape) {
    if (dim < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", name, "\" has dimension ", dim, " at axis ", axis,
                       " of shape ", tensor::ShapeString(shape), "; each must be >= 1"));
    }
    if (elements > kMaxElements / dim) {
      return absl::InvalidArgumentError(absl::StrCat("variable \"", name, "\" with shape ",
                                                     tensor::ShapeString(shape), " is too large"));
    }
    elements *= dim;
    ++axis;
  }
  return elements;
}

// One part of one variable, as the greedy assignment sees it.
struct PartPlan {
  int variable;  // index in model order
  int part;
  int64_t bytes;
};

absl::Status CheckName(int index, const std::string& name, std::unordered_set<std::string>* seen) {
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("variable #", index, " has an empty name"));
  }
  if (absl::StrContains(name, "/part_")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variable \"", name, "\" has \"/part_\" in its name, which is reserved for partitions"));
  }
  if (!seen->insert(name).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable \"", name, "\" appears more than once"));
  }
  return absl::OkStatus();
}

// The elements [begin, begin + count) of the full variable that part `part` holds.
struct ElementRange {
  int64_t total;  // elements of the full variable
  int64_t begin;
  int64_t count;
};

absl::StatusOr<ElementRange> PartElements(const proto::VariablePlacement& variable, int part) {
  const std::string& name = variable.name();
  if (part < 0 || part >= variable.parts_size()) {
    return absl::InvalidArgumentError(absl::StrCat("variable \"", name, "\" has ",
                                                   variable.parts_size(), " parts; part ", part,
                                                   " does not exist"));
  }
  PSC_ASSIGN_OR_RETURN(const int64_t total, CountElements(name, variable.shape()));
  const int64_t rows = variable.shape().empty() ? 1 : variable.shape(0);
  const int64_t row_elements = total / rows;
  const proto::VariablePlacement::Part& p = variable.parts(part);
  const int64_t offset = p.first_axis_offset();
  const int64_t size = p.first_axis_size();
  if (offset < 0 || size < 1 || offset > rows - size) {
    return absl::InvalidArgumentError(absl::StrCat("part ", part, " of variable \"", name,
                                                   "\" has ", size, " rows from row ", offset,
                                                   "; the variable has ", rows, " rows"));
  }
  return ElementRange{total, offset * row_elements, size * row_elements};
}

absl::Status CheckFullSize(const proto::VariablePlacement& variable, int64_t expected,
                           size_t actual) {
  if (static_cast<uint64_t>(expected) != actual) {
    return absl::InvalidArgumentError(absl::StrCat("variable \"", variable.name(), "\" with shape ",
                                                   tensor::ShapeString(variable.shape()), " has ",
                                                   expected, " elements; got ", actual));
  }
  return absl::OkStatus();
}

std::string DescribePart(const proto::VariablePlacement::Part& part) {
  return absl::StrCat("\"", part.shard_variable(), "\" on shard ", part.shard(), ", rows [",
                      part.first_axis_offset(), ",",
                      part.first_axis_offset() + part.first_axis_size(), ")");
}

}  // namespace

absl::StatusOr<proto::Placement> PlaceVariables(const std::vector<tensor::VariableShape>& variables,
                                                const PlacementOptions& options) {
  const int num_shards = options.num_shards;
  if (num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_shards is ", num_shards, "; it must be >= 1"));
  }
  if (options.min_shard_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_shard_bytes is ", options.min_shard_bytes, "; it must be >= 1"));
  }
  if (variables.empty()) {
    return absl::InvalidArgumentError("there are no variables to place");
  }
  if (variables.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("too many variables: ", variables.size()));
  }

  proto::Placement placement;
  placement.set_num_shards(num_shards);
  std::vector<PartPlan> plans;
  std::unordered_set<std::string> seen;
  int64_t total_bytes = 0;
  for (int i = 0; i < static_cast<int>(variables.size()); ++i) {
    const tensor::VariableShape& variable = variables[i];
    PSC_RETURN_IF_ERROR(CheckName(i, variable.name, &seen));
    PSC_ASSIGN_OR_RETURN(const int64_t elements, CountElements(variable.name, variable.shape));
    const int64_t bytes = elements * kFloatBytes;
    if (total_bytes > std::numeric_limits<int64_t>::max() - bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the variables up to \"", variable.name, "\" are too large together"));
    }
    total_bytes += bytes;

    const int64_t rows = variable.shape.empty() ? 1 : variable.shape[0];
    const int64_t row_elements = elements / rows;
    const int64_t wanted =
        bytes / options.min_shard_bytes + (bytes % options.min_shard_bytes != 0 ? 1 : 0);
    const int num_parts =
        static_cast<int>(std::max<int64_t>(1, std::min({int64_t{num_shards}, rows, wanted})));

    proto::VariablePlacement* out = placement.add_variables();
    out->set_name(variable.name);
    out->mutable_shape()->Add(variable.shape.begin(), variable.shape.end());
    int64_t offset = 0;
    for (int j = 0; j < num_parts; ++j) {
      const int64_t part_rows = rows / num_parts + (j < rows % num_parts ? 1 : 0);
      proto::VariablePlacement::Part* part = out->add_parts();
      part->set_shard_variable(num_parts == 1 ? variable.name
                                              : absl::StrCat(variable.name, "/part_", j));
      part->set_first_axis_offset(offset);
      part->set_first_axis_size(part_rows);
      plans.push_back({i, j, part_rows * row_elements * kFloatBytes});
      offset += part_rows;
    }
  }

  std::sort(plans.begin(), plans.end(), [](const PartPlan& a, const PartPlan& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.variable != b.variable) return a.variable < b.variable;
    return a.part < b.part;
  });
  std::vector<int64_t> loads(num_shards, 0);
  // taken[v][s]: a part of variable v is on shard s. Sized only for partitioned variables.
  std::vector<std::vector<bool>> taken(variables.size());
  for (const PartPlan& plan : plans) {
    proto::VariablePlacement* variable = placement.mutable_variables(plan.variable);
    const bool partitioned = variable->parts_size() > 1;
    std::vector<bool>& used = taken[plan.variable];
    if (partitioned && used.empty()) used.assign(num_shards, false);
    int best = -1;
    for (int s = 0; s < num_shards; ++s) {
      if (partitioned && used[s]) continue;
      if (best < 0 || loads[s] < loads[best]) best = s;
    }
    // k <= num_shards, so some shard is always free of this variable's other parts.
    loads[best] += plan.bytes;
    if (partitioned) used[best] = true;
    variable->mutable_parts(plan.part)->set_shard(best);
  }
  return placement;
}

absl::Status CheckSamePlacement(const proto::Placement& saved, const proto::Placement& current) {
  if (saved.num_shards() != current.num_shards()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint placement has ", saved.num_shards(), " shards; this cluster has ",
                     current.num_shards()));
  }
  const int common = std::min(saved.variables_size(), current.variables_size());
  for (int i = 0; i < common; ++i) {
    const proto::VariablePlacement& a = saved.variables(i);
    const proto::VariablePlacement& b = current.variables(i);
    if (a.name() != b.name()) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint has variable \"", a.name(),
                                                        "\" at position ", i, "; the model has \"",
                                                        b.name(), "\""));
    }
    if (!std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint has variable \"", a.name(), "\" with shape ", tensor::ShapeString(a.shape()),
          "; the model has ", tensor::ShapeString(b.shape())));
    }
    if (a.parts_size() != b.parts_size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint splits variable \"", a.name(), "\" into ", a.parts_size(),
                       " parts; this cluster splits it into ", b.parts_size()));
    }
    for (int j = 0; j < a.parts_size(); ++j) {
      const proto::VariablePlacement::Part& pa = a.parts(j);
      const proto::VariablePlacement::Part& pb = b.parts(j);
      if (pa.shard_variable() != pb.shard_variable() || pa.shard() != pb.shard() ||
          pa.first_axis_offset() != pb.first_axis_offset() ||
          pa.first_axis_size() != pb.first_axis_size()) {
        return absl::FailedPreconditionError(
            absl::StrCat("checkpoint has part ", j, " of variable \"", a.name(), "\" as ",
                         DescribePart(pa), "; this cluster has ", DescribePart(pb)));
      }
    }
  }
  if (saved.variables_size() != current.variables_size()) {
    const proto::VariablePlacement& first_unmatched =
        saved.variables_size() > common ? saved.variables(common) : current.variables(common);
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint has ", saved.variables_size(), " variables; the model has ",
        current.variables_size(), " (first unmatched: \"", first_unmatched.name(), "\")"));
  }
  return absl::OkStatus();
}

std::vector<std::vector<tensor::VariableShape>> ShardVariables(const proto::Placement& placement) {
  const int num_shards = std::max(placement.num_shards(), 0);
  std::vector<std::vector<tensor::VariableShape>> result(num_shards);
  for (const proto::VariablePlacement& variable : placement.variables()) {
    for (const proto::VariablePlacement::Part& part : variable.parts()) {
      if (part.shard() < 0 || part.shard() >= num_shards) continue;
      tensor::VariableShape shard_variable{part.shard_variable(),
                                           {variable.shape().begin(), variable.shape().end()}};
      if (!shard_variable.shape.empty()) shard_variable.shape[0] = part.first_axis_size();
      result[part.shard()].push_back(std::move(shard_variable));
    }
  }
  return result;
}

std::vector<int64_t> ShardBytes(const proto::Placement& placement) {
  std::vector<std::vector<tensor::VariableShape>> shards = ShardVariables(placement);
  std::vector<int64_t> bytes(shards.size(), 0);
  for (size_t s = 0; s < shards.size(); ++s) {
    for (const tensor::VariableShape& variable : shards[s]) {
      // Unsigned, so that a malformed placement wraps instead of overflowing.
      uint64_t elements = 1;
      for (int64_t dim : variable.shape) elements *= static_cast<uint64_t>(dim);
      bytes[s] += static_cast<int64_t>(elements * kFloatBytes);
    }
  }
  return bytes;
}

absl::StatusOr<std::vector<float>> SlicePart(const proto::VariablePlacement& variable, int part,
                                             const std::vector<float>& full) {
  PSC_ASSIGN_OR_RETURN(const ElementRange range, PartElements(variable, part));
  PSC_RETURN_IF_ERROR(CheckFullSize(variable, range.total, full.size()));
  return std::vector<float>(full.begin() + range.begin, full.begin() + range.begin + range.count);
}

absl::Status AssemblePart(const proto::VariablePlacement& variable, int part,
                          const std::vector<float>& part_values, std::vector<float>* full) {
  if (full == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no tensor to assemble variable \"", variable.name(), "\" into"));
  }
  PSC_ASSIGN_OR_RETURN(const ElementRange range, PartElements(variable, part));
  PSC_RETURN_IF_ERROR(CheckFullSize(variable, range.total, full->size()));
  if (static_cast<uint64_t>(range.count) != part_values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("part ", part, " of variable \"",
                                                   variable.name(), "\" has ", range.count,
                                                   " elements; got ", part_values.size()));
  }
  std::copy(part_values.begin(), part_values.end(), full->begin() + range.begin);
  return absl::OkStatus();
}

absl::Status DeclareGradients(double topk_ratio,
                              const std::vector<std::optional<float>>& moving_averages,
                              proto::Placement* placement, const std::vector<bool>& row_tables) {
  if (moving_averages.size() != static_cast<size_t>(placement->variables_size()) ||
      (!row_tables.empty() && row_tables.size() != moving_averages.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the placement has ", placement->variables_size(), " variables; the model ",
                     moving_averages.size()));
  }
  for (int v = 0; v < placement->variables_size(); ++v) {
    const bool trainable = !moving_averages[v].has_value();
    const bool rows = trainable && !row_tables.empty() && row_tables[v];
    placement->mutable_variables(v)->set_gradient(
        rows ? proto::GRADIENT_ROW_SPARSE
             : (topk_ratio > 0 && trainable ? proto::GRADIENT_TOP_K : proto::GRADIENT_DENSE));
  }
  return absl::OkStatus();
}

absl::Status DeclareFloat32Pulls(const std::vector<bool>& float32, proto::Placement* placement) {
  if (float32.size() != static_cast<size_t>(placement->variables_size())) {
    return absl::InvalidArgumentError(absl::StrCat("the placement has ",
                                                   placement->variables_size(),
                                                   " variables; the model ", float32.size()));
  }
  for (int v = 0; v < placement->variables_size(); ++v) {
    placement->mutable_variables(v)->set_pull_float32(float32[v]);
  }
  return absl::OkStatus();
}

}  // namespace placement
}  // namespace psc
