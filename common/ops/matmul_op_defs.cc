// The batched matrix product's definition (its kernels: compute/matmul_ops.h
// and each backend's *_matmul_kernels.cc). Its gradients are the same op
// with other transposes (the executor's Dot), checked against central
// differences through the Keras graph tests. Dot(normalize=True)'s
// L2Normalize and its gradient, checked against central differences here.
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/compute/matmul_ops.h"
#include "common/ops/host_tensors.h"
#include "common/ops/op_def.h"

namespace psc {
namespace ops {
namespace matmul_defs {  // a unity build shares the op files' namespace
namespace {

namespace mm = ::psc::compute::matmul;
using compute::ShapeSize;
using compute::ShapeText;

// a and b of batch x M x K and batch x K x N values: y [batch, M, N].
absl::StatusOr<std::vector<Shape>> Shapes(absl::Span<const Shape> in, const OpAttrs& attrs) {
  const OpAttrs::MatMul& m = attrs.matmul;
  const Shape &a = in[0], &b = in[1];
  if (a.empty() || a[0] < 1 || m.m < 1 || m.k < 1 || m.n < 1) {
    return Refuse(mm::kBatchMatMul, absl::StrCat("a has shape ", ShapeText(a), " for M ", m.m,
                                                 ", K ", m.k, ", N ", m.n));
  }
  // Whole matrices per example: batch of them in all.
  const int64_t batch = ShapeSize(a) % (m.m * m.k) == 0 ? ShapeSize(a) / (m.m * m.k) : 0;
  if (batch < a[0] || batch % a[0] != 0) {
    return Refuse(mm::kBatchMatMul, absl::StrCat("a has shape ", ShapeText(a), ", want ", a[0],
                                                 " examples of ", m.m, "x", m.k, " matrices"));
  }
  if (b.empty() || b[0] != a[0] || ShapeSize(b) != batch * m.k * m.n) {
    return Refuse(mm::kBatchMatMul,
                  absl::StrCat("b has shape ", ShapeText(b), ", want ", batch, "x", m.k, "x", m.n));
  }
  if (batch == a[0]) return std::vector<Shape>{{batch, m.m, m.n}};
  return std::vector<Shape>{{a[0], batch / a[0], m.m, m.n}};
}

std::vector<HostTensor> Reference(absl::Span<const HostTensor> in, const OpAttrs& attrs) {
  const OpAttrs::MatMul& m = attrs.matmul;
  const HostTensor &a = in[0], &b = in[1];
  const int64_t batch = ShapeSize(a.shape) / (m.m * m.k);
  HostTensor y{batch == a.shape[0] ? Shape{batch, m.m, m.n}
                                   : Shape{a.shape[0], batch / a.shape[0], m.m, m.n},
               std::vector<double>(batch * m.m * m.n, 0.0)};
  for (int64_t e = 0; e < batch; ++e) {
    const double* ae = a.values.data() + e * m.m * m.k;
    const double* be = b.values.data() + e * m.k * m.n;
    for (int64_t i = 0; i < m.m; ++i) {
      for (int64_t j = 0; j < m.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < m.k; ++l) {
          const double av = m.transpose_a ? ae[l * m.m + i] : ae[i * m.k + l];
          const double bv = m.transpose_b ? be[j * m.k + l] : be[l * m.n + j];
          sum += av * bv;
        }
        y.values[(e * m.m + i) * m.n + j] = sum;
      }
    }
  }
  return {y};
}

// Every transpose pair on odd shapes; a row-vector dot (Keras's Dot of two
// [B,K] inputs: M = N = 1); the DLRM interaction of 27 vectors of 16
// (x·xᵀ) and its gradients' forms.
std::vector<OpCase> Cases(std::mt19937* rng) {
  struct Shape4 {
    int64_t batch, m, k, n;
  };
  const Shape4 shapes[] = {
      {1, 1, 1, 1}, {2, 3, 5, 4}, {3, 1, 7, 1}, {2, 27, 16, 27}, {1, 9, 2, 13}};
  std::vector<OpCase> cases;
  for (const Shape4& s : shapes) {
    for (int t = 0; t < 4; ++t) {
      OpCase c;
      c.attrs.matmul = {s.m, s.k, s.n, (t & 1) != 0, (t & 2) != 0};
      c.name = absl::StrCat(s.batch, " x [", s.m, ",", s.k, "]", (t & 1) ? "ᵀ" : "", " · [", s.k,
                            ",", s.n, "]", (t & 2) ? "ᵀ" : "");
      const Shape a = (t & 1) ? Shape{s.batch, s.k, s.m} : Shape{s.batch, s.m, s.k};
      const Shape b = (t & 2) ? Shape{s.batch, s.n, s.k} : Shape{s.batch, s.k, s.n};
      c.inputs = {RandomTensor(rng, a), RandomTensor(rng, b)};
      c.terms = s.k;
      cases.push_back(std::move(c));
    }
  }
  // Several matrices per example: MultiHeadAttention's scores and context,
  // 2 examples of 3 heads.
  for (int t = 0; t < 4; ++t) {
    const int64_t heads = 3, m = 4, k = 5, n = 6;
    OpCase c;
    c.attrs.matmul = {m, k, n, (t & 1) != 0, (t & 2) != 0};
    c.name =
        absl::StrCat("2 x 3 heads x [4,5]", (t & 1) ? "ᵀ" : "", " · [5,6]", (t & 2) ? "ᵀ" : "");
    const Shape a = (t & 1) ? Shape{2, heads, k, m} : Shape{2, heads, m, k};
    const Shape b = (t & 2) ? Shape{2, heads, n, k} : Shape{2, heads, k, n};
    c.inputs = {RandomTensor(rng, a), RandomTensor(rng, b)};
    c.terms = k;
    cases.push_back(std::move(c));
  }
  return cases;
}

// x of batch x M x K values (attrs.matmul's m and k): y of x's shape; with
// a second input (dy), of that shape too.
template <const char* kOp>
absl::StatusOr<std::vector<Shape>> NormalizeShapes(absl::Span<const Shape> in,
                                                   const OpAttrs& attrs) {
  const OpAttrs::MatMul& m = attrs.matmul;
  const Shape& x = in[0];
  if (x.empty() || x[0] < 1 || m.m < 1 || m.k < 1 || ShapeSize(x) != x[0] * m.m * m.k ||
      !(attrs.epsilon > 0)) {
    return Refuse(kOp, absl::StrCat("x has shape ", ShapeText(x), " for M ", m.m, ", K ", m.k));
  }
  if (in.size() == 2 && in[1] != x) {
    return Refuse(kOp, absl::StrCat("dy has shape ", ShapeText(in[1]), ", want ", ShapeText(x)));
  }
  return std::vector<Shape>{x};
}

// Element j of vector v of x (normalize_math.h's layout).
int64_t NormalizeAt(const OpAttrs& attrs, int64_t v, int64_t j) {
  const OpAttrs::MatMul& m = attrs.matmul;
  const int64_t example = v / m.m, i = v % m.m;
  return example * m.m * m.k + (m.transpose_a ? j * m.m + i : i * m.k + j);
}

// In double: y = x * min(1 / |x|, 1 / epsilon); dx = s dy - s^3 x (x . dy),
// or s dy where the cap holds.
std::vector<HostTensor> NormalizeReference(absl::Span<const HostTensor> in, const OpAttrs& attrs) {
  const HostTensor& x = in[0];
  const bool gradient = in.size() == 2;
  const int64_t vectors = x.shape[0] * attrs.matmul.m, k = attrs.matmul.k;
  HostTensor y{x.shape, std::vector<double>(x.values.size(), 0.0)};
  for (int64_t v = 0; v < vectors; ++v) {
    double sum = 0, dot = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t at = NormalizeAt(attrs, v, j);
      sum += x.values[at] * x.values[at];
      if (gradient) dot += x.values[at] * in[1].values[at];
    }
    const double cap = 1.0 / attrs.epsilon, inv = 1.0 / std::sqrt(sum);
    const bool capped = !(inv < cap);
    const double scale = capped ? cap : inv;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t at = NormalizeAt(attrs, v, j);
      y.values[at] = !gradient ? x.values[at] * scale
                               : scale * in[1].values[at] -
                                     (capped ? 0.0 : scale * scale * scale * dot * x.values[at]);
    }
  }
  return {y};
}

// A Dot's operands as the layer makes them: [B,K] vectors, the DLRM stack
// [B,27,16] along its last axis, a transposed operand (Dot over axis 1 of
// [B,K,M]), one element per vector; and a zero vector, whose scale the cap
// bounds.
std::vector<OpCase> NormalizeCases(std::mt19937* rng) {
  struct Geometry {
    int64_t batch, m, k;
    bool transposed;
  };
  const Geometry shapes[] = {
      {3, 1, 7, false}, {2, 27, 16, false}, {2, 3, 5, true}, {4, 2, 1, false}, {1, 1, 1, false}};
  std::vector<OpCase> cases;
  for (const Geometry& g : shapes) {
    OpCase c;
    c.attrs.matmul = {g.m, g.k, 1, g.transposed, false};
    c.attrs.epsilon = mm::kNormalizeEpsilon;
    c.name = absl::StrCat(g.batch, " x ", g.transposed ? "[K,M]" : "[M,K]", " M ", g.m, " K ", g.k);
    c.inputs = {
        RandomTensor(rng, g.transposed ? Shape{g.batch, g.k, g.m} : Shape{g.batch, g.m, g.k})};
    c.terms = g.k;
    cases.push_back(std::move(c));
  }
  OpCase zero;
  zero.attrs.matmul = {2, 3, 1, false, false};
  zero.attrs.epsilon = mm::kNormalizeEpsilon;
  zero.name = "a zero vector beside another";
  zero.inputs = {HostTensor{{1, 2, 3}, {0, 0, 0, 0.5, -0.25, 1}}};
  zero.terms = 3;
  zero.differentiable = false;
  cases.push_back(std::move(zero));
  return cases;
}

std::vector<HostTensor> NormalizeGradientInputs(absl::Span<const HostTensor> in,
                                                absl::Span<const HostTensor>, const HostTensor& dy,
                                                const OpAttrs&) {
  return {in[0], dy};
}

}  // namespace
}  // namespace matmul_defs

std::vector<OpDef> MatMulOpDefs() {
  namespace mm = ::psc::compute::matmul;
  OpDef op = Define(mm::kBatchMatMul, 2, 1, matmul_defs::Shapes, matmul_defs::Reference);
  op.cases = matmul_defs::Cases;
  OpDef normalize = Define(mm::kL2Normalize, 1, 1, matmul_defs::NormalizeShapes<mm::kL2Normalize>,
                           matmul_defs::NormalizeReference);
  normalize.cases = matmul_defs::NormalizeCases;
  OpDef gradient =
      Define(mm::kL2NormalizeGradient, 2, 1, matmul_defs::NormalizeShapes<mm::kL2NormalizeGradient>,
             matmul_defs::NormalizeReference);
  gradient.gradient = {mm::kL2Normalize, 0,    matmul_defs::NormalizeGradientInputs,
                       /*exact=*/false,  1e-3, nullptr};
  return {op, normalize, gradient};
}

}  // namespace ops
}  // namespace psc
