// The recurrent cells' definitions (their kernels: compute/rnn_ops.h and
// each backend's *_rnn_kernels.cc).
#include "absl/strings/str_cat.h"
#include "common/compute/reference/reference_ops.h"
#include "common/compute/rnn_ops.h"
#include "common/ops/host_tensors.h"
#include "common/ops/op_def.h"

namespace psc {
namespace ops {
namespace rnn_defs {  // a unity build shares the op files' namespace
namespace {

namespace ref = ::psc::compute::reference;
namespace rnn = ::psc::compute::rnn;
using compute::ShapeText;

// z [n, 4U]: n and U, or a refusal naming `op`.
absl::Status Gates(const char* op, const Shape& z, int64_t* n, int64_t* units) {
  if (z.size() != 2 || z[0] < 1 || z[1] < 4 || z[1] % 4 != 0) {
    return Refuse(op, absl::StrCat("z has shape ", ShapeText(z), ", want [n, 4U]"));
  }
  *n = z[0];
  *units = z[1] / 4;
  return absl::OkStatus();
}

// Each of in[k] for k in `which`: absent (empty) or [n, U].
absl::Status States(const char* op, absl::Span<const Shape> in, std::initializer_list<int> which,
                    const Shape& want, uint32_t optional) {
  for (int k : which) {
    if (in[k].empty() && (optional >> k & 1)) continue;
    if (in[k] != want) {
      return Refuse(op, absl::StrCat("input ", k, " has shape ", ShapeText(in[k]), ", want ",
                                     ShapeText(want)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Shape>> CellShapes(absl::Span<const Shape> in, const OpAttrs&) {
  int64_t n = 0, u = 0;
  if (absl::Status s = Gates(rnn::kLstmCell, in[0], &n, &u); !s.ok()) return s;
  if (absl::Status s = States(rnn::kLstmCell, in, {1}, {n, u}, 0b10); !s.ok()) return s;
  return std::vector<Shape>{{n, u}, {n, u}};
}

absl::StatusOr<std::vector<Shape>> BackwardShapes(absl::Span<const Shape> in, const OpAttrs&) {
  int64_t n = 0, u = 0;
  if (absl::Status s = Gates(rnn::kLstmCellBackward, in[0], &n, &u); !s.ok()) return s;
  if (absl::Status s = States(rnn::kLstmCellBackward, in, {1, 2, 3, 4}, {n, u}, 0b10010); !s.ok()) {
    return s;
  }
  return std::vector<Shape>{in[0], {n, u}};
}

std::vector<HostTensor> CellReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  const int64_t n = in[0].shape[0], u = in[0].shape[1] / 4;
  ref::LstmResult r = ref::LstmCell(in[0].values, in[1].values, n, u);
  return {HostTensor{{n, u}, std::move(r.h)}, HostTensor{{n, u}, std::move(r.c)}};
}

// The step's c (input 2) is the forward's, which the reference computes
// again from z and c_prev.
std::vector<HostTensor> BackwardReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  const int64_t n = in[0].shape[0], u = in[0].shape[1] / 4;
  ref::LstmGrads g =
      ref::LstmCellBackward(in[0].values, in[1].values, in[3].values, in[4].values, n, u);
  return {HostTensor{in[0].shape, std::move(g.dz)}, HostTensor{{n, u}, std::move(g.dc_prev)}};
}

// One row and unit, a few rows, a Keras-sized cell; with and without c_prev
// (a layer's first step).
std::vector<OpCase> CellCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const auto& [n, u] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {4, 16}, {2, 33}}) {
    for (const bool first : {false, true}) {
      OpCase c;
      c.name = absl::StrCat("z [", n, ",", 4 * u, "]", first ? " first step" : "");
      c.inputs = {RandomTensor(rng, {n, 4 * u}, -2, 2),
                  first ? HostTensor{} : RandomTensor(rng, {n, u}, -1, 1)};
      if (first) c.absent_inputs = 0b10;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// z, c_prev, the forward's c (rounded to float, as a backend holds it),
// dh, and no dc: the gradient of h alone, which central differences check.
std::vector<HostTensor> BackwardInputs(absl::Span<const HostTensor> in,
                                       absl::Span<const HostTensor> out, const HostTensor& dy,
                                       const OpAttrs&) {
  return {in[0], in[1], RoundedToFloat(out[1]), dy, HostTensor{}};
}
void BackwardAbsent(const OpCase& forward, OpCase* c) {
  c->absent_inputs = 0b10000 | (forward.absent_inputs & 0b10);
}

// With dc too (a step before the last), the reference's other path.
std::vector<OpCase> BackwardCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const auto& [n, u] : {std::pair<int64_t, int64_t>{2, 3}, {4, 16}}) {
    OpCase c;
    c.name = absl::StrCat("z [", n, ",", 4 * u, "] with dc");
    const HostTensor z = RandomTensor(rng, {n, 4 * u}, -2, 2);
    const HostTensor c_prev = RandomTensor(rng, {n, u}, -1, 1);
    ref::LstmResult f = ref::LstmCell(z.values, c_prev.values, n, u);
    c.inputs = {z, c_prev, RoundedToFloat(HostTensor{{n, u}, std::move(f.c)}),
                RandomTensor(rng, {n, u}), RandomTensor(rng, {n, u})};
    cases.push_back(std::move(c));
  }
  return cases;
}

// ---- GRU (reset_after=True) ----

// xz [n, 3U] and hz of its shape, h_prev [n, U] or absent: h [n, U].
absl::StatusOr<std::vector<Shape>> GruShapes(absl::Span<const Shape> in, const OpAttrs&) {
  const Shape& xz = in[0];
  if (xz.size() != 2 || xz[0] < 1 || xz[1] < 3 || xz[1] % 3 != 0 || in[1] != xz) {
    return Refuse(rnn::kGruCell, absl::StrCat("xz ", ShapeText(xz), " and hz ", ShapeText(in[1]),
                                              ", want both [n, 3U]"));
  }
  const Shape h = {xz[0], xz[1] / 3};
  if (absl::Status s = States(rnn::kGruCell, in, {2}, h, 0b100); !s.ok()) return s;
  return std::vector<Shape>{h};
}

// xz, hz, h_prev, dh: dxz, dhz, dh_prev.
absl::StatusOr<std::vector<Shape>> GruBackwardShapes(absl::Span<const Shape> in, const OpAttrs&) {
  const Shape& xz = in[0];
  if (xz.size() != 2 || xz[0] < 1 || xz[1] < 3 || xz[1] % 3 != 0 || in[1] != xz) {
    return Refuse(rnn::kGruCellBackward, absl::StrCat("xz ", ShapeText(xz), " and hz ",
                                                      ShapeText(in[1]), ", want both [n, 3U]"));
  }
  const Shape h = {xz[0], xz[1] / 3};
  if (absl::Status s = States(rnn::kGruCellBackward, in, {2, 3}, h, 0b100); !s.ok()) return s;
  return std::vector<Shape>{xz, xz, h};
}

std::vector<HostTensor> GruReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  const int64_t n = in[0].shape[0], u = in[0].shape[1] / 3;
  return {HostTensor{{n, u}, ref::GruCell(in[0].values, in[1].values, in[2].values, n, u)}};
}

std::vector<HostTensor> GruBackwardReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  const int64_t n = in[0].shape[0], u = in[0].shape[1] / 3;
  ref::GruGrads g =
      ref::GruCellBackward(in[0].values, in[1].values, in[2].values, in[3].values, n, u);
  return {HostTensor{in[0].shape, std::move(g.dxz)}, HostTensor{in[0].shape, std::move(g.dhz)},
          HostTensor{{n, u}, std::move(g.dh_prev)}};
}

std::vector<OpCase> GruCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const auto& [n, u] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {4, 16}, {2, 33}}) {
    for (const bool first : {false, true}) {
      OpCase c;
      c.name = absl::StrCat("xz [", n, ",", 3 * u, "]", first ? " first step" : "");
      c.inputs = {RandomTensor(rng, {n, 3 * u}, -2, 2), RandomTensor(rng, {n, 3 * u}, -2, 2),
                  first ? HostTensor{} : RandomTensor(rng, {n, u}, -1, 1)};
      if (first) c.absent_inputs = 0b100;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::vector<HostTensor> GruBackwardInputs(absl::Span<const HostTensor> in,
                                          absl::Span<const HostTensor>, const HostTensor& dy,
                                          const OpAttrs&) {
  return {in[0], in[1], in[2], dy};
}
void GruBackwardAbsent(const OpCase& forward, OpCase* c) {
  c->absent_inputs = forward.absent_inputs & 0b100;
}

// ---- A whole LSTM layer ----

// x [n, T, C], w [C, 4U], r [U, 4U], b [4U] or absent: y [n, T, U].
absl::Status LayerInputs(const char* op, absl::Span<const Shape> in, int64_t* units) {
  const Shape &x = in[0], &w = in[1], &r = in[2], &b = in[3];
  const bool fits = x.size() == 3 && w.size() == 2 && r.size() == 2 && w[0] == x[2] && r[0] >= 1 &&
                    w[1] == 4 * r[0] && r[1] == 4 * r[0] && (b.empty() || b == Shape{4 * r[0]});
  if (!fits) {
    return Refuse(
        op, absl::StrCat("x ", ShapeText(x), ", w ", ShapeText(w), ", r ", ShapeText(r), " and b ",
                         ShapeText(b), ": want [n, T, C], [C, 4U], [U, 4U] and [4U]"));
  }
  *units = r[0];
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Shape>> LayerShapes(absl::Span<const Shape> in, const OpAttrs&) {
  int64_t u = 0;
  if (absl::Status s = LayerInputs(rnn::kLstmLayer, in, &u); !s.ok()) return s;
  return std::vector<Shape>{{in[0][0], in[0][1], u}};
}

// x, w, r, b, y, dy: dx, dw, dr, db.
absl::StatusOr<std::vector<Shape>> LayerBackwardShapes(absl::Span<const Shape> in, const OpAttrs&) {
  int64_t u = 0;
  if (absl::Status s = LayerInputs(rnn::kLstmLayerBackward, in, &u); !s.ok()) return s;
  const Shape y = {in[0][0], in[0][1], u};
  if (in[4] != y || in[5] != y) {
    return Refuse(rnn::kLstmLayerBackward, absl::StrCat("y ", ShapeText(in[4]), " and dy ",
                                                        ShapeText(in[5]), ", want ", ShapeText(y)));
  }
  return std::vector<Shape>{in[0], in[1], in[2], {4 * u}};
}

std::vector<HostTensor> LayerReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const Shape& x = in[0].shape;
  const int64_t u = in[2].shape[0];
  return {HostTensor{{x[0], x[1], u},
                     ref::LstmLayer(in[0].values, in[1].values, in[2].values, in[3].values, x[0],
                                    x[1], x[2], u, a.reverse)}};
}

std::vector<HostTensor> LayerBackwardReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const Shape& x = in[0].shape;
  const int64_t u = in[2].shape[0];
  ref::LstmLayerGrads g =
      ref::LstmLayerBackward(in[0].values, in[1].values, in[2].values, in[3].values, in[5].values,
                             x[0], x[1], x[2], u, a.reverse);
  return {HostTensor{x, std::move(g.dx)}, HostTensor{in[1].shape, std::move(g.dw)},
          HostTensor{in[2].shape, std::move(g.dr)}, HostTensor{{4 * u}, std::move(g.db)}};
}

// One step of one unit, a few of each, the steps either way; with and
// without a bias.
std::vector<OpCase> LayerCases(std::mt19937* rng) {
  struct Case {
    int64_t n, steps, c, u;
  };
  std::vector<OpCase> cases;
  // (One step of a batch of one: where oneDNN 2.6 needed the kernel's zeros;
  // C == U: where it may merge the two products.)
  for (const Case& k :
       {Case{1, 1, 1, 1}, Case{2, 1, 3, 4}, Case{1, 3, 2, 2}, Case{2, 3, 3, 3}, Case{2, 7, 3, 5}}) {
    for (const bool reverse : {false, true}) {
      for (const bool bias : {true, false}) {
        OpCase c;
        c.name = absl::StrCat("n ", k.n, " T ", k.steps, " C ", k.c, " U ", k.u,
                              reverse ? " reverse" : "", bias ? "" : " no bias");
        c.attrs.reverse = reverse;
        c.inputs = {RandomTensor(rng, {k.n, k.steps, k.c}), RandomTensor(rng, {k.c, 4 * k.u}),
                    RandomTensor(rng, {k.u, 4 * k.u}, -0.5, 0.5),
                    bias ? RandomTensor(rng, {4 * k.u}, -0.5, 0.5) : HostTensor{}};
        if (!bias) c.absent_inputs = 0b1000;
        c.terms = k.n * k.steps * (k.c + k.u + 1);
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

std::vector<HostTensor> LayerBackwardInputs(absl::Span<const HostTensor> in,
                                            absl::Span<const HostTensor> out, const HostTensor& dy,
                                            const OpAttrs&) {
  return {in[0], in[1], in[2], in[3], RoundedToFloat(out[0]), dy};
}
void LayerBackwardAbsent(const OpCase& forward, OpCase* c) {
  c->absent_inputs = forward.absent_inputs & 0b1000;
}

}  // namespace
}  // namespace rnn_defs

std::vector<OpDef> RnnOpDefs() {
  namespace d = rnn_defs;
  OpDef cell = Define(compute::rnn::kLstmCell, 2, 2, d::CellShapes, d::CellReference);
  cell.float32_inputs = 0b11;  // the executor's own step tensors
  cell.float32_outputs = 0b11;
  cell.cases = d::CellCases;
  OpDef backward =
      Define(compute::rnn::kLstmCellBackward, 5, 2, d::BackwardShapes, d::BackwardReference);
  backward.cases = d::BackwardCases;
  backward.float32_inputs = 0b11111;  // z, c_prev, c, dh, dc: the executor's own step tensors
  backward.float32_outputs = 0b11;
  backward.gradient = {compute::rnn::kLstmCell, 0,    d::BackwardInputs,
                       /*exact=*/false,         1e-3, d::BackwardAbsent};
  OpDef gru = Define(compute::rnn::kGruCell, 3, 1, d::GruShapes, d::GruReference);
  gru.cases = d::GruCases;
  OpDef gru_backward =
      Define(compute::rnn::kGruCellBackward, 4, 3, d::GruBackwardShapes, d::GruBackwardReference);
  gru_backward.gradient = {compute::rnn::kGruCell, 0,    d::GruBackwardInputs,
                           /*exact=*/false,        1e-3, d::GruBackwardAbsent};
  OpDef layer = Define(compute::rnn::kLstmLayer, 4, 1, d::LayerShapes, d::LayerReference);
  layer.float32_inputs = 0b1110;  // w, r, b
  layer.cases = d::LayerCases;
  OpDef layer_backward = Define(compute::rnn::kLstmLayerBackward, 6, 4, d::LayerBackwardShapes,
                                d::LayerBackwardReference);
  // w, r, b; and y, which the forward's saved state holds unrounded (the
  // kernel reads that, the reference y)
  layer_backward.float32_inputs = 0b11110;
  layer_backward.float32_outputs = 0b1110;  // dw, dr, db
  layer_backward.gradient = {compute::rnn::kLstmLayer, 0,    d::LayerBackwardInputs,
                             /*exact=*/false,          1e-3, d::LayerBackwardAbsent};
  return {cell, backward, gru, gru_backward, layer, layer_backward};
}

}  // namespace ops
}  // namespace psc
