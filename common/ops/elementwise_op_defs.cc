// The elementwise ops' definitions (their kernels: compute/elementwise_ops.h
// and each backend's *_elementwise_kernels.cc).
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/compute/elementwise_ops.h"
#include "common/compute/reference/reference_ops.h"
#include "common/ops/host_tensors.h"
#include "common/ops/op_def.h"

namespace psc {
namespace ops {
namespace {

namespace ref = ::psc::compute::reference;
using compute::Activation;
using compute::ShapeSize;
using compute::ShapeText;

// Every input of one shape, which is the output's.
absl::StatusOr<std::vector<Shape>> SameShape(const char* op, absl::Span<const Shape> in) {
  static constexpr const char* kNames[] = {"a", "b", "c", "d"};
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i] != in[0]) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", kNames[std::min<size_t>(i, 3)],
                                                     " has shape ", ShapeText(in[i]), ", want ",
                                                     ShapeText(in[0])));
    }
  }
  return std::vector<Shape>{in[0]};
}

template <const char* kOp>
absl::StatusOr<std::vector<Shape>> Elementwise(absl::Span<const Shape> in, const OpAttrs&) {
  return SameShape(kOp, in);
}

// One output of x's shape, each element `f` of the inputs' elements.
template <typename F>
std::vector<HostTensor> Map(absl::Span<const HostTensor> in, F f) {
  HostTensor y{in[0].shape, std::vector<double>(in[0].values.size())};
  for (size_t i = 0; i < y.values.size(); ++i) y.values[i] = f(i);
  return {std::move(y)};
}

double Float(double v) { return static_cast<float>(v); }

// Values with |v| in [lo, hi], every other one negative.
HostTensor AwayFromZero(std::mt19937* rng, const Shape& shape, double lo, double hi) {
  HostTensor t = RandomTensor(rng, shape, lo, hi);
  for (size_t i = 0; i < t.values.size(); i += 2) t.values[i] = -t.values[i];
  return t;
}

std::vector<Shape> PlainShapes() { return {{2, 3, 4, 5}, {7, 13}, {1, 1}}; }

// ---- Activate and ActivateBackward ----

constexpr Activation kElementwiseActivations[] = {
    Activation::kRelu,        Activation::kSigmoid,
    Activation::kTanh,        Activation::kLeakyRelu,
    Activation::kElu,         Activation::kSelu,
    Activation::kSoftplus,    Activation::kSoftsign,
    Activation::kHardSigmoid, Activation::kHardSigmoidKeras2,
    Activation::kClippedRelu, Activation::kExponential,
    Activation::kGelu,        Activation::kSilu};

// Keras's leaky_relu default, an elu alpha other than 1, relu6's maximum
// (outside the differentiable cases' [-2, 2]); the others ignore it.
float AlphaOf(Activation f) {
  switch (f) {
    case Activation::kElu:
      return 1.3f;
    case Activation::kClippedRelu:
      return 6.0f;
    default:
      return 0.2f;
  }
}

OpAttrs ActivationAttrs(Activation f) {
  OpAttrs a;
  a.activation = f;
  a.alpha = AlphaOf(f);
  return a;
}

int64_t Columns(const Shape& s) { return s.empty() ? 1 : s.back(); }

std::vector<HostTensor> ActivateReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const HostTensor& x = in[0];
  if (a.activation == Activation::kSoftmax) {
    return {HostTensor{x.shape, ref::Softmax(x.values, Columns(x.shape))}};
  }
  return {HostTensor{x.shape, ref::Activate(static_cast<int>(a.activation), a.alpha, x.values)}};
}

std::vector<OpCase> ActivateCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const Shape& shape : {Shape{2, 3, 4, 5}, Shape{3, 11}, Shape{1, 1}}) {
    for (Activation f : kElementwiseActivations) {
      OpCase c;
      c.name = absl::StrCat(compute::ActivationName(f), " ", ShapeText(shape), " over [-3, 3]");
      c.attrs = ActivationAttrs(f);
      c.inputs = {RandomTensor(rng, shape, -3, 3)};
      c.differentiable = false;  // crosses relu's, leaky_relu's and hard_sigmoid's kinks
      cases.push_back(std::move(c));
    }
  }
  // At least 0.1 from the kinks at 0 and within [-2, 2], clear of
  // hard_sigmoid's (+-2.5, +-3) and relu6's (6).
  for (Activation f : kElementwiseActivations) {
    OpCase c;
    c.name = absl::StrCat(compute::ActivationName(f), " [2,3,2,4] away from its kinks");
    c.attrs = ActivationAttrs(f);
    c.inputs = {AwayFromZero(rng, {2, 3, 2, 4}, 0.1, 2.0)};
    cases.push_back(std::move(c));
  }
  // Softmax over the last axis: a Dense's rows and an image's channels.
  for (const Shape& shape :
       {Shape{5, 7}, Shape{2, 3, 4, 6}, Shape{1, 1}, Shape{4, 33}, Shape{2, 2, 2, 16}}) {
    OpCase c;
    c.name = absl::StrCat("softmax ", ShapeText(shape));
    c.attrs = ActivationAttrs(Activation::kSoftmax);
    c.inputs = {RandomTensor(rng, shape, -4, 4)};
    c.terms = Columns(shape);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<HostTensor> ActivateBackwardReference(absl::Span<const HostTensor> in,
                                                  const OpAttrs& a) {
  const HostTensor &y = in[0], &dy = in[1];
  if (a.activation == Activation::kSoftmax) {
    return {HostTensor{y.shape, ref::SoftmaxBackward(y.values, dy.values, Columns(y.shape))}};
  }
  return {HostTensor{y.shape, ref::ActivateBackward(static_cast<int>(a.activation), a.alpha,
                                                    y.values, dy.values)}};
}

// From the output (rounded to float, as a backend holds it), or for gelu
// and silu the input.
std::vector<HostTensor> ActivateBackwardInputs(absl::Span<const HostTensor> x,
                                               absl::Span<const HostTensor> y, const HostTensor& dy,
                                               const OpAttrs& a) {
  return {compute::GradientFromInput(a.activation) ? x[0] : RoundedToFloat(y[0]), dy};
}

// ---- Add, Copy, Scale, Multiply ----

std::vector<OpCase> PlainCases(const char* what, int inputs, std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const Shape& shape : PlainShapes()) {
    OpCase c;
    c.name = absl::StrCat(what, " ", ShapeText(shape));
    for (int i = 0; i < inputs; ++i) c.inputs.push_back(RandomTensor(rng, shape));
    c.exact = true;  // one rounding of an exact double result
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<HostTensor> AddReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  return Map(in, [&](size_t i) { return in[0].values[i] + in[1].values[i]; });
}
std::vector<HostTensor> MultiplyReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  return Map(in, [&](size_t i) { return in[0].values[i] * in[1].values[i]; });
}
std::vector<HostTensor> CopyReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  return {in[0]};
}
std::vector<HostTensor> ScaleReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  return Map(in, [&](size_t i) { return double{a.scalar} * in[0].values[i]; });
}

std::vector<OpCase> ScaleCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (float s : {-0.25f, 3.0f}) {
    for (OpCase c : PlainCases("Scale", 1, rng)) {
      c.attrs.scalar = s;
      absl::StrAppend(&c.name, " by ", s);
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// ---- Extremum and ExtremumGradient ----

std::vector<HostTensor> ExtremumReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  return Map(in, [&](size_t i) {
    const double x = in[0].values[i], y = in[1].values[i];
    return a.max ? std::max(x, y) : std::min(x, y);
  });
}

// dy where a wins, dy / 2 on a tie, 0 where b wins.
std::vector<HostTensor> ExtremumGradientReference(absl::Span<const HostTensor> in,
                                                  const OpAttrs& attrs) {
  return Map(in, [&](size_t i) {
    const double a = in[0].values[i], b = in[1].values[i], dy = in[2].values[i];
    if (a == b) return dy / 2;
    return (attrs.max ? a > b : a < b) ? dy : 0.0;
  });
}

std::vector<OpCase> ExtremumCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (bool max : {true, false}) {
    for (bool ties : {true, false}) {
      for (const Shape& shape : PlainShapes()) {
        OpCase c;
        c.name = absl::StrCat(max ? "maximum " : "minimum ", ShapeText(shape),
                              ties ? " with ties" : " apart");
        c.attrs.max = max;
        HostTensor a = RandomTensor(rng, shape), b = RandomTensor(rng, shape);
        for (size_t i = 0; i < a.values.size(); ++i) {
          if (ties && i % 5 == 0) {
            b.values[i] = a.values[i];
          } else if (std::abs(a.values[i] - b.values[i]) < 0.01) {
            b.values[i] = Float(a.values[i] + (a.values[i] < 0 ? 0.05 : -0.05));
          }
        }
        c.inputs = {std::move(a), std::move(b)};
        c.exact = true;
        c.differentiable = !ties;
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

std::vector<HostTensor> ExtremumGradientInputs(absl::Span<const HostTensor> in,
                                               absl::Span<const HostTensor>, const HostTensor& dy,
                                               const OpAttrs&) {
  return {in[0], in[1], dy};
}

// ---- ReluBackward ----

std::vector<HostTensor> ReluBackwardReference(absl::Span<const HostTensor> in, const OpAttrs&) {
  return {HostTensor{in[0].shape, ref::ReluBackward(in[0].values, in[1].values)}};
}

// y a ReLU's output (about half of it 0), any shape; a 16-channel one as
// the CPU backend blocks.
std::vector<OpCase> ReluBackwardCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  std::vector<Shape> shapes = PlainShapes();
  shapes.push_back({2, 5, 5, 16});
  for (const Shape& shape : shapes) {
    OpCase c;
    c.name = absl::StrCat("ReluBackward ", ShapeText(shape));
    HostTensor y = RandomTensor(rng, shape);
    for (double& v : y.values) v = std::max(v, 0.0);
    c.inputs = {std::move(y), RandomTensor(rng, shape)};
    c.exact = true;  // a selection
    cases.push_back(std::move(c));
  }
  return cases;
}

// ---- CopyBlock ----

// x and y_in of the block's sizes: y of y_in's shape.
absl::StatusOr<std::vector<Shape>> CopyBlockShapes(absl::Span<const Shape> in, const OpAttrs& a) {
  constexpr const char* kOp = compute::elementwise::kCopyBlock;
  const OpAttrs::Block& k = a.block;
  if (k.rows < 0 || k.cols < 0 || k.x_first < 0 || k.y_first < 0 || k.x_first > k.x_cols - k.cols ||
      k.y_first > k.y_cols - k.cols) {
    return Refuse(kOp, absl::StrCat("columns [", k.x_first, ", +", k.cols, ") of ", k.x_cols,
                                    " to [", k.y_first, ", +", k.cols, ") of ", k.y_cols));
  }
  if (ShapeSize(in[0]) != k.rows * k.x_cols) {
    return Refuse(kOp, absl::StrCat("x ", ShapeText(in[0]), " is not ", k.rows, " x ", k.x_cols));
  }
  if (ShapeSize(in[1]) != k.rows * k.y_cols) {
    return Refuse(kOp,
                  absl::StrCat("y_in ", ShapeText(in[1]), " is not ", k.rows, " x ", k.y_cols));
  }
  return std::vector<Shape>{in[1]};
}

std::vector<HostTensor> CopyBlockReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const OpAttrs::Block& k = a.block;
  HostTensor y = in[1];
  for (int64_t r = 0; r < k.rows; ++r) {
    for (int64_t j = 0; j < k.cols; ++j) {
      y.values[r * k.y_cols + k.y_first + j] = in[0].values[r * k.x_cols + k.x_first + j];
    }
  }
  return {std::move(y)};
}

// A Concatenate's block, a whole Flatten, a ZeroPadding2D's row and a
// Cropping2D's, an empty block.
std::vector<OpCase> CopyBlockCases(std::mt19937* rng) {
  struct Block {
    const char* name;
    Shape x, y;
    OpAttrs::Block block;
  };
  const Block blocks[] = {
      {"concatenate", {3, 2, 5}, {3, 7}, {3, 4, 10, 6, 7, 2}},
      {"flatten", {2, 3, 4, 5}, {2, 60}, {2, 60, 60, 0, 60, 0}},
      {"pad row", {2, 2, 3, 4}, {2, 4, 5, 4}, {2, 12, 24, 12, 80, 24}},
      {"crop row", {2, 4, 5, 4}, {2, 2, 3, 4}, {2, 12, 80, 24, 24, 12}},
      {"empty", {2, 3}, {2, 4}, {2, 0, 3, 3, 4, 4}},
  };
  std::vector<OpCase> cases;
  for (const Block& b : blocks) {
    OpCase c;
    c.name = absl::StrCat("CopyBlock ", b.name);
    c.attrs.block = b.block;
    c.inputs = {RandomTensor(rng, b.x), RandomTensor(rng, b.y)};
    c.exact = true;  // copies
    cases.push_back(std::move(c));
  }
  return cases;
}

// ---- Transpose ----

absl::StatusOr<std::vector<Shape>> TransposeShapes(absl::Span<const Shape> in, const OpAttrs& a) {
  const Shape& x = in[0];
  std::vector<bool> seen(x.size(), false);
  bool fits = !x.empty() &&
              x.size() <= static_cast<size_t>(compute::elementwise::kMaxTransposeRank) &&
              a.perm.size() == x.size();
  Shape y(x.size());
  for (size_t i = 0; fits && i < a.perm.size(); ++i) {
    const int p = a.perm[i];
    fits = p >= 0 && p < static_cast<int>(x.size()) && !seen[p];
    if (fits) {
      seen[p] = true;
      y[i] = x[p];
    }
  }
  if (!fits) {
    return Refuse(compute::elementwise::kTranspose,
                  absl::StrCat("no permutation of the axes of ", ShapeText(x)));
  }
  return std::vector<Shape>{y};
}

std::vector<HostTensor> TransposeReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  Shape y(in[0].shape.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = in[0].shape[a.perm[i]];
  return {HostTensor{y, ref::Transpose(in[0].values, in[0].shape, a.perm)}};
}

// Permute((2, 1)) of a sequence as the executor holds it, MultiHeadAttention's
// heads to the front and back, a rank-5 and a rank-6 permutation, the
// identity, one axis, a size-1 axis.
std::vector<OpCase> TransposeCases(std::mt19937* rng) {
  struct Perm {
    Shape x;
    std::vector<int> perm;
  };
  const Perm perms[] = {
      {{2, 1, 5, 3}, {0, 1, 3, 2}},
      {{2, 6, 4, 3}, {0, 2, 1, 3}},
      {{2, 4, 6, 3}, {0, 2, 1, 3}},
      {{3, 2, 4, 5, 2}, {0, 3, 1, 4, 2}},
      {{2, 1, 2, 3, 2, 2}, {0, 5, 4, 3, 2, 1}},
      {{3, 4}, {0, 1}},
      {{7}, {0}},
      {{4, 3}, {1, 0}},
  };
  std::vector<OpCase> cases;
  for (const Perm& p : perms) {
    OpCase c;
    c.name = absl::StrCat("Transpose ", ShapeText(p.x), " by (", absl::StrJoin(p.perm, ","), ")");
    c.attrs.perm = p.perm;
    c.inputs = {RandomTensor(rng, p.x)};
    c.exact = true;  // a copy
    cases.push_back(std::move(c));
  }
  return cases;
}

// ---- Cast ----

absl::StatusOr<std::vector<Shape>> CastShapes(absl::Span<const Shape> in, const OpAttrs& a) {
  if (!compute::IsActivationFloat(a.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(compute::elementwise::kCast, ": into ",
                                                   compute::DTypeName(a.dtype), ", not a float"));
  }
  return std::vector<Shape>{in[0]};
}

std::vector<HostTensor> CastReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  HostTensor y{in[0].shape, in[0].values, a.dtype};
  for (double& v : y.values) v = RoundTo(a.dtype, v);
  return {std::move(y)};
}

// float32 into each format and back, and into itself: random values, and
// ones that test the rounding (ties to even in bfloat16 and float16, float16's
// subnormals, underflow to zero and its largest values).
std::vector<OpCase> CastCases(std::mt19937* rng) {
  using compute::DType;
  const std::vector<double> special = {1 + 0x1p-8,      1 + 3 * 0x1p-8, -(1 + 0x1p-8), 1 + 0x1p-11,
                                       1 + 3 * 0x1p-11, 3 * 0x1p-25,    0x1p-14 * 1.5, 1e-9,
                                       65504,           65519,          -0.0,          0x1p-30};
  const std::pair<DType, DType> pairs[] = {{DType::kFloat32, DType::kBFloat16},
                                           {DType::kFloat32, DType::kFloat16},
                                           {DType::kBFloat16, DType::kFloat32},
                                           {DType::kFloat16, DType::kFloat32},
                                           {DType::kFloat32, DType::kFloat32}};
  std::vector<OpCase> cases;
  for (const auto& [from, to] : pairs) {
    for (const Shape& shape : {Shape{2, 3, 4, 16}, Shape{5, 12}}) {
      OpCase c;
      c.name = absl::StrCat("Cast ", compute::DTypeName(from), " to ", compute::DTypeName(to), " ",
                            ShapeText(shape));
      HostTensor x = RandomTensor(rng, shape, -4, 4);
      for (size_t i = 0; i < special.size() && i < x.values.size(); ++i) x.values[i] = special[i];
      x.dtype = from;
      for (double& v : x.values) v = RoundTo(from, v);
      c.inputs.push_back(std::move(x));
      c.attrs.dtype = to;
      c.exact = true;  // one rounding
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

}  // namespace

std::vector<OpDef> ElementwiseOpDefs() {
  namespace k = compute::elementwise;
  OpDef activate = Define(k::kActivate, 1, 1, Elementwise<k::kActivate>, ActivateReference);
  activate.cases = ActivateCases;
  activate.in_place = {0};
  OpDef activate_back = Define(k::kActivateBackward, 2, 1, Elementwise<k::kActivateBackward>,
                               ActivateBackwardReference);
  activate_back.in_place = {1};
  activate_back.gradient = {k::kActivate, 0, ActivateBackwardInputs, /*exact=*/false, 1e-3};
  OpDef add = Define(k::kAdd, 2, 1, Elementwise<k::kAdd>, AddReference);
  add.cases = [](std::mt19937* rng) { return PlainCases("Add", 2, rng); };
  add.in_place = {0, 1};
  OpDef copy = Define(k::kCopy, 1, 1, Elementwise<k::kCopy>, CopyReference);
  copy.cases = [](std::mt19937* rng) { return PlainCases("Copy", 1, rng); };
  OpDef scale = Define(k::kScale, 1, 1, Elementwise<k::kScale>, ScaleReference);
  scale.cases = ScaleCases;
  scale.in_place = {0};
  OpDef multiply = Define(k::kMultiply, 2, 1, Elementwise<k::kMultiply>, MultiplyReference);
  multiply.cases = [](std::mt19937* rng) { return PlainCases("Multiply", 2, rng); };
  multiply.in_place = {0};
  OpDef extremum = Define(k::kExtremum, 2, 1, Elementwise<k::kExtremum>, ExtremumReference);
  extremum.cases = ExtremumCases;
  extremum.in_place = {0, 1};
  OpDef extremum_back = Define(k::kExtremumGradient, 3, 1, Elementwise<k::kExtremumGradient>,
                               ExtremumGradientReference);
  extremum_back.in_place = {2};
  extremum_back.gradient = {k::kExtremum, 0, ExtremumGradientInputs, /*exact=*/true, 1e-3};
  OpDef relu_back =
      Define(k::kReluBackward, 2, 1, Elementwise<k::kReluBackward>, ReluBackwardReference);
  relu_back.cases = ReluBackwardCases;
  relu_back.in_place = {1};
  OpDef copy_block = Define(k::kCopyBlock, 2, 1, CopyBlockShapes, CopyBlockReference);
  copy_block.cases = CopyBlockCases;
  copy_block.in_place = {1};  // as the typed call runs it
  OpDef transpose = Define(k::kTranspose, 1, 1, TransposeShapes, TransposeReference);
  transpose.cases = TransposeCases;
  OpDef cast = Define(k::kCast, 1, 1, CastShapes, CastReference);
  cast.cases = CastCases;
  return {activate, activate_back, add,       copy,       scale,     multiply,
          extremum, extremum_back, relu_back, copy_block, transpose, cast};
}

}  // namespace ops
}  // namespace psc
