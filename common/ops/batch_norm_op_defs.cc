// The batch normalization ops' definitions (their kernels:
// compute/batch_norm_ops.h and each backend's *_batch_norm_kernels.cc).
#include "absl/strings/str_cat.h"
#include "common/compute/batch_norm_ops.h"
#include "common/compute/reference/reference_ops.h"
#include "common/ops/host_tensors.h"
#include "common/ops/op_def.h"

namespace psc {
namespace ops {
namespace {

namespace ref = ::psc::compute::reference;
namespace bn = ::psc::compute::batch_norm;
using compute::ShapeSize;
using compute::ShapeText;

// x [rows, C] seen through its last axis, of rank 2 or 4.
absl::Status WantRank2Or4(const char* op, const Shape& x) {
  if (x.size() == 2 || x.size() == 4) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": x has shape ", ShapeText(x), ", want [N,H,W,C] or [N,C]"));
}

// Each of in[first..] of shape `want`, named by `names`.
absl::Status WantAll(const char* op, absl::Span<const Shape> in, size_t first,
                     std::initializer_list<const char*> names, const Shape& want) {
  size_t i = first;
  for (const char* name : names) {
    if (in[i] != want) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " has shape ",
                                                     ShapeText(in[i]), ", want ", ShapeText(want)));
    }
    ++i;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Shape>> BatchNormShapes(absl::Span<const Shape> in, const OpAttrs&) {
  if (absl::Status s = WantRank2Or4(bn::kBatchNorm, in[0]); !s.ok()) return s;
  const Shape c = {in[0].back()};
  if (absl::Status s = WantAll(bn::kBatchNorm, in, 1, {"gamma", "beta"}, c); !s.ok()) return s;
  return std::vector<Shape>{in[0], c, c};
}

absl::StatusOr<std::vector<Shape>> InferenceShapes(absl::Span<const Shape> in, const OpAttrs&) {
  constexpr const char* kOp = bn::kBatchNormInference;
  if (absl::Status s = WantRank2Or4(kOp, in[0]); !s.ok()) return s;
  const Shape c = {in[0].back()};
  if (absl::Status s = WantAll(kOp, in, 1, {"gamma", "beta", "mean", "variance"}, c); !s.ok()) {
    return s;
  }
  return std::vector<Shape>{in[0]};
}

absl::StatusOr<std::vector<Shape>> BackwardShapes(absl::Span<const Shape> in, const OpAttrs&) {
  constexpr const char* kOp = bn::kBatchNormBackward;
  if (absl::Status s = WantRank2Or4(kOp, in[0]); !s.ok()) return s;
  if (absl::Status s = WantAll(kOp, in, 1, {"dy"}, in[0]); !s.ok()) return s;
  const Shape c = {in[0].back()};
  if (absl::Status s = WantAll(kOp, in, 2, {"gamma", "mean", "variance"}, c); !s.ok()) return s;
  return std::vector<Shape>{in[0], c, c};
}

int64_t Rows(const Shape& x) { return x.back() == 0 ? 0 : ShapeSize(x) / x.back(); }
int Channels(const Shape& x) { return static_cast<int>(x.back()); }

std::vector<HostTensor> BatchNormReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const Shape& x = in[0].shape;
  const Shape c = {x.back()};
  ref::BatchNormResult r =
      ref::BatchNorm(in[0].values, Rows(x), Channels(x), in[1].values, in[2].values, a.epsilon);
  return {HostTensor{x, std::move(r.y)}, HostTensor{c, std::move(r.mean)},
          HostTensor{c, std::move(r.variance)}};
}

std::vector<HostTensor> InferenceReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const Shape& x = in[0].shape;
  return {
      HostTensor{x, ref::BatchNormInference(in[0].values, Rows(x), Channels(x), in[1].values,
                                            in[2].values, in[3].values, in[4].values, a.epsilon)}};
}

// Through the batch statistics, which the reference computes again from x
// (the mean and variance given are the forward's, rounded to float).
std::vector<HostTensor> BackwardReference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const Shape& x = in[0].shape;
  const Shape c = {x.back()};
  ref::BatchNormGrads g = ref::BatchNormBackward(in[0].values, Rows(x), Channels(x), in[1].values,
                                                 in[2].values, a.epsilon);
  return {HostTensor{x, std::move(g.dx)}, HostTensor{c, std::move(g.dgamma)},
          HostTensor{c, std::move(g.dbeta)}};
}

// x, dy, gamma and the forward's statistics.
std::vector<HostTensor> BackwardInputs(absl::Span<const HostTensor> in,
                                       absl::Span<const HostTensor> out, const HostTensor& dy,
                                       const OpAttrs&) {
  return {in[0], dy, in[1], RoundedToFloat(out[1]), RoundedToFloat(out[2])};
}

// 4-D and 2-D, one example per channel (variance 0), 16 and 32 channels,
// a seed_cnn-sized map.
std::vector<Shape> BatchNormShapeCases() {
  return {{2, 3, 4, 5}, {4, 7}, {1, 1, 1, 3}, {6, 16}, {3, 5, 5, 16}, {4, 7, 7, 32}};
}

// Off-center inputs, so the mean matters; gamma near 1, beta near 0.
std::vector<OpCase> BatchNormCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const Shape& x : BatchNormShapeCases()) {
    const Shape c = {x.back()};
    OpCase oc;
    oc.name = absl::StrCat("x ", ShapeText(x));
    oc.inputs = {RandomTensor(rng, x, -0.5, 2.0), RandomTensor(rng, c, 0.5, 1.5),
                 RandomTensor(rng, c, -0.5, 0.5)};
    oc.terms = Rows(x);  // each statistic sums a channel's values
    cases.push_back(std::move(oc));
  }
  return cases;
}

// Other statistics than the batch's, as the moving ones are.
std::vector<OpCase> InferenceCases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const Shape& x : BatchNormShapeCases()) {
    const Shape c = {x.back()};
    OpCase oc;
    oc.name = absl::StrCat("x ", ShapeText(x));
    oc.inputs = {RandomTensor(rng, x, -0.5, 2.0), RandomTensor(rng, c, 0.5, 1.5),
                 RandomTensor(rng, c, -0.5, 0.5), RandomTensor(rng, c, -1, 1),
                 RandomTensor(rng, c, 0.1, 2)};
    cases.push_back(std::move(oc));
  }
  return cases;
}

}  // namespace

std::vector<OpDef> BatchNormOpDefs() {
  OpDef bn = Define(bn::kBatchNorm, 3, 3, BatchNormShapes, BatchNormReference);
  bn.float32_inputs = 0b110;   // gamma, beta
  bn.float32_outputs = 0b110;  // mean, variance
  bn.cases = BatchNormCases;
  OpDef inference = Define(bn::kBatchNormInference, 5, 1, InferenceShapes, InferenceReference);
  inference.float32_inputs = 0b11110;
  inference.cases = InferenceCases;
  inference.in_place = {0};
  OpDef backward = Define(bn::kBatchNormBackward, 5, 3, BackwardShapes, BackwardReference);
  backward.float32_inputs = 0b11100;  // gamma, mean, variance
  backward.float32_outputs = 0b110;   // dgamma, dbeta
  backward.in_place = {1};
  // A smooth function: a step of 1e-4 keeps the central difference exact
  // to ~1e-8.
  backward.gradient = {bn::kBatchNorm, 0, BackwardInputs, /*exact=*/false, 1e-4};
  return {bn, inference, backward};
}

}  // namespace ops
}  // namespace psc
