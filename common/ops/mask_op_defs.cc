// The mask ops' definitions (their kernels: compute/mask_ops.h and each
// backend's *_mask_kernels.cc).
#include "absl/strings/str_cat.h"
#include "common/compute/mask_ops.h"
#include "common/compute/reference/reference_ops.h"
#include "common/ops/host_tensors.h"
#include "common/ops/op_def.h"

namespace psc {
namespace ops {
namespace mask_defs {  // a unity build shares the op files' namespace
namespace {

namespace ref = ::psc::compute::reference;
namespace mask = ::psc::compute::mask;
using compute::ShapeSize;
using compute::ShapeText;

// x in rows of row_size: m, x's shape without its last axis (its own
// shape for rows of one: the ids of an Embedding).
absl::StatusOr<std::vector<Shape>> SequenceMaskShapes(absl::Span<const Shape> in,
                                                      const OpAttrs& a) {
  const Shape& x = in[0];
  if (a.row_size == 1 && !x.empty()) return std::vector<Shape>{x};
  if (x.size() < 2 || x.back() != a.row_size || a.row_size < 1) {
    return Refuse(mask::kSequenceMask,
                  absl::StrCat("x has shape ", ShapeText(x), ", not rows of ", a.row_size));
  }
  return std::vector<Shape>{Shape(x.begin(), x.end() - 1)};
}

std::vector<HostTensor> SequenceMaskReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  Shape m = a.row_size == 1 ? in[0].shape : Shape(in[0].shape.begin(), in[0].shape.end() - 1);
  return {HostTensor{m, ref::SequenceMask(in[0].values, a.row_size, a.scalar)}};
}

// Random values with some rows all `value` (masked), at least one kept.
HostTensor WithMaskedRows(std::mt19937* rng, const Shape& shape, int64_t cols, float value) {
  HostTensor x = RandomTensor(rng, shape, -2, 2);
  const int64_t rows = ShapeSize(shape) / cols;
  for (int64_t r = 1; r < rows; r += 2 + r % 3) {
    for (int64_t c = 0; c < cols; ++c) x.values[r * cols + c] = value;
  }
  if (cols > 1) x.values[cols] = value;  // row 1 only partly: kept
  return x;
}

// Masking's (steps, features) example held [N,1,T,C], an Embedding's ids
// [N, T], one feature, another mask value.
std::vector<OpCase> SequenceMaskCases(std::mt19937* rng) {
  struct Case {
    Shape x;
    int64_t cols;
    float value;
  };
  std::vector<OpCase> cases;
  for (const Case& k : {Case{{2, 1, 6, 3}, 3, 0.0f}, Case{{3, 7}, 1, 0.0f},
                        Case{{2, 5, 1}, 1, -1.0f}, Case{{4, 9, 5}, 5, 0.5f}}) {
    OpCase c;
    c.name = absl::StrCat("x ", ShapeText(k.x), " rows of ", k.cols, " value ", k.value);
    c.attrs.row_size = k.cols;
    c.attrs.scalar = k.value;
    c.inputs = {WithMaskedRows(rng, k.x, k.cols, k.value)};
    c.exact = true;
    c.differentiable = false;
    cases.push_back(std::move(c));
  }
  return cases;
}

// m, a, b (either absent, not both): y of a's (b's) shape.
absl::StatusOr<std::vector<Shape>> SelectRowsShapes(absl::Span<const Shape> in, const OpAttrs&) {
  const Shape& y = in[1].empty() ? in[2] : in[1];
  const int64_t rows = ShapeSize(in[0]);
  if (y.empty() || (!in[1].empty() && !in[2].empty() && in[1] != in[2]) || rows < 1 ||
      ShapeSize(y) % rows != 0) {
    return Refuse(mask::kSelectRows,
                  absl::StrCat("a ", ShapeText(in[1]), ", b ", ShapeText(in[2]), " and m ",
                               ShapeText(in[0]), ": want a or b, of one shape, in m's rows"));
  }
  return std::vector<Shape>{y};
}

std::vector<HostTensor> SelectRowsReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  const Shape& y = in[1].values.empty() ? in[2].shape : in[1].shape;
  return {HostTensor{y, ref::SelectRows(in[1].values, in[2].values, in[0].values)}};
}

// A mask of 0 and 1 over `shape`, at least one 1 in each example (row of
// the first axis).
HostTensor RandomMask(std::mt19937* rng, const Shape& shape) {
  HostTensor m{shape, std::vector<double>(ShapeSize(shape))};
  std::bernoulli_distribution keep(0.6);
  for (double& v : m.values) v = keep(*rng) ? 1.0 : 0.0;
  const int64_t per = ShapeSize(shape) / shape[0];
  for (int64_t n = 0; n < shape[0]; ++n) m.values[n * per + (n % per)] = 1.0;
  return m;
}

// A recurrent state's [N, U] rows, a sequence held [N,1,T,C] in [N, T]
// rows; with a or b absent.
std::vector<OpCase> SelectRowsCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const auto& [y, m] :
       {std::pair<Shape, Shape>{{4, 6}, {4}}, {{2, 1, 5, 3}, {2, 5}}, {{3, 8, 16}, {3, 8}}}) {
    for (int variant = 0; variant < 3; ++variant) {  // both, no b, no a
      OpCase c;
      c.name = absl::StrCat("y ", ShapeText(y), " m ", ShapeText(m),
                            variant == 0   ? ""
                            : variant == 1 ? " no b"
                                           : " no a");
      c.inputs = {RandomMask(rng, m), variant == 2 ? HostTensor{} : RandomTensor(rng, y),
                  variant == 1 ? HostTensor{} : RandomTensor(rng, y)};
      c.absent_inputs = variant == 0 ? 0 : variant == 1 ? 0b100 : 0b010;
      c.exact = true;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// x [N, T, C], m [N, T]: y [N, C].
absl::StatusOr<std::vector<Shape>> MaskedMeanShapes(absl::Span<const Shape> in, const OpAttrs&) {
  const Shape &x = in[0], &m = in[1];
  if (x.size() != 3 || m != Shape{x[0], x[1]}) {
    return Refuse(mask::kMaskedMean, absl::StrCat("x ", ShapeText(x), " and m ", ShapeText(m),
                                                  ", want [N, T, C] and [N, T]"));
  }
  return std::vector<Shape>{{x[0], x[2]}};
}

std::vector<HostTensor> MaskedMeanReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  const Shape& x = in[0].shape;
  return {HostTensor{{x[0], x[2]}, ref::MaskedMean(in[0].values, in[1].values, x[0], x[1], x[2])}};
}

// dy [N, C], m [N, T]: dx [N, T, C].
absl::StatusOr<std::vector<Shape>> MaskedMeanBackwardShapes(absl::Span<const Shape> in,
                                                            const OpAttrs&) {
  const Shape &dy = in[0], &m = in[1];
  if (dy.size() != 2 || m.size() != 2 || m[0] != dy[0]) {
    return Refuse(
        mask::kMaskedMeanBackward,
        absl::StrCat("dy ", ShapeText(dy), " and m ", ShapeText(m), ", want [N, C] and [N, T]"));
  }
  return std::vector<Shape>{{dy[0], m[1], dy[1]}};
}

std::vector<HostTensor> MaskedMeanBackwardReference(absl::Span<const HostTensor> in,
                                                    const OpAttrs&) {
  const Shape &dy = in[0].shape, &m = in[1].shape;
  return {HostTensor{{dy[0], m[1], dy[1]},
                     ref::MaskedMeanBackward(in[0].values, in[1].values, dy[0], m[1], dy[1])}};
}

// One step, a Transformer's pooled sequence, one channel.
std::vector<OpCase> MaskedMeanCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const Shape& x : {Shape{2, 1, 3}, Shape{3, 7, 4}, Shape{4, 32, 16}, Shape{5, 6, 1}}) {
    OpCase c;
    c.name = absl::StrCat("x ", ShapeText(x));
    c.inputs = {RandomTensor(rng, x), RandomMask(rng, {x[0], x[1]})};
    c.terms = x[1];
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<HostTensor> MaskedMeanBackwardInputs(absl::Span<const HostTensor> in,
                                                 absl::Span<const HostTensor>, const HostTensor& dy,
                                                 const OpAttrs&) {
  return {dy, in[1]};
}

}  // namespace
}  // namespace mask_defs

std::vector<OpDef> MaskOpDefs() {
  namespace d = mask_defs;
  namespace mask = compute::mask;
  OpDef sequence =
      Define(mask::kSequenceMask, 1, 1, d::SequenceMaskShapes, d::SequenceMaskReference);
  sequence.cases = d::SequenceMaskCases;
  OpDef select = Define(mask::kSelectRows, 3, 1, d::SelectRowsShapes, d::SelectRowsReference);
  select.cases = d::SelectRowsCases;
  OpDef mean = Define(mask::kMaskedMean, 2, 1, d::MaskedMeanShapes, d::MaskedMeanReference);
  mean.cases = d::MaskedMeanCases;
  OpDef backward = Define(mask::kMaskedMeanBackward, 2, 1, d::MaskedMeanBackwardShapes,
                          d::MaskedMeanBackwardReference);
  backward.gradient = {mask::kMaskedMean, 0, d::MaskedMeanBackwardInputs, /*exact=*/false, 1e-3};
  return {sequence, select, mean, backward};
}

}  // namespace ops
}  // namespace psc
