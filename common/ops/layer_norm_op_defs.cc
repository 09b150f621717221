// The layer normalization ops' definitions (their kernels:
// compute/layer_norm_ops.h and each backend's *_layer_norm_kernels.cc).
#include "absl/strings/str_cat.h"
#include "common/compute/layer_norm_ops.h"
#include "common/compute/reference/reference_ops.h"
#include "common/ops/host_tensors.h"
#include "common/ops/op_def.h"

namespace psc {
namespace ops {
namespace {

namespace ref = ::psc::compute::reference;
namespace ln = ::psc::compute::layer_norm;
using compute::ShapeSize;
using compute::ShapeText;

// x's rows of a.row_size values: their count, or a refusal naming `op`.
absl::StatusOr<int64_t> NormRowsOf(const char* op, const Shape& x, const OpAttrs& a) {
  const int64_t size = ShapeSize(x);
  if (a.row_size < 1 || size < 1 || size % a.row_size != 0) {
    return Refuse(op, absl::StrCat("x has shape ", ShapeText(x), ", not rows of ", a.row_size));
  }
  return size / a.row_size;
}

// gamma or beta: absent (an empty shape) or row_size values.
absl::Status NormWantRow(const char* op, const char* what, const Shape& t, const OpAttrs& a) {
  if (t.empty() || ShapeSize(t) == a.row_size) return absl::OkStatus();
  return Refuse(op,
                absl::StrCat(what, " has shape ", ShapeText(t), ", want ", a.row_size, " values"));
}

// x, gamma, beta: y, mean [rows], rstd [rows].
absl::StatusOr<std::vector<Shape>> NormForwardShapes(absl::Span<const Shape> in, const OpAttrs& a) {
  absl::StatusOr<int64_t> rows = NormRowsOf(ln::kLayerNorm, in[0], a);
  if (!rows.ok()) return rows.status();
  for (const auto& [i, what] : {std::pair{1, "gamma"}, std::pair{2, "beta"}}) {
    if (absl::Status s = NormWantRow(ln::kLayerNorm, what, in[i], a); !s.ok()) return s;
  }
  return std::vector<Shape>{in[0], {*rows}, {*rows}};
}

// x, dy, gamma, mean, rstd: dx, dgamma [row_size], dbeta [row_size].
absl::StatusOr<std::vector<Shape>> NormBackwardShapes(absl::Span<const Shape> in,
                                                      const OpAttrs& a) {
  constexpr const char* kOp = ln::kLayerNormBackward;
  absl::StatusOr<int64_t> rows = NormRowsOf(kOp, in[0], a);
  if (!rows.ok()) return rows.status();
  if (in[1] != in[0] || in[3] != Shape{*rows} || in[4] != Shape{*rows}) {
    return Refuse(kOp,
                  absl::StrCat("dy ", ShapeText(in[1]), ", mean ", ShapeText(in[3]), " and rstd ",
                               ShapeText(in[4]), " do not fit x ", ShapeText(in[0])));
  }
  if (absl::Status s = NormWantRow(kOp, "gamma", in[2], a); !s.ok()) return s;
  return std::vector<Shape>{in[0], {a.row_size}, {a.row_size}};
}

std::vector<HostTensor> NormForwardReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const int64_t rows = ShapeSize(in[0].shape) / a.row_size;
  ref::LayerNormResult r =
      ref::LayerNorm(in[0].values, rows, a.row_size, in[1].values, in[2].values, a.epsilon);
  return {HostTensor{in[0].shape, std::move(r.y)}, HostTensor{{rows}, std::move(r.mean)},
          HostTensor{{rows}, std::move(r.rstd)}};
}

std::vector<HostTensor> NormBackwardReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const int64_t rows = ShapeSize(in[0].shape) / a.row_size;
  ref::LayerNormGrads g =
      ref::LayerNormBackward(in[0].values, rows, a.row_size, in[1].values, in[2].values, a.epsilon);
  return {HostTensor{in[0].shape, std::move(g.dx)}, HostTensor{{a.row_size}, std::move(g.dgamma)},
          HostTensor{{a.row_size}, std::move(g.dbeta)}};
}

// x, dy, gamma and the forward's statistics (rounded to float, as a
// backend holds them).
std::vector<HostTensor> NormBackwardInputs(absl::Span<const HostTensor> in,
                                           absl::Span<const HostTensor> out, const HostTensor& dy,
                                           const OpAttrs&) {
  return {in[0], dy, in[1], RoundedToFloat(out[1]), RoundedToFloat(out[2])};
}

// Without gamma, none in the backward either.
void NormBackwardAbsent(const OpCase& forward, OpCase* c) {
  if (forward.absent_inputs & 0b010) c->absent_inputs = 0b100;
}

// A Transformer's rows (a sequence held [N,1,L,D]), two normalized axes,
// one row, a row of one value, Keras's epsilon and a larger one; with and
// without gamma and beta.
std::vector<OpCase> NormForwardCases(std::mt19937* rng) {
  struct Case {
    Shape x;
    int64_t cols;
    float epsilon;
  };
  std::vector<OpCase> cases;
  for (const Case& k :
       {Case{{4, 7}, 7, 1e-3f}, Case{{2, 1, 5, 16}, 16, 1e-6f}, Case{{3, 4, 6}, 24, 1e-3f},
        Case{{1, 1, 1, 3}, 3, 1e-5f}, Case{{2, 1, 64, 128}, 128, 1e-6f}, Case{{5, 1}, 1, 1e-3f}}) {
    for (int variant = 0; variant < 3; ++variant) {  // gamma and beta, neither, gamma alone
      OpCase c;
      c.name = absl::StrCat("x ", ShapeText(k.x), " rows of ", k.cols, " epsilon ", k.epsilon,
                            variant == 0   ? ""
                            : variant == 1 ? " no gamma or beta"
                                           : " no beta");
      c.attrs.epsilon = k.epsilon;
      c.attrs.row_size = k.cols;
      c.inputs = {RandomTensor(rng, k.x, -0.5, 2.0),
                  variant == 1 ? HostTensor{} : RandomTensor(rng, {k.cols}, 0.5, 1.5),
                  variant == 0 ? RandomTensor(rng, {k.cols}, -0.5, 0.5) : HostTensor{}};
      c.absent_inputs = variant == 0 ? 0 : variant == 1 ? 0b110 : 0b100;
      // Each statistic sums a row; each parameter gradient a column.
      c.terms = std::max<int64_t>(k.cols, ShapeSize(k.x) / k.cols);
      // A row of one value is its mean: y = beta, flat in x.
      c.differentiable = k.cols > 1;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

}  // namespace

std::vector<OpDef> LayerNormOpDefs() {
  OpDef forward = Define(ln::kLayerNorm, 3, 3, NormForwardShapes, NormForwardReference);
  forward.float32_inputs = 0b110;   // gamma, beta
  forward.float32_outputs = 0b110;  // mean, rstd
  forward.cases = NormForwardCases;
  OpDef backward = Define(ln::kLayerNormBackward, 5, 3, NormBackwardShapes, NormBackwardReference);
  backward.float32_inputs = 0b11100;  // gamma, mean, rstd
  backward.float32_outputs = 0b110;   // dgamma, dbeta
  backward.in_place = {1};
  // A smooth function: a step of 1e-4 keeps the central difference exact
  // to ~1e-8.
  backward.gradient = {ln::kLayerNorm,  0,    NormBackwardInputs,
                       /*exact=*/false, 1e-4, NormBackwardAbsent};
  return {forward, backward};
}

}  // namespace ops
}  // namespace psc
