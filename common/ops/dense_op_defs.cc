// The dense ops' definitions (their kernels: compute/dense_ops.h and each
// backend's *_dense_kernels.cc).
#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/compute/dense_ops.h"
#include "common/compute/reference/reference_ops.h"
#include "common/ops/host_tensors.h"
#include "common/ops/op_def.h"

namespace psc {
namespace ops {
namespace {

namespace ref = ::psc::compute::reference;
namespace dn = ::psc::compute::dense;
using compute::ShapeSize;
using compute::ShapeText;

// x [N,K] or [N,H,W,C]: N and K.
absl::Status Flatten(const char* op, const Shape& x, int64_t* n, int64_t* k) {
  if (x.size() < 2) {
    return Refuse(op, absl::StrCat("x has shape ", ShapeText(x), ", want [N,K] or [N,H,W,C]"));
  }
  *n = x[0];
  *k = x[0] == 0 ? 0 : ShapeSize(x) / x[0];
  return absl::OkStatus();
}

// w [K,M] taking k inputs: M.
absl::StatusOr<int64_t> Outputs(const char* op, const Shape& w, int64_t k) {
  if (w.size() != 2 || w[0] != k) {
    return Refuse(op, absl::StrCat("kernel ", ShapeText(w), " does not take ", k, " inputs"));
  }
  return w[1];
}

// x, w [K,M] and b [M] (or absent: an empty shape): y [N,M].
absl::StatusOr<std::vector<Shape>> DenseShapes(absl::Span<const Shape> in, const OpAttrs&) {
  int64_t n = 0, k = 0;
  if (absl::Status s = Flatten(dn::kDense, in[0], &n, &k); !s.ok()) return s;
  absl::StatusOr<int64_t> m = Outputs(dn::kDense, in[1], k);
  if (!m.ok()) return m.status();
  if (!in[2].empty() && in[2] != Shape{*m}) {
    return Refuse(dn::kDense, absl::StrCat("b has shape ", ShapeText(in[2]), ", want [", *m,
                                           "] for kernel ", ShapeText(in[1])));
  }
  return std::vector<Shape>{{n, *m}};
}

// dy [N,M] and w [K,M]: dx [N,K] (a case may hold it as x's shape).
absl::StatusOr<std::vector<Shape>> DataShapes(absl::Span<const Shape> in, const OpAttrs&) {
  const Shape &dy = in[0], &w = in[1];
  if (w.size() != 2 || dy.size() != 2 || dy[1] != w[1]) {
    return Refuse(dn::kDenseBackwardData,
                  absl::StrCat("dy has shape ", ShapeText(dy), " and kernel ", ShapeText(w),
                               ", want [N,M] and [K,M]"));
  }
  return std::vector<Shape>{{dy[0], w[0]}};
}

// x [N,...] and dy [N,M]: dw [K,M], db [M].
absl::StatusOr<std::vector<Shape>> WeightShapes(absl::Span<const Shape> in, const OpAttrs&) {
  int64_t n = 0, k = 0;
  if (absl::Status s = Flatten(dn::kDenseBackwardWeights, in[0], &n, &k); !s.ok()) return s;
  const Shape& dy = in[1];
  if (dy.size() != 2 || dy[0] != n) {
    return Refuse(dn::kDenseBackwardWeights,
                  absl::StrCat("dy has shape ", ShapeText(dy), ", want [", n, ",M]"));
  }
  return std::vector<Shape>{{k, dy[1]}, {dy[1]}};
}

std::vector<HostTensor> DenseReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  int64_t n = 0, k = 0;
  (void)Flatten(dn::kDense, in[0].shape, &n, &k);
  const int64_t m = in[1].shape[1];
  return {HostTensor{
      {n, m},
      ref::Dense(in[0].values, Int(n), Int(k), in[1].values, in[2].values, Int(m), a.relu)}};
}

std::vector<HostTensor> DataReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  const int64_t n = in[0].shape[0], m = in[0].shape[1], k = in[1].shape[0];
  return {HostTensor{{n, k},
                     ref::DenseBackwardData(in[0].values, Int(n), Int(m), in[1].values, Int(k))}};
}

std::vector<HostTensor> WeightReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  int64_t n = 0, k = 0;
  (void)Flatten(dn::kDenseBackwardWeights, in[0].shape, &n, &k);
  const int64_t m = in[1].shape[1];
  ref::WeightGrads g =
      ref::DenseBackwardWeights(in[0].values, Int(n), Int(k), in[1].values, Int(m));
  return {HostTensor{{k, m}, std::move(g.dw)}, HostTensor{{m}, std::move(g.db)}};
}

struct DenseShape {
  int n, h, w, c, m;
  bool flat;
  Shape x() const { return flat ? Shape{n, int64_t{h} * w * c} : Shape{n, h, w, c}; }
  int64_t k() const { return int64_t{h} * w * c; }
};

// Odd K and M, flat and 4-D inputs, one unit, one input; then random ones;
// then seed_cnn's two dense layers at batch 4.
std::vector<DenseShape> DenseShapeCases() {
  std::vector<DenseShape> shapes = {{1, 1, 1, 1, 1, true},   {3, 1, 1, 7, 5, true},
                                    {2, 3, 3, 5, 9, false},  {5, 1, 1, 17, 1, true},
                                    {4, 2, 3, 3, 13, false}, {1, 1, 1, 33, 31, true}};
  std::mt19937 rng(1003);
  auto draw = [&rng](int lo, int hi) {
    return lo + static_cast<int>(rng() % static_cast<uint32_t>(hi - lo + 1));
  };
  for (int i = 0; i < 4; ++i) {
    const bool flat = draw(0, 1) == 1;
    shapes.push_back({draw(1, 5), draw(1, 3), draw(1, 3), draw(1, 17), draw(1, 17), flat});
  }
  shapes.push_back({4, 3, 3, 128, 128, false});
  shapes.push_back({4, 1, 1, 128, 10, true});
  return shapes;
}

// With a bias and no ReLU (differentiable), with a ReLU (whose kink the
// backward ops, given the gradient after it, do not see), without a bias.
std::vector<OpCase> DenseCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const DenseShape& d : DenseShapeCases()) {
    for (int variant = 0; variant < 3; ++variant) {
      const bool relu = variant == 1, bias = variant != 2;
      OpCase c;
      c.name = absl::StrCat("x ", ShapeText(d.x()), " -> ", d.m, relu ? " relu" : "",
                            bias ? "" : " no bias");
      c.attrs.relu = relu;
      c.inputs = {RandomTensor(rng, d.x()), RandomTensor(rng, {d.k(), d.m}),
                  bias ? RandomTensor(rng, {d.m}) : HostTensor{}};
      if (!bias) c.absent_inputs = 0b100;
      // y sums K products and a bias; the backward ops' outputs M or N.
      c.terms = std::max<int64_t>({d.k() + 1, d.m, d.n});
      // Central differences cost two forward passes per weight: not on
      // seed_cnn's layers.
      c.differentiable = !relu && d.k() * d.m <= 4096;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::vector<HostTensor> DataInputs(absl::Span<const HostTensor> in, absl::Span<const HostTensor>,
                                   const HostTensor& dy, const OpAttrs&) {
  return {dy, in[1]};
}
// dx has x's shape, [N,K] or [N,H,W,C].
void DataOutputShape(const OpCase& forward, OpCase* c) {
  c->output_shapes = {forward.inputs[0].shape};
}

std::vector<HostTensor> WeightInputs(absl::Span<const HostTensor> in, absl::Span<const HostTensor>,
                                     const HostTensor& dy, const OpAttrs&) {
  return {in[0], dy};
}
// No bias, no bias gradient.
void WeightOutputs(const OpCase& forward, OpCase* c) {
  if (forward.absent_inputs & 0b100) c->absent_outputs = 0b10;
}

}  // namespace

std::vector<OpDef> DenseOpDefs() {
  OpDef dense = Define(dn::kDense, 3, 1, DenseShapes, DenseReference);
  dense.cases = DenseCases;
  OpDef data = Define(dn::kDenseBackwardData, 2, 1, DataShapes, DataReference);
  data.gradient = {dn::kDense, 0, DataInputs, /*exact=*/false, 1e-3, DataOutputShape};
  OpDef weights = Define(dn::kDenseBackwardWeights, 2, 2, WeightShapes, WeightReference);
  weights.gradient = {dn::kDense, 1, WeightInputs, /*exact=*/false, 1e-3, WeightOutputs};
  return {dense, data, weights};
}

}  // namespace ops
}  // namespace psc
