// The convolution ops' definitions (their kernels: compute/conv_ops.h and
// each backend's *_conv_kernels.cc).
#include <algorithm>
#include <iterator>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/compute/conv_ops.h"
#include "common/compute/reference/reference_ops.h"
#include "common/ops/host_tensors.h"
#include "common/ops/op_def.h"

namespace psc {
namespace ops {
namespace {
namespace conv_defs {  // its own names: the OpDef files share one unity build

namespace ref = ::psc::compute::reference;
namespace cv = ::psc::compute::conv;
using compute::Padding;
using compute::ShapeSize;
using compute::ShapeText;
using compute::Window;

// x [N,H,W,C], w [KH,KW,C/groups,K], b [K] or absent: y [N,OH,OW,K].
absl::StatusOr<std::vector<Shape>> ForwardShapes(absl::Span<const Shape> in, const OpAttrs& a) {
  constexpr const char* kOp = compute::conv::kConv2D;
  const Shape &x = in[0], &w = in[1];
  if (absl::Status s = WantImage(kOp, "x", x); !s.ok()) return s;
  if (absl::Status s = compute::CheckWindow(kOp, a.window, x); !s.ok()) return s;
  if (absl::Status s = WantImage(kOp, "w", w); !s.ok()) return s;
  const int64_t k = w[3];
  if (absl::Status s = compute::CheckConvKernel(kOp, "w", a.window, x[3], k, w); !s.ok()) return s;
  if (!in[2].empty() && in[2] != Shape{k}) {
    return Refuse(kOp, absl::StrCat("b has shape ", ShapeText(in[2]), ", want [", k,
                                    "] for kernel ", ShapeText(w)));
  }
  return std::vector<Shape>{a.window.Output(x, k)};
}

// The smallest extent a window takes to `out`.
int64_t Preimage(int64_t out, int64_t span, int64_t stride, Padding padding) {
  return (out - 1) * stride + (padding == Padding::kValid ? span : 1);
}

// dy [N,OH,OW,K] and w [KH,KW,C/groups,K]: dx [N,H,W,C], H and W the
// attributes' (or, unset, the smallest the window takes to OH and OW).
absl::StatusOr<std::vector<Shape>> DataShapes(absl::Span<const Shape> in, const OpAttrs& a) {
  constexpr const char* kOp = compute::conv::kConv2DBackwardData;
  const Shape &dy = in[0], &w = in[1];
  if (absl::Status s = WantImage(kOp, "dy", dy); !s.ok()) return s;
  if (absl::Status s = WantImage(kOp, "w", w); !s.ok()) return s;
  const Window& win = a.window;
  const int64_t c = w[2] * win.groups;
  if (absl::Status s = compute::CheckConvKernel(kOp, "w", win, c, dy[3], w); !s.ok()) return s;
  const Shape dx = {
      dy[0],
      a.x_height > 0 ? a.x_height : Preimage(dy[1], win.SpanRows(), win.stride_h, win.padding),
      a.x_width > 0 ? a.x_width : Preimage(dy[2], win.SpanCols(), win.stride_w, win.padding), c};
  if (absl::Status s = compute::CheckWindow(kOp, win, dx); !s.ok()) return s;
  if (win.Output(dx, dy[3]) != dy) {
    return Refuse(kOp, absl::StrCat("dy has shape ", ShapeText(dy), ", want ",
                                    ShapeText(win.Output(dx, dy[3])), " for x ", ShapeText(dx)));
  }
  return std::vector<Shape>{dx};
}

// x [N,H,W,C] and dy [N,OH,OW,K]: dw [KH,KW,C/groups,K], db [K].
absl::StatusOr<std::vector<Shape>> WeightShapes(absl::Span<const Shape> in, const OpAttrs& a) {
  constexpr const char* kOp = compute::conv::kConv2DBackwardWeights;
  const Shape &x = in[0], &dy = in[1];
  if (absl::Status s = WantImage(kOp, "x", x); !s.ok()) return s;
  if (absl::Status s = compute::CheckWindow(kOp, a.window, x); !s.ok()) return s;
  if (absl::Status s = WantImage(kOp, "dy", dy); !s.ok()) return s;
  const int64_t k = dy[3];
  if (a.window.Output(x, k) != dy) {
    return Refuse(kOp, absl::StrCat("dy has shape ", ShapeText(dy), ", want ",
                                    ShapeText(a.window.Output(x, k))));
  }
  const Shape dw = a.window.Kernel(x[3], k);
  if (absl::Status s = compute::CheckConvKernel(kOp, "dw", a.window, x[3], k, dw); !s.ok()) {
    return s;
  }
  return std::vector<Shape>{dw, {k}};
}

std::vector<HostTensor> ForwardReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const Shape& x = in[0].shape;
  const int64_t k = in[1].shape[3];
  return {HostTensor{a.window.Output(x, k),
                     ref::Conv2D(in[0].values, Int(x[0]), Int(x[1]), Int(x[2]), Int(x[3]),
                                 in[1].values, in[2].values, Int(k), RefWindow(a.window), a.relu)}};
}

std::vector<HostTensor> DataReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const Shape dx = DataShapes({in[0].shape, in[1].shape}, a).value().front();
  return {HostTensor{dx, ref::Conv2DBackwardData(in[0].values, Int(dx[0]), Int(dx[1]), Int(dx[2]),
                                                 Int(in[0].shape[3]), in[1].values, Int(dx[3]),
                                                 RefWindow(a.window))}};
}

std::vector<HostTensor> WeightReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const Shape& x = in[0].shape;
  const int64_t k = in[1].shape[3];
  ref::WeightGrads g =
      ref::Conv2DBackwardWeights(in[0].values, Int(x[0]), Int(x[1]), Int(x[2]), Int(x[3]),
                                 in[1].values, Int(k), RefWindow(a.window));
  return {HostTensor{a.window.Kernel(x[3], k), std::move(g.dw)}, HostTensor{{k}, std::move(g.db)}};
}

struct ConvShape {
  int n, h, w, c, k;
  Window win = compute::kConv3x3Same;
  bool seed_cnn = false;  // one of seed_cnn's layers
  Shape x() const { return {n, h, w, c}; }
};

constexpr Padding kSame = Padding::kSame, kValid = Padding::kValid;

// Edge shapes (ones, odd sizes, 17 channels), then random ones: batch 1..5,
// H, W 1..9, channels 1..17; then other windows: strides with asymmetric
// "same" padding (one row and column more after than before), even and
// non-square kernels, "valid", 1x1 (strided too), 16 channels (the CPU backend's blocked
// layouts), dilated, grouped and depthwise ones; then seed_cnn's six
// convolutions at batch 4.
std::vector<ConvShape> ConvShapes() {
  std::vector<ConvShape> shapes = {
      {1, 1, 1, 1, 1}, {1, 7, 5, 3, 17}, {2, 5, 7, 17, 1}, {5, 3, 3, 2, 2}, {1, 2, 9, 4, 6}};
  std::mt19937 rng(1001);
  auto draw = [&rng](int lo, int hi) {
    return lo + static_cast<int>(rng() % static_cast<uint32_t>(hi - lo + 1));
  };
  for (int i = 0; i < 5; ++i) {
    // Drawn in order (a braced list's order is the standard's, a call's is not).
    const int n = draw(1, 5), h = draw(1, 9), w = draw(1, 9), c = draw(1, 17), k = draw(1, 17);
    shapes.push_back({n, h, w, c, k});
  }
  const ConvShape windows[] = {
      {2, 8, 8, 3, 5, {3, 3, 2, 2, kSame}},     // 8 -> 4: pads 0 before, 1 after
      {1, 9, 7, 4, 6, {3, 3, 2, 2, kSame}},     // odd: symmetric
      {2, 7, 9, 3, 4, {5, 5, 1, 1, kSame}},     // 5x5
      {1, 9, 7, 2, 3, {5, 3, 2, 1, kValid}},    // non-square, strides 2x1
      {2, 6, 6, 3, 2, {1, 1, 1, 1, kValid}},    // 1x1
      {2, 12, 16, 2, 3, {1, 1, 2, 2, kValid}},  // strided 1x1, 2 channels (oneDNN#6035)
      {2, 9, 10, 20, 8, {1, 1, 2, 1, kSame}},   // strided 1x1 projection, 20 channels
      {1, 10, 10, 3, 4, {4, 4, 3, 3, kSame}},   // even kernel, stride 3
      {2, 5, 5, 16, 16, {2, 2, 1, 1, kSame}},   // even kernel "same": 0 before, 1 after
      {1, 7, 7, 2, 3, {3, 3, 1, 1, kValid}},    // valid 3x3
      {1, 9, 9, 16, 32, {3, 3, 2, 2, kValid}},
      {2, 7, 7, 16, 16},                                 // 3x3 same, 16 channels
      {2, 9, 9, 3, 4, {3, 3, 1, 1, kSame, 2, 2}},        // dilated "same"
      {1, 11, 10, 2, 3, {3, 2, 1, 1, kValid, 3, 2}},     // dilated, non-square, "valid"
      {1, 10, 10, 2, 2, {3, 3, 2, 2, kSame, 2, 2}},      // dilated with stride 2
      {2, 7, 7, 6, 4, {3, 3, 1, 1, kSame, 1, 1, 2}},     // 2 groups
      {2, 8, 8, 6, 6, {3, 3, 1, 1, kSame, 2, 2, 3}},     // 3 groups, dilated
      {1, 8, 8, 4, 8, {3, 3, 2, 2, kSame, 1, 1, 4}},     // depthwise x2, stride 2
      {2, 6, 6, 16, 16, {3, 3, 1, 1, kSame, 1, 1, 16}},  // depthwise, 16 channels
      {1, 9, 9, 32, 32, {3, 3, 2, 2, kSame, 1, 1, 32}},  // depthwise, stride 2
      {2, 5, 5, 32, 64, {1, 1, 1, 1, kValid, 1, 1, 4}},  // grouped 1x1
      {4, 28, 28, 1, 32, compute::kConv3x3Same, true},
      {4, 28, 28, 32, 32, compute::kConv3x3Same, true},
      {4, 14, 14, 32, 64, compute::kConv3x3Same, true},
      {4, 14, 14, 64, 64, compute::kConv3x3Same, true},
      {4, 7, 7, 64, 128, compute::kConv3x3Same, true},
      {4, 7, 7, 128, 128, compute::kConv3x3Same, true},
  };
  shapes.insert(shapes.end(), std::begin(windows), std::end(windows));
  return shapes;
}

// With a bias and no ReLU (differentiable), with a ReLU (whose kink the
// backward ops, given the gradient after it, do not see), without a bias;
// seed_cnn's layers only as it runs them, with a bias and a ReLU. Each case
// carries x's height and width for its data gradient.
std::vector<OpCase> ForwardCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const ConvShape& s : ConvShapes()) {
    const bool seed_cnn = s.seed_cnn;
    const Shape y = s.win.Output(s.x(), s.k);
    const int64_t taps = s.win.height * s.win.width, cg = s.c / s.win.groups,
                  kg = s.k / s.win.groups;
    const Shape kernel = s.win.Kernel(s.c, s.k);
    for (int variant = seed_cnn ? 1 : 0; variant < (seed_cnn ? 2 : 3); ++variant) {
      const bool relu = variant == 1, bias = variant != 2;
      OpCase c;
      c.name = absl::StrCat("x ", ShapeText(s.x()), " -> ", s.k, " ", s.win.Text(),
                            relu ? " relu" : "", bias ? "" : " no bias");
      c.attrs.window = s.win;
      c.attrs.relu = relu;
      c.attrs.x_height = s.h;
      c.attrs.x_width = s.w;
      c.inputs = {RandomTensor(rng, s.x()), RandomTensor(rng, kernel),
                  bias ? RandomTensor(rng, {s.k}) : HostTensor{}};
      if (!bias) c.absent_inputs = 0b100;
      // y sums taps x C/groups products and a bias, dx taps x K/groups, dw
      // one per output position.
      c.terms = std::max<int64_t>({taps * cg + 1, taps * kg, ShapeSize(y) / s.k});
      // Central differences cost two forward passes per element of x or w.
      const int64_t cost = std::max(ShapeSize(s.x()), ShapeSize(kernel)) * ShapeSize(y) * taps * cg;
      c.differentiable = !relu && cost <= 4'000'000;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::vector<HostTensor> DataInputs(absl::Span<const HostTensor> in, absl::Span<const HostTensor>,
                                   const HostTensor& dy, const OpAttrs&) {
  return {dy, in[1]};
}

std::vector<HostTensor> WeightInputs(absl::Span<const HostTensor> in, absl::Span<const HostTensor>,
                                     const HostTensor& dy, const OpAttrs&) {
  return {in[0], dy};
}
// No bias, no bias gradient.
void WeightOutputs(const OpCase& forward, OpCase* c) {
  if (forward.absent_inputs & 0b100) c->absent_outputs = 0b10;
}

}  // namespace conv_defs
}  // namespace

std::vector<OpDef> ConvOpDefs() {
  namespace d = conv_defs;
  OpDef forward = Define(compute::conv::kConv2D, 3, 1, d::ForwardShapes, d::ForwardReference);
  forward.float32_inputs = 0b110;  // w, b
  forward.cases = d::ForwardCases;
  OpDef data = Define(compute::conv::kConv2DBackwardData, 2, 1, d::DataShapes, d::DataReference);
  data.float32_inputs = 0b10;  // w
  data.gradient = {compute::conv::kConv2D, 0, d::DataInputs, /*exact=*/false, 1e-3};
  OpDef weights =
      Define(compute::conv::kConv2DBackwardWeights, 2, 2, d::WeightShapes, d::WeightReference);
  weights.float32_outputs = 0b11;  // dw, db
  weights.gradient = {compute::conv::kConv2D, 1,    d::WeightInputs,
                      /*exact=*/false,        1e-3, d::WeightOutputs};
  return {forward, data, weights};
}

}  // namespace ops
}  // namespace psc
