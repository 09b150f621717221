#include "common/ops/op_def.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/compute/reference/reference_ops.h"

namespace psc {
namespace ops {

OpDef Define(const char* name, int inputs, int outputs, ShapeRule shapes, Reference reference) {
  OpDef def;
  def.name = name;
  def.inputs = inputs;
  def.outputs = outputs;
  def.shapes = shapes;
  def.reference = reference;
  return def;
}

std::vector<OpDef> AllOpDefs() {
  std::vector<OpDef> defs = ElementwiseOpDefs();
  for (std::vector<OpDef> (*family)() :
       {PoolingOpDefs, BatchNormOpDefs, LayerNormOpDefs, DenseOpDefs, ConvOpDefs, LossOpDefs,
        EmbeddingOpDefs, MatMulOpDefs, RnnOpDefs, MaskOpDefs}) {
    for (OpDef& def : family()) defs.push_back(std::move(def));
  }
  std::sort(defs.begin(), defs.end(),
            [](const OpDef& a, const OpDef& b) { return std::strcmp(a.name, b.name) < 0; });
  return defs;
}

const OpDef* FindOpDef(const std::vector<OpDef>& defs, absl::string_view name) {
  for (const OpDef& def : defs) {
    if (name == def.name) return &def;
  }
  return nullptr;
}

std::vector<OpCase> CasesOf(const std::vector<OpDef>& defs, const OpDef& def, std::mt19937* rng) {
  std::vector<OpCase> cases;
  if (def.cases != nullptr) cases = def.cases(rng);
  if (def.gradient.forward == nullptr) return cases;
  const OpDef* forward = FindOpDef(defs, def.gradient.forward);
  if (forward == nullptr || forward->cases == nullptr) return cases;
  for (const OpCase& fc : forward->cases(rng)) {
    const std::vector<HostTensor> y = forward->reference(fc.inputs, fc.attrs);
    HostTensor dy{y[0].shape, compute::reference::RandomUniform(rng, y[0].values.size(), -1, 1)};
    OpCase c;
    c.name = absl::StrCat(def.name, " of ", fc.name);
    c.attrs = fc.attrs;
    c.inputs = def.gradient.inputs(fc.inputs, y, dy, fc.attrs);
    c.exact = def.gradient.exact;
    c.terms = fc.terms;
    c.differentiable = fc.differentiable;
    if (def.gradient.adjust != nullptr) def.gradient.adjust(fc, &c);
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace ops
}  // namespace psc
