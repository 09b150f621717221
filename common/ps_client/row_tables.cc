#include "common/ps_client/row_tables.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/embedding_math.h"
#include "common/tensor/row_sparse.h"
#include "common/tensor/wire_dtype.h"

namespace psc {
namespace ps_client {

absl::StatusOr<std::unique_ptr<RowTables>> RowTables::Create(const compute::Model& model,
                                                             const proto::Placement& placement,
                                                             int64_t examples) {
  const auto& layers = model.layers();
  const auto& variables = model.variables();
  if (placement.variables_size() != static_cast<int>(variables.size())) {
    return absl::InvalidArgumentError(absl::StrCat("the placement has ", placement.variables_size(),
                                                   " variables; the model ", variables.size()));
  }
  std::unique_ptr<RowTables> t(new RowTables());
  t->num_shards_ = placement.num_shards();
  t->table_of_.assign(variables.size(), -1);
  // Each input of ids by its offset in the packed example; whether a table
  // that is not row-sparse reads it.
  std::vector<int64_t> dense_reader_offsets;
  for (size_t i = 0; i < layers.size(); ++i) {
    const compute::LayerSpec& l = layers[i];
    if (l.kind != compute::LayerSpec::kEmbedding) continue;
    const int v = model.layer_variables()[i].kernel;
    const int src = l.sources.empty() ? 0 : l.sources[0];
    const int64_t offset = src == 0 ? 0 : layers[src - 1].offset;
    const int64_t count = compute::ShapeSize(model.graph().tensor(src).shape);
    if (placement.variables(v).gradient() != proto::GRADIENT_ROW_SPARSE) {
      dense_reader_offsets.push_back(offset);
      continue;
    }
    auto in = std::find_if(t->inputs_.begin(), t->inputs_.end(),
                           [&](const Input& x) { return x.offset == offset; });
    if (in == t->inputs_.end()) {
      t->inputs_.push_back(Input{offset, count, l.inputs, {}});
      in = t->inputs_.end() - 1;
    }
    in->limit = std::min(in->limit, l.inputs);
    Table table;
    table.variable = v;
    table.input = static_cast<int>(in - t->inputs_.begin());
    table.shape = variables[v].shape;
    table.rows = table.shape[0];
    table.width = tensor::RowWidth(table.shape);
    // The most distinct ids a step holds.
    table.capacity = std::min(table.rows, std::max<int64_t>(1, examples) * count);
    table.layer = l.name;
    for (const proto::VariablePlacement::Part& part : placement.variables(v).parts()) {
      table.parts.push_back(
          {part.shard(), part.shard_variable(), part.first_axis_offset(), part.first_axis_size()});
    }
    t->table_of_[v] = static_cast<int>(t->tables_.size());
    t->tables_.push_back(std::move(table));
  }
  if (t->tables_.empty()) return std::unique_ptr<RowTables>();
  for (int64_t offset : dense_reader_offsets) {
    for (const Input& in : t->inputs_) {
      if (in.offset == offset) {
        return absl::FailedPreconditionError(
            "an input of ids is read by a table trained row by row and by one that is not (a "
            "frozen Embedding): give --dense_embeddings");
      }
    }
  }
  for (size_t v = 0; v < variables.size(); ++v) {
    if (t->table_of_[v] < 0) t->dense_.push_back(static_cast<int>(v));
  }
  return t;
}

absl::StatusOr<compute::Model> RowTables::LocalModel(const compute::Model& model) const {
  std::vector<compute::LayerSpec> layers = model.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    compute::LayerSpec& l = layers[i];
    if (l.kind != compute::LayerSpec::kEmbedding) continue;
    const int v = model.layer_variables()[i].kernel;
    if (table_of_[v] < 0) continue;
    l.kernel_variable = model.variables()[v].name;
    l.inputs = tables_[table_of_[v]].capacity;
  }
  PSC_ASSIGN_OR_RETURN(compute::Model local,
                       compute::Model::Build(model.name(), model.input_shape(), std::move(layers),
                                             model.summary(), model.output_softmax()));
  local.set_inputs(model.inputs());
  local.set_input_transform(model.input_transform());
  return local;
}

absl::Status RowTables::Remap(std::vector<float>* inputs, int64_t n, int64_t per_example) {
  for (Input& in : inputs_) {
    in.ids.clear();
    in.ids.reserve(static_cast<size_t>(n * in.count));
    for (int64_t e = 0; e < n; ++e) {
      const float* x = inputs->data() + e * per_example + in.offset;
      for (int64_t k = 0; k < in.count; ++k) {
        const int64_t id = compute::embedding::RowOf(x[k], in.limit);
        if (id < 0) {
          return absl::InvalidArgumentError(absl::StrCat("example ", e, " of the step: id ", x[k],
                                                         " is not a row of a table of ", in.limit,
                                                         " rows"));
        }
        in.ids.push_back(id);
      }
    }
    std::sort(in.ids.begin(), in.ids.end());
    in.ids.erase(std::unique(in.ids.begin(), in.ids.end()), in.ids.end());
    for (int64_t e = 0; e < n; ++e) {
      float* x = inputs->data() + e * per_example + in.offset;
      for (int64_t k = 0; k < in.count; ++k) {
        const auto at = std::lower_bound(in.ids.begin(), in.ids.end(), static_cast<int64_t>(x[k]));
        x[k] = static_cast<float>(at - in.ids.begin());
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// The positions [lo, hi) of `ids` (ascending) in [first, first + rows).
std::pair<size_t, size_t> Slice(const std::vector<int64_t>& ids, int64_t first, int64_t rows) {
  const size_t lo = std::lower_bound(ids.begin(), ids.end(), first) - ids.begin();
  const size_t hi = std::lower_bound(ids.begin(), ids.end(), first + rows) - ids.begin();
  return {lo, hi};
}

}  // namespace

void RowTables::AddRowPulls(std::vector<proto::PullRequest>* requests) const {
  for (const Table& t : tables_) {
    const std::vector<int64_t>& ids = inputs_[t.input].ids;
    for (const Part& p : t.parts) {
      const auto [lo, hi] = Slice(ids, p.first, p.rows);
      std::vector<int64_t> local(ids.begin() + lo, ids.begin() + hi);
      for (int64_t& id : local) id -= p.first;
      proto::RowSelection* s = (*requests)[p.shard].add_rows();
      s->set_variable(p.name);
      s->set_row_ids(tensor::EncodeRowIds(local));
    }
  }
}

absl::Status RowTables::TakeRows(const std::vector<proto::PullResponse>& responses,
                                 std::vector<std::vector<float>>* values) const {
  for (const Table& t : tables_) {
    const std::vector<int64_t>& ids = inputs_[t.input].ids;
    std::vector<float>& local = (*values)[t.variable];
    local.assign(static_cast<size_t>(t.capacity * t.width), 0.0f);
    for (const Part& p : t.parts) {
      const auto [lo, hi] = Slice(ids, p.first, p.rows);
      const proto::NamedTensor* got = nullptr;
      for (const proto::NamedTensor& x : responses[p.shard].variables()) {
        if (x.name() == p.name) got = &x;
      }
      if (got == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("ps:", p.shard, " sent no rows of \"", p.name, "\""));
      }
      std::vector<int64_t> part_shape = t.shape;
      part_shape[0] = p.rows;
      PSC_ASSIGN_OR_RETURN(
          tensor::RowSparse rows,
          tensor::DecodeRowSparse(got->tensor(), tensor::WireDtypeOrFloat32(got->tensor().dtype()),
                                  part_shape, absl::StrCat("rows of \"", p.name, "\"")));
      if (rows.ids.size() != hi - lo ||
          !std::equal(rows.ids.begin(), rows.ids.end(), ids.begin() + lo,
                      [&](int64_t got_id, int64_t want) { return got_id + p.first == want; })) {
        return absl::InvalidArgumentError(
            absl::StrCat("ps:", p.shard, " sent rows of \"", p.name, "\" that were not asked"));
      }
      std::memcpy(local.data() + lo * t.width, rows.values.data(),
                  rows.values.size() * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status RowTables::EncodeGradients(const std::vector<std::vector<float>>& grads,
                                        proto::DataType wire,
                                        std::vector<std::vector<proto::NamedTensor>>* split) const {
  for (const Table& t : tables_) {
    const std::vector<int64_t>& ids = inputs_[t.input].ids;
    const std::vector<float>& g = grads[t.variable];
    for (const Part& p : t.parts) {
      const auto [lo, hi] = Slice(ids, p.first, p.rows);
      std::vector<int64_t> local(ids.begin() + lo, ids.begin() + hi);
      for (int64_t& id : local) id -= p.first;
      std::vector<int64_t> part_shape = t.shape;
      part_shape[0] = p.rows;
      proto::NamedTensor& out = (*split)[p.shard].emplace_back();
      out.set_name(p.name);
      PSC_RETURN_IF_ERROR(tensor::SetRowSparseTensor(
          part_shape, local,
          absl::MakeConstSpan(g.data() + lo * t.width, (hi - lo) * static_cast<size_t>(t.width)),
          wire, out.mutable_tensor()));
    }
  }
  return absl::OkStatus();
}

}  // namespace ps_client
}  // namespace psc
