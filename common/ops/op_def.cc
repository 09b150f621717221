#include "common/ops/op_def.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/float_formats.h"
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

double RoundTo(compute::DType dtype, double v) {
  const float f = static_cast<float>(v);
  switch (dtype) {
    case compute::DType::kBFloat16:
      return Bfloat16ToFloat(FloatToBfloat16(f));
    case compute::DType::kFloat16:
      return Float16ToFloat(FloatToFloat16(f));
    default:
      return f;
  }
}

namespace {

// t's values rounded to `precision` (a float32 tensor's only).
void Round(compute::DType precision, HostTensor* t) {
  if (t->dtype != compute::DType::kFloat32) return;
  for (double& v : t->values) v = RoundTo(precision, v);
}

// The case's float32 inputs outside `keep` held in `precision`.
void Hold(compute::DType precision, uint32_t keep, OpCase* c) {
  for (size_t i = 0; i < c->inputs.size(); ++i) {
    HostTensor& t = c->inputs[i];
    if (t.dtype != compute::DType::kFloat32 || ((keep >> i) & 1) != 0) continue;
    Round(precision, &t);
    t.dtype = precision;
  }
}

}  // namespace

std::vector<OpCase> CasesOf(const std::vector<OpDef>& defs, const OpDef& def, std::mt19937* rng,
                            compute::DType precision) {
  const bool low = compute::IsLowPrecision(precision);
  std::vector<OpCase> cases;
  if (def.cases != nullptr) cases = def.cases(rng);
  if (low) {
    for (OpCase& c : cases) Hold(precision, def.float32_inputs, &c);
  }
  if (def.gradient.forward == nullptr) return cases;
  const OpDef* forward = FindOpDef(defs, def.gradient.forward);
  if (forward == nullptr || forward->cases == nullptr) return cases;
  for (OpCase fc : forward->cases(rng)) {
    if (low) {
      for (size_t i = 0; i < fc.inputs.size(); ++i) {
        if (((forward->float32_inputs >> i) & 1) == 0) Round(precision, &fc.inputs[i]);
      }
    }
    std::vector<HostTensor> y = forward->reference(fc.inputs, fc.attrs);
    HostTensor dy{y[0].shape, compute::reference::RandomUniform(rng, y[0].values.size(), -1, 1)};
    if (low) Round(precision, &dy);
    OpCase c;
    c.name = absl::StrCat(def.name, " of ", fc.name);
    c.attrs = fc.attrs;
    c.inputs = def.gradient.inputs(fc.inputs, y, dy, fc.attrs);
    c.exact = def.gradient.exact;
    c.terms = fc.terms;
    c.differentiable = fc.differentiable;
    if (def.gradient.adjust != nullptr) def.gradient.adjust(fc, &c);
    if (low) Hold(precision, def.float32_inputs, &c);
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace ops
}  // namespace psc
