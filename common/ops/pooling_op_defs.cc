// The pooling ops' definitions (their kernels: compute/pooling_ops.h and
// each backend's *_pooling_kernels.cc).
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/compute/pooling_ops.h"
#include "common/compute/reference/reference_ops.h"
#include "common/ops/host_tensors.h"
#include "common/ops/op_def.h"

namespace psc {
namespace ops {
namespace {

namespace ref = ::psc::compute::reference;
namespace k = ::psc::compute::pooling;
using compute::GlobalPooling;
using compute::Padding;
using compute::ShapeSize;
using compute::ShapeText;
using compute::Window;

absl::Status WantShapeOf(const char* op, const char* what, const Shape& got, const Shape& want) {
  if (got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", what, " has shape ", ShapeText(got), ", want ", ShapeText(want)));
}

// x [N,H,W,C] and a pooling window: y [N,OH,OW,C]; a backward op's dy of
// that shape gives dx of x's.
template <const char* kOp>
absl::StatusOr<std::vector<Shape>> WindowedShapes(absl::Span<const Shape> in, const OpAttrs& a) {
  if (absl::Status s = WantImage(kOp, "x", in[0]); !s.ok()) return s;
  if (absl::Status s = compute::CheckPoolWindow(kOp, a.window, in[0]); !s.ok()) return s;
  const Shape y = a.window.Output(in[0], in[0][3]);
  if (in.size() == 1) return std::vector<Shape>{y};
  if (absl::Status s = WantShapeOf(kOp, "dy", in[1], y); !s.ok()) return s;
  return std::vector<Shape>{in[0]};
}

// x [N,H,W,C]: y [N,C]; a backward op's dy [N,C] gives dx of x's shape.
template <const char* kOp>
absl::StatusOr<std::vector<Shape>> GlobalShapes(absl::Span<const Shape> in, const OpAttrs&) {
  if (absl::Status s = WantImage(kOp, "x", in[0]); !s.ok()) return s;
  const Shape y = {in[0][0], in[0][3]};
  if (in.size() == 1) return std::vector<Shape>{y};
  if (absl::Status s = WantShapeOf(kOp, "dy", in[1], y); !s.ok()) return s;
  return std::vector<Shape>{in[0]};
}

struct Dims {
  int n, h, w, c;
};
Dims DimsOf(const Shape& x) {
  return {static_cast<int>(x[0]), static_cast<int>(x[1]), static_cast<int>(x[2]),
          static_cast<int>(x[3])};
}

std::vector<HostTensor> MaxPoolReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const Dims d = DimsOf(in[0].shape);
  return {HostTensor{a.window.Output(in[0].shape, d.c),
                     ref::MaxPool(in[0].values, d.n, d.h, d.w, d.c, RefWindow(a.window))}};
}
std::vector<HostTensor> MaxPoolBackwardReference(absl::Span<const HostTensor> in,
                                                 const OpAttrs& a) {
  const Dims d = DimsOf(in[0].shape);
  return {HostTensor{in[0].shape, ref::MaxPoolBackward(in[0].values, d.n, d.h, d.w, d.c,
                                                       in[1].values, RefWindow(a.window))}};
}
std::vector<HostTensor> AvgPoolReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const Dims d = DimsOf(in[0].shape);
  return {HostTensor{a.window.Output(in[0].shape, d.c),
                     ref::AvgPool(in[0].values, d.n, d.h, d.w, d.c, RefWindow(a.window))}};
}
std::vector<HostTensor> AvgPoolBackwardReference(absl::Span<const HostTensor> in,
                                                 const OpAttrs& a) {
  const Dims d = DimsOf(in[0].shape);
  return {HostTensor{in[0].shape,
                     ref::AvgPoolBackward(d.n, d.h, d.w, d.c, in[1].values, RefWindow(a.window))}};
}
std::vector<HostTensor> GlobalPoolReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const Dims d = DimsOf(in[0].shape);
  return {HostTensor{
      {d.n, d.c},
      ref::GlobalPool(a.pooling == GlobalPooling::kMax, in[0].values, d.n, d.h, d.w, d.c)}};
}
std::vector<HostTensor> GlobalPoolBackwardReference(absl::Span<const HostTensor> in,
                                                    const OpAttrs& a) {
  const Dims d = DimsOf(in[0].shape);
  return {HostTensor{
      in[0].shape, ref::GlobalPoolBackward(a.pooling == GlobalPooling::kMax, in[0].values, d.n, d.h,
                                           d.w, d.c, in[1].values)}};
}

// A backward op takes the forward's x and the output's gradient.
std::vector<HostTensor> XAndDy(absl::Span<const HostTensor> x, absl::Span<const HostTensor>,
                               const HostTensor& dy, const OpAttrs&) {
  return {x[0], dy};
}

struct PoolShape {
  int n, h, w, c;
  Window win = compute::kPool2x2;
};

constexpr Padding kSame = Padding::kSame;
constexpr Padding kValid = Padding::kValid;

// H, W from 2 (the smallest with an output) to 9, odd ones to exercise the
// floor; then other windows: overlapping (stride < size), strides larger
// than the window (elements no window reads), "same" with asymmetric
// padding, non-square.
std::vector<PoolShape> PoolShapes() {
  std::vector<PoolShape> shapes = {{1, 2, 2, 1}, {2, 7, 5, 3}, {3, 5, 7, 17},
                                   {1, 9, 9, 1}, {5, 4, 6, 2}, {1, 3, 2, 4}};
  std::mt19937 rng(1002);
  auto draw = [&rng](int lo, int hi) {
    return lo + static_cast<int>(rng() % static_cast<uint32_t>(hi - lo + 1));
  };
  for (int i = 0; i < 4; ++i) shapes.push_back({draw(1, 5), draw(2, 9), draw(2, 9), draw(1, 17)});
  const PoolShape windows[] = {
      {2, 7, 5, 3, {3, 3, 2, 2, kSame}},  {1, 8, 8, 2, {3, 3, 2, 2, kSame}},
      {2, 6, 7, 3, {2, 2, 1, 1, kValid}}, {1, 9, 9, 4, {3, 3, 1, 1, kSame}},
      {3, 5, 7, 2, {2, 3, 3, 2, kValid}}, {1, 5, 5, 1, {1, 1, 2, 2, kValid}},
      {2, 4, 4, 3, {4, 4, 4, 4, kSame}},  {2, 7, 7, 16, {3, 3, 2, 2, kValid}},
      {1, 5, 6, 2, {2, 2, 2, 2, kSame}},
  };
  shapes.insert(shapes.end(), std::begin(windows), std::end(windows));
  return shapes;
}

OpCase PoolCase(const char* what, const PoolShape& p, HostTensor x) {
  OpCase c;
  c.name = absl::StrCat(what, " x ", ShapeText(x.shape), " ", p.win.Text());
  c.attrs.window = p.win;
  c.inputs = {std::move(x)};
  return c;
}

Shape XOf(const PoolShape& p) { return {p.n, p.h, p.w, p.c}; }

// Max pooling: exact forward; its backward sums up to 9 overlapping
// windows' gradients.
std::vector<OpCase> MaxPoolCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const PoolShape& p : PoolShapes()) {
    OpCase c = PoolCase("random", p, RandomTensor(rng, XOf(p)));
    c.differentiable = false;  // two values of a window may lie within a step
    cases.push_back(std::move(c));
  }
  for (const PoolShape& p : {PoolShape{2, 5, 7, 3}, PoolShape{2, 6, 5, 2, {3, 3, 2, 2, kSame}},
                             PoolShape{1, 6, 6, 2, {2, 2, 1, 1, kValid}}}) {
    cases.push_back(PoolCase("distinct", p, DistinctTensor(rng, XOf(p))));
  }
  // Three levels, so most windows hold ties (the first maximum in
  // row-major window order takes the gradient); one map all equal.
  for (const PoolShape& p :
       {PoolShape{3, 6, 5, 4}, PoolShape{1, 2, 2, 1}, PoolShape{2, 7, 7, 17},
        PoolShape{2, 7, 6, 3, {3, 3, 2, 2, kSame}}, PoolShape{1, 6, 6, 2, {2, 2, 1, 1, kValid}}}) {
    HostTensor x = RandomTensor(rng, XOf(p), 0, 3);
    for (double& v : x.values) v = p.h == 2 ? 1.0 : std::floor(v);
    OpCase c = PoolCase("ties", p, std::move(x));
    c.differentiable = false;
    cases.push_back(std::move(c));
  }
  // seed_cnn's pools on post-ReLU activations: a quarter zero, so some
  // windows tie at 0.
  for (const PoolShape& p :
       {PoolShape{4, 28, 28, 32}, PoolShape{4, 14, 14, 64}, PoolShape{4, 7, 7, 128}}) {
    HostTensor x = RandomTensor(rng, XOf(p), -0.5, 1.5);
    for (double& v : x.values) v = v > 0 ? v : 0.0;
    OpCase c = PoolCase("seed_cnn", p, std::move(x));
    c.differentiable = false;
    cases.push_back(std::move(c));
  }
  for (OpCase& c : cases) {
    c.exact = true;
    c.terms = 9;
  }
  return cases;
}

// Average pooling: a window's mean, and linear, so differentiable anywhere.
std::vector<OpCase> AvgPoolCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const PoolShape& p : PoolShapes()) {
    OpCase c = PoolCase("random", p, RandomTensor(rng, XOf(p)));
    c.terms = p.win.height * p.win.width;
    cases.push_back(std::move(c));
  }
  return cases;
}

// Distinct values (more than two central-difference steps apart, so no
// step changes a maximum); a 1x1 map and a
// seed_cnn-sized one besides the pooling shapes.
std::vector<OpCase> GlobalPoolCases(std::mt19937* rng) {
  std::vector<PoolShape> shapes = PoolShapes();
  shapes.push_back({2, 1, 1, 5});
  shapes.push_back({4, 7, 7, 32});
  std::vector<OpCase> cases;
  for (GlobalPooling kind : {GlobalPooling::kAverage, GlobalPooling::kMax}) {
    for (const PoolShape& p : shapes) {
      const bool max = kind == GlobalPooling::kMax;
      OpCase c;
      c.name = absl::StrCat(max ? "max" : "average", " over ", ShapeText(XOf(p)));
      c.attrs.pooling = kind;
      c.inputs = {DistinctTensor(rng, XOf(p))};
      c.exact = max;
      c.terms = int64_t{p.h} * p.w;
      // A maximum's central differences need its neighbours more than two
      // steps (2e-3) apart: 2 / (size - 1) > 2e-3.
      c.differentiable = !max || ShapeSize(XOf(p)) < 1000;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

}  // namespace

std::vector<OpDef> PoolingOpDefs() {
  OpDef max_pool = Define(k::kMaxPool, 1, 1, WindowedShapes<k::kMaxPool>, MaxPoolReference);
  max_pool.cases = MaxPoolCases;
  OpDef max_back = Define(k::kMaxPoolBackward, 2, 1, WindowedShapes<k::kMaxPoolBackward>,
                          MaxPoolBackwardReference);
  max_back.gradient = {k::kMaxPool, 0, XAndDy, /*exact=*/false, 1e-3};
  OpDef avg_pool = Define(k::kAvgPool, 1, 1, WindowedShapes<k::kAvgPool>, AvgPoolReference);
  avg_pool.cases = AvgPoolCases;
  OpDef avg_back = Define(k::kAvgPoolBackward, 2, 1, WindowedShapes<k::kAvgPoolBackward>,
                          AvgPoolBackwardReference);
  avg_back.gradient = {k::kAvgPool, 0, XAndDy, /*exact=*/false, 1e-3};
  OpDef global = Define(k::kGlobalPool, 1, 1, GlobalShapes<k::kGlobalPool>, GlobalPoolReference);
  global.cases = GlobalPoolCases;
  OpDef global_back = Define(k::kGlobalPoolBackward, 2, 1, GlobalShapes<k::kGlobalPoolBackward>,
                             GlobalPoolBackwardReference);
  global_back.gradient = {k::kGlobalPool, 0, XAndDy, /*exact=*/false, 1e-3};
  return {max_pool, max_back, avg_pool, avg_back, global, global_back};
}

}  // namespace ops
}  // namespace psc
