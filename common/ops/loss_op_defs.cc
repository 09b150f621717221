// The softmax cross-entropy's definition (its kernels: compute/loss_ops.h
// and each backend's *_loss_kernels.cc).
#include <cstdint>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/compute/loss_ops.h"
#include "common/compute/reference/reference_ops.h"
#include "common/ops/host_tensors.h"
#include "common/ops/op_def.h"

namespace psc {
namespace ops {
namespace {
namespace loss_defs {  // its own names: the OpDef files share one unity build

namespace ref = ::psc::compute::reference;
using compute::DType;
using compute::ShapeText;

constexpr const char* kOp = compute::loss::kSoftmaxCrossEntropy;

// logits [N,M], labels [N], weights [N] or absent: dlogits [N,M],
// loss_sum [1], correct [1].
absl::StatusOr<std::vector<Shape>> Shapes(absl::Span<const Shape> in, const OpAttrs&) {
  const Shape& logits = in[0];
  if (logits.size() != 2) {
    return Refuse(kOp, absl::StrCat("logits have shape ", ShapeText(logits), ", want [N,M]"));
  }
  const Shape n = {logits[0]};
  if (in[1] != n) {
    return Refuse(kOp, absl::StrCat("labels have shape ", ShapeText(in[1]), ", want ", ShapeText(n),
                                    " for logits ", ShapeText(logits)));
  }
  if (!in[2].empty() && in[2] != n) {
    return Refuse(kOp,
                  absl::StrCat("weights have shape ", ShapeText(in[2]), ", want ", ShapeText(n)));
  }
  return std::vector<Shape>{logits, {1}, {1}};
}

std::vector<HostTensor> Reference(absl::Span<const HostTensor> in, const OpAttrs& a) {
  const int n = Int(in[0].shape[0]), m = Int(in[0].shape[1]);
  const std::vector<int32_t> labels(in[1].values.begin(), in[1].values.end());
  const ref::SoftmaxCrossEntropyResult r =
      ref::SoftmaxCrossEntropy(in[0].values, n, m, labels, a.grad_scale, a.label_smoothing,
                               in[2].values)
          .value();
  return {HostTensor{in[0].shape, r.dlogits}, HostTensor{{1}, {r.loss_sum}, DType::kFloat64},
          HostTensor{{1}, {static_cast<double>(r.correct)}, DType::kInt64}};
}

HostTensor Labels(std::mt19937* rng, int n, int m) {
  HostTensor t{{n}, std::vector<double>(n), DType::kInt32};
  for (double& v : t.values) v = static_cast<double>((*rng)() % static_cast<uint32_t>(m));
  return t;
}

OpCase Case(std::string name, HostTensor logits, HostTensor labels, HostTensor weights,
            float grad_scale, float smoothing) {
  OpCase c;
  c.name = std::move(name);
  c.attrs.grad_scale = grad_scale;
  c.attrs.label_smoothing = smoothing;
  if (weights.shape.empty()) c.absent_inputs = 0b100;
  // A row's gradient sums M exponentials, the loss n x M terms.
  c.terms = logits.shape[0] * logits.shape[1];
  c.inputs = {std::move(logits), std::move(labels), std::move(weights)};
  return c;
}

// Odd and one-class shapes at the batch's mean; label smoothing with
// weights (sample_weight, class_weight); logits of +-1000 (each row's
// maximum subtracted first); argmax ties (the first counts); seed_cnn's
// batch of 4 over 10 classes.
std::vector<OpCase> Cases(std::mt19937* rng) {
  std::vector<OpCase> cases;
  for (const auto& [n, m] : {std::pair{1, 1}, {1, 2}, {3, 10}, {5, 17}, {2, 3}, {4, 101}}) {
    cases.push_back(Case(absl::StrCat("logits [", n, ",", m, "]"), RandomTensor(rng, {n, m}, -5, 5),
                         Labels(rng, n, m), HostTensor{}, 1.0f / static_cast<float>(n), 0.0f));
  }
  for (const auto& [n, m] : {std::pair{1, 2}, {3, 10}, {6, 17}}) {
    for (const float smoothing : {0.0f, 0.1f, 1.0f}) {
      cases.push_back(
          Case(absl::StrCat("logits [", n, ",", m, "] smoothing ", smoothing, " weighted"),
               RandomTensor(rng, {n, m}, -5, 5), Labels(rng, n, m), RandomTensor(rng, {n}, 0, 3),
               0.5f, smoothing));
    }
  }
  cases.push_back(
      Case("large logits",
           HostTensor{{4, 5}, {1000, -1000, 0,    999.5, 3,    -1000, -1000, 1000,  1000,  -1000,
                               1000, 1000,  1000, 1000,  1000, -1000, -999,  -1000, -1000, -1000}},
           HostTensor{{4}, {1, 3, 4, 1}, DType::kInt32}, HostTensor{}, 0.5f, 0.0f));
  // Row argmaxes 0, 1, 0: one, two and no labels right.
  for (const std::vector<double>& labels : {std::vector<double>{0, 2, 1}, {1, 1, 0}, {1, 2, 2}}) {
    cases.push_back(Case("argmax ties", HostTensor{{3, 3}, {1, 1, 0, 0, 2, 2, 3, 3, 3}},
                         HostTensor{{3}, labels, DType::kInt32}, HostTensor{}, 1.0f, 0.0f));
  }
  cases.push_back(Case("seed_cnn [4,10]", RandomTensor(rng, {4, 10}, -5, 5), Labels(rng, 4, 10),
                       HostTensor{}, 0.25f, 0.0f));
  return cases;
}

}  // namespace loss_defs
}  // namespace

std::vector<OpDef> LossOpDefs() {
  namespace d = loss_defs;
  OpDef loss = Define(compute::loss::kSoftmaxCrossEntropy, 3, 3, d::Shapes, d::Reference);
  loss.cases = d::Cases;
  return {loss};
}

}  // namespace ops
}  // namespace psc
