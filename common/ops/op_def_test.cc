#include "common/ops/op_def.h"

#include <cmath>
#include <random>
#include <set>
#include <string>

#include "common/compute/reference/reference_ops.h"
#include "gtest/gtest.h"

namespace psc {
namespace ops {
namespace {

namespace ref = ::psc::compute::reference;

// Every OpDef is whole, named once, and its shape rule gives the shapes its
// reference makes on every case.
TEST(OpDefTest, EveryOpDefIsWholeAndItsShapeRuleMatchesItsReference) {
  const std::vector<OpDef> defs = AllOpDefs();
  ASSERT_FALSE(defs.empty());
  std::set<std::string> names;
  for (const OpDef& def : defs) {
    ASSERT_NE(def.name, nullptr);
    SCOPED_TRACE(def.name);
    EXPECT_TRUE(names.insert(def.name).second) << "defined twice";
    ASSERT_NE(def.shapes, nullptr);
    ASSERT_NE(def.reference, nullptr);
    EXPECT_GE(def.outputs, 1);
    for (int k : def.in_place) {
      EXPECT_TRUE(k >= 0 && k < def.inputs) << "in place over input " << k;
    }
    if (def.gradient.forward != nullptr) {
      const OpDef* forward = FindOpDef(defs, def.gradient.forward);
      ASSERT_NE(forward, nullptr) << "gradient of an undefined op";
      EXPECT_TRUE(def.gradient.wrt >= 0 && def.gradient.wrt < forward->inputs);
      EXPECT_NE(def.gradient.inputs, nullptr);
    }
    std::mt19937 rng(1);
    const std::vector<OpCase> cases = CasesOf(defs, def, &rng);
    EXPECT_FALSE(cases.empty()) << "no conformance case";
    for (const OpCase& c : cases) {
      SCOPED_TRACE(c.name);
      ASSERT_EQ(c.inputs.size(), static_cast<size_t>(def.inputs));
      std::vector<Shape> shapes;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        const HostTensor& t = c.inputs[i];
        shapes.push_back(t.shape);
        if ((c.absent_inputs >> i) & 1) {
          EXPECT_TRUE(t.shape.empty() && t.values.empty()) << "absent input " << i;
          continue;
        }
        EXPECT_EQ(static_cast<int64_t>(t.values.size()), compute::ShapeSize(t.shape));
        for (double v : t.values) ASSERT_EQ(v, static_cast<float>(v)) << "not a float";
      }
      const absl::StatusOr<std::vector<Shape>> outs = def.shapes(shapes, c.attrs);
      ASSERT_TRUE(outs.ok()) << outs.status();
      const std::vector<HostTensor> want = def.reference(c.inputs, c.attrs);
      ASSERT_EQ(want.size(), outs->size());
      for (size_t o = 0; o < want.size(); ++o) {
        EXPECT_EQ(want[o].shape, (*outs)[o]);
        EXPECT_EQ(static_cast<int64_t>(want[o].values.size()), compute::ShapeSize((*outs)[o]));
      }
      if (!c.output_shapes.empty()) {
        ASSERT_EQ(c.output_shapes.size(), outs->size());
        for (size_t o = 0; o < outs->size(); ++o) {
          EXPECT_EQ(compute::ShapeSize(c.output_shapes[o]), compute::ShapeSize((*outs)[o]));
        }
      }
    }
  }
}

// A shape rule refuses a second input that does not agree with the first:
// its first case's, one longer in the first or else the last axis (some
// rules take either: DenseBackwardData's kernel w may have any K), naming
// the op and the shape.
TEST(OpDefTest, ShapeRulesRefuseInputsThatDoNotAgree) {
  const std::vector<OpDef> defs = AllOpDefs();
  for (const OpDef& def : defs) {
    if (def.inputs < 2 || def.independent_inputs) continue;
    SCOPED_TRACE(def.name);
    std::mt19937 rng(3);
    const std::vector<OpCase> cases = CasesOf(defs, def, &rng);
    ASSERT_FALSE(cases.empty());
    const OpCase& c = cases.front();
    std::vector<Shape> shapes;
    for (const HostTensor& t : c.inputs) shapes.push_back(t.shape);
    ASSERT_TRUE(def.shapes(shapes, c.attrs).ok());
    bool refused = false;
    for (bool first : {true, false}) {
      std::vector<Shape> bad = shapes;
      (first ? bad[1].front() : bad[1].back()) += 1;
      const absl::StatusOr<std::vector<Shape>> outs = def.shapes(bad, c.attrs);
      if (outs.ok()) continue;
      refused = true;
      EXPECT_EQ(outs.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(outs.status().message().find(def.name), absl::string_view::npos) << outs.status();
      EXPECT_NE(outs.status().message().find(compute::ShapeText(bad[1])), absl::string_view::npos)
          << outs.status();
    }
    EXPECT_TRUE(refused) << "input 1 of any shape is accepted";
  }
}

// Each gradient op's reference, on its forward's differentiable cases,
// against central differences of the forward's reference: d/dx of
// sum(forward(x) * dy) for the input it differentiates.
TEST(OpDefTest, GradientReferencesMatchCentralDifferences) {
  const std::vector<OpDef> defs = AllOpDefs();
  int checked = 0;
  for (const OpDef& def : defs) {
    if (def.gradient.forward == nullptr) continue;
    SCOPED_TRACE(def.name);
    const OpDef& forward = *FindOpDef(defs, def.gradient.forward);
    std::mt19937 rng(2);
    for (const OpCase& fc : forward.cases(&rng)) {
      if (!fc.differentiable) continue;
      SCOPED_TRACE(fc.name);
      const std::vector<HostTensor> y = forward.reference(fc.inputs, fc.attrs);
      const HostTensor dy{y[0].shape, ref::RandomUniform(&rng, y[0].values.size(), -1, 1)};
      const std::vector<HostTensor> in = def.gradient.inputs(fc.inputs, y, dy, fc.attrs);
      OpCase gc;  // what the forward's case decides for the gradient's
      gc.attrs = fc.attrs;
      if (def.gradient.adjust != nullptr) def.gradient.adjust(fc, &gc);
      const std::vector<double> got = def.reference(in, gc.attrs)[0].values;
      const int wrt = def.gradient.wrt;
      const auto loss = [&](const std::vector<double>& v) {
        std::vector<HostTensor> x = fc.inputs;
        x[wrt].values = v;
        return ref::Dot(forward.reference(x, fc.attrs)[0].values, dy.values);
      };
      const std::vector<double> want =
          ref::NumericalGradient(loss, fc.inputs[wrt].values, def.gradient.step);
      ASSERT_EQ(got.size(), want.size());
      const double atol = 1e-5 * std::sqrt(static_cast<double>(fc.terms));
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::abs(got[i] - want[i]), atol + 1e-4 * std::abs(want[i]))
            << "element " << i << ": " << got[i] << " against " << want[i];
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace ops
}  // namespace psc
