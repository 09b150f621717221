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

// The rows of x that a kernel of k inputs takes: x's trailing axes whose
// product is k are contracted (all of them after the batch: a flattened
// [N,H,W,C] or an [N,K]; the last: Dense on a sequence's steps; the last
// two: EinsumDense's "abcd,cde->abe"), the leading ones are the rows,
// `lead` (with the batch) and their count *n.
absl::Status Rows(const char* op, const Shape& x, const Shape& w, Shape* lead, int64_t* n) {
  const int64_t k = w.empty() ? 0 : w[0];
  if (x.size() >= 2 && k >= 1) {
    int64_t tail = 1;
    for (size_t d = x.size(); d-- > 1;) {
      tail *= x[d];
      if (tail == k) {
        lead->assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(d));
        *n = ShapeSize(*lead);
        return absl::OkStatus();
      }
      if (tail > k) break;
    }
  }
  return Refuse(op, absl::StrCat("x has shape ", ShapeText(x), ", whose trailing axes hold no ", k,
                                 " inputs of kernel ", ShapeText(w)));
}

// lead with one more axis of m.
Shape With(Shape lead, int64_t m) {
  lead.push_back(m);
  return lead;
}

// x, w [K,M] and b [M] (or absent: an empty shape): y, x's rows of M.
absl::StatusOr<std::vector<Shape>> DenseShapes(absl::Span<const Shape> in, const OpAttrs&) {
  if (in[1].size() != 2) {
    return Refuse(dn::kDense, absl::StrCat("kernel ", ShapeText(in[1]), ", want [K,M]"));
  }
  Shape lead;
  int64_t n = 0;
  if (absl::Status s = Rows(dn::kDense, in[0], in[1], &lead, &n); !s.ok()) return s;
  const int64_t m = in[1][1];
  if (!in[2].empty() && in[2] != Shape{m}) {
    return Refuse(dn::kDense, absl::StrCat("b has shape ", ShapeText(in[2]), ", want [", m,
                                           "] for kernel ", ShapeText(in[1])));
  }
  return std::vector<Shape>{With(lead, m)};
}

// dy [..,M] and w [K,M]: dx [..,K] (a case may hold it as x's shape).
absl::StatusOr<std::vector<Shape>> DataShapes(absl::Span<const Shape> in, const OpAttrs&) {
  const Shape &dy = in[0], &w = in[1];
  if (w.size() != 2 || dy.size() < 2 || dy.back() != w[1]) {
    return Refuse(dn::kDenseBackwardData,
                  absl::StrCat("dy has shape ", ShapeText(dy), " and kernel ", ShapeText(w),
                               ", want [N,..,M] and [K,M]"));
  }
  return std::vector<Shape>{With(Shape(dy.begin(), dy.end() - 1), w[0])};
}

// x and dy [..,M], of the same rows: dw [K,M], db [M].
absl::StatusOr<std::vector<Shape>> WeightShapes(absl::Span<const Shape> in, const OpAttrs&) {
  const Shape &x = in[0], &dy = in[1];
  const int64_t rows = dy.size() < 2 ? 0 : ShapeSize(dy) / dy.back();
  if (rows < 1 || x.size() < 2 || x[0] != dy[0] || ShapeSize(x) % rows != 0) {
    return Refuse(dn::kDenseBackwardWeights, absl::StrCat("x has shape ", ShapeText(x), " and dy ",
                                                          ShapeText(dy), ", want the same rows"));
  }
  return std::vector<Shape>{{ShapeSize(x) / rows, dy.back()}, {dy.back()}};
}

std::vector<HostTensor> DenseReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const int64_t k = in[1].shape[0], m = in[1].shape[1];
  Shape lead;
  int64_t n = 0;
  (void)Rows(dn::kDense, in[0].shape, in[1].shape, &lead, &n);
  return {HostTensor{With(lead, m), ref::Dense(in[0].values, Int(n), Int(k), in[1].values,
                                               in[2].values, Int(m), a.relu)}};
}

std::vector<HostTensor> DataReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  const Shape& dy = in[0].shape;
  const int64_t m = dy.back(), n = ShapeSize(dy) / m, k = in[1].shape[0];
  return {HostTensor{With(Shape(dy.begin(), dy.end() - 1), k),
                     ref::DenseBackwardData(in[0].values, Int(n), Int(m), in[1].values, Int(k))}};
}

std::vector<HostTensor> WeightReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  const int64_t m = in[1].shape.back(), n = ShapeSize(in[1].shape) / m;
  const int64_t k = ShapeSize(in[0].shape) / n;
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
  // On a sequence's steps (x [N,1,L,K], as the executor holds an (L, K)
  // example) and over EinsumDense's two contracted axes (x [N,L,H,D], K =
  // H x D): rows of the batch's steps.
  struct Steps {
    Shape x;
    int64_t k, m;
  };
  for (const Steps& q : {Steps{{2, 1, 5, 3}, 3, 4}, Steps{{3, 1, 7, 16}, 16, 9},
                         Steps{{2, 4, 3, 5}, 15, 6}, Steps{{2, 6, 8}, 8, 5}}) {
    for (const bool bias : {true, false}) {
      OpCase c;
      c.name = absl::StrCat("x ", ShapeText(q.x), " over its last ", q.k, " -> ", q.m,
                            bias ? "" : " no bias");
      c.inputs = {RandomTensor(rng, q.x), RandomTensor(rng, {q.k, q.m}),
                  bias ? RandomTensor(rng, {q.m}) : HostTensor{}};
      if (!bias) c.absent_inputs = 0b100;
      c.terms = std::max<int64_t>({q.k + 1, q.m, ShapeSize(q.x) / q.k});
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
  dense.float32_inputs = 0b110;  // w, b
  dense.cases = DenseCases;
  OpDef data = Define(dn::kDenseBackwardData, 2, 1, DataShapes, DataReference);
  data.float32_inputs = 0b10;  // w
  data.gradient = {dn::kDense, 0, DataInputs, /*exact=*/false, 1e-3, DataOutputShape};
  OpDef weights = Define(dn::kDenseBackwardWeights, 2, 2, WeightShapes, WeightReference);
  weights.float32_outputs = 0b11;  // dw, db
  weights.gradient = {dn::kDense, 1, WeightInputs, /*exact=*/false, 1e-3, WeightOutputs};
  return {dense, data, weights};
}

}  // namespace ops
}  // namespace psc
