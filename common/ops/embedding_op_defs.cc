// The embedding ops' definitions (their kernels: compute/embedding_ops.h
// and each backend's *_embedding_kernels.cc).
#include <random>

#include "absl/strings/str_cat.h"
#include "common/compute/embedding_ops.h"
#include "common/ops/host_tensors.h"
#include "common/ops/op_def.h"

namespace psc {
namespace ops {
namespace embedding_defs {  // a unity build shares the op files' namespace
namespace {

namespace em = ::psc::compute::embedding;
using compute::ShapeSize;
using compute::ShapeText;

// ids [...] and table [V,D]: rows [..., D]; with a third input (dy) it
// must be those rows, and the output is the table's shape.
template <const char* kOp>
absl::StatusOr<std::vector<Shape>> Shapes(absl::Span<const Shape> in, const OpAttrs&) {
  const Shape &ids = in[0], &table = in[1];
  if (table.size() != 2 || table[0] < 1 || table[0] > em::kMaxRows || table[1] < 1) {
    return Refuse(kOp, absl::StrCat("table has shape ", ShapeText(table),
                                    ", want [V,D] with V in [1, ", em::kMaxRows, "]"));
  }
  Shape rows = ids;
  rows.push_back(table[1]);
  if (in.size() == 2) return std::vector<Shape>{rows};
  if (in[2] != rows) {
    return Refuse(kOp, absl::StrCat("dy has shape ", ShapeText(in[2]), ", want ", ShapeText(rows)));
  }
  return std::vector<Shape>{table};
}

std::vector<HostTensor> LookupReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  const HostTensor &ids = in[0], &table = in[1];
  const int64_t d = table.shape[1];
  HostTensor y;
  y.shape = ids.shape;
  y.shape.push_back(d);
  y.values.reserve(ids.values.size() * d);
  for (double id : ids.values) {
    const auto row = table.values.begin() + static_cast<int64_t>(id) * d;
    y.values.insert(y.values.end(), row, row + d);
  }
  return {y};
}

std::vector<HostTensor> GradientReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  const HostTensor &ids = in[0], &table = in[1], &dy = in[2];
  const int64_t d = table.shape[1];
  HostTensor g{table.shape, std::vector<double>(table.values.size(), 0.0)};
  for (size_t i = 0; i < ids.values.size(); ++i) {
    const int64_t id = static_cast<int64_t>(ids.values[i]);
    for (int64_t k = 0; k < d; ++k) g.values[id * d + k] += dy.values[i * d + k];
  }
  return {g};
}

// Ids of every shape the layer meets (a bag [N,F], a sequence [N,T], one
// per example [N]), repeated ids among them (their gradients add up), one
// row and one column, and the click-through job's shape.
std::vector<OpCase> LookupCases(std::mt19937* rng) {
  struct Case {
    Shape ids;
    int64_t v, d;
  };
  const Case shapes[] = {{{1}, 1, 1},       {{3}, 5, 2},       {{2, 3}, 4, 4}, {{2, 2, 3}, 9, 3},
                         {{5, 1}, 100, 16}, {{4, 26}, 50, 16}, {{2, 7}, 3, 33}};
  std::vector<OpCase> cases;
  for (const Case& s : shapes) {
    OpCase c;
    c.name = absl::StrCat("ids ", ShapeText(s.ids), " of [", s.v, ",", s.d, "]");
    HostTensor ids{s.ids, std::vector<double>(ShapeSize(s.ids))};
    std::uniform_int_distribution<int64_t> id(0, s.v - 1);
    for (double& x : ids.values) x = static_cast<double>(id(*rng));
    c.inputs = {ids, RandomTensor(rng, {s.v, s.d})};
    // A row copy is exact; a gradient row sums the dy of each repeat.
    c.exact = true;
    c.terms = ShapeSize(s.ids);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<HostTensor> GradientInputs(absl::Span<const HostTensor> in,
                                       absl::Span<const HostTensor>, const HostTensor& dy,
                                       const OpAttrs&) {
  return {in[0], in[1], dy};
}

}  // namespace
}  // namespace embedding_defs

std::vector<OpDef> EmbeddingOpDefs() {
  using namespace embedding_defs;  // NOLINT(build/namespaces): this file's own
  namespace em = ::psc::compute::embedding;
  OpDef lookup = Define(em::kEmbeddingLookup, 2, 1, Shapes<em::kEmbeddingLookup>, LookupReference);
  lookup.float32_inputs = 0b10;  // the table
  lookup.cases = LookupCases;
  lookup.independent_inputs = true;
  OpDef gradient =
      Define(em::kEmbeddingGradient, 3, 1, Shapes<em::kEmbeddingGradient>, GradientReference);
  gradient.float32_inputs = 0b10;  // the table
  gradient.float32_outputs = 0b1;  // the table's gradient
  gradient.gradient = {em::kEmbeddingLookup, 1, GradientInputs, /*exact=*/false, 1e-3, nullptr};
  return {lookup, gradient};
}

}  // namespace ops
}  // namespace psc
