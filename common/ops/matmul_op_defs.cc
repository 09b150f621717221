// The batched matrix product's definition (its kernels: compute/matmul_ops.h
// and each backend's *_matmul_kernels.cc). Its gradients are the same op
// with other transposes (the executor's Dot), checked against central
// differences through the Keras graph tests.
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
  const int64_t batch = a[0];
  if (ShapeSize(a) != batch * m.m * m.k) {
    return Refuse(mm::kBatchMatMul,
                  absl::StrCat("a has shape ", ShapeText(a), ", want ", batch, "x", m.m, "x", m.k));
  }
  if (b.empty() || b[0] != batch || ShapeSize(b) != batch * m.k * m.n) {
    return Refuse(mm::kBatchMatMul,
                  absl::StrCat("b has shape ", ShapeText(b), ", want ", batch, "x", m.k, "x", m.n));
  }
  return std::vector<Shape>{{batch, m.m, m.n}};
}

std::vector<HostTensor> Reference(absl::Span<const HostTensor> in, const OpAttrs& attrs) {
  const OpAttrs::MatMul& m = attrs.matmul;
  const HostTensor &a = in[0], &b = in[1];
  const int64_t batch = a.shape[0];
  HostTensor y{{batch, m.m, m.n}, std::vector<double>(batch * m.m * m.n, 0.0)};
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
  return cases;
}

}  // namespace
}  // namespace matmul_defs

std::vector<OpDef> MatMulOpDefs() {
  namespace mm = ::psc::compute::matmul;
  OpDef op = Define(mm::kBatchMatMul, 2, 1, matmul_defs::Shapes, matmul_defs::Reference);
  op.cases = matmul_defs::Cases;
  return {op};
}

}  // namespace ops
}  // namespace psc
