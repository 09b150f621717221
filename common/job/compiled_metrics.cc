#include "common/job/compiled_metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace psc {
namespace job {
namespace {

double Ratio(double num, double den) { return den == 0 ? 0.0 : num / den; }

}  // namespace

MetricSums::MetricSums(std::vector<proto::CompiledMetric> metrics) : metrics_(std::move(metrics)) {
  for (const proto::CompiledMetric& m : metrics_) {
    if (m.kind() == proto::CompiledMetric::AUC && auc_buckets_ == 0) {
      auc_buckets_ = std::max(m.num_thresholds(), 2);
    }
  }
  Clear();
}

void MetricSums::Clear() {
  sums_.Clear();
  sums_.mutable_auc_positive()->Resize(auc_buckets_, 0);
  sums_.mutable_auc_negative()->Resize(auc_buckets_, 0);
}

void MetricSums::Add(absl::Span<const float> outputs, absl::Span<const int32_t> labels,
                     int64_t classes, absl::Span<const float> targets) {
  if (metrics_.empty() || classes < 1) return;
  if (!targets.empty()) {  // a regression: the errors alone
    const size_t size = std::min(outputs.size(), targets.size());
    double abs_sum = 0, sq_sum = 0;
    for (size_t i = 0; i < size; ++i) {
      const double d = static_cast<double>(outputs[i]) - targets[i];
      abs_sum += std::abs(d);
      sq_sum += d * d;
    }
    sums_.set_elements(sums_.elements() + static_cast<int64_t>(size));
    sums_.set_abs_sum(sums_.abs_sum() + abs_sum);
    sums_.set_sq_sum(sums_.sq_sum() + sq_sum);
    return;
  }
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(labels.size()),
                                      static_cast<int64_t>(outputs.size()) / classes);
  double abs_sum = 0, sq_sum = 0;
  int64_t tp = 0, fp = 0, fn = 0, binary = 0;
  const float scale = static_cast<float>(auc_buckets_ - 1);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < classes; ++j) {
      const float p = outputs[i * classes + j];
      // One output unit (binary_crossentropy): the label is its target.
      const bool one = classes == 1 ? labels[i] == 1 : labels[i] == j;
      const double d = static_cast<double>(p) - (one ? 1.0 : 0.0);
      abs_sum += std::abs(d);
      sq_sum += d * d;
      const bool positive = p > 0.5f;
      tp += positive && one;
      fp += positive && !one;
      fn += !positive && one;
      binary += positive == one;
      if (auc_buckets_ > 0) {
        const float clipped = std::min(std::max(p, 0.0f), 1.0f);
        const int64_t bucket =
            std::max<int64_t>(static_cast<int64_t>(std::ceil(clipped * scale)) - 1, 0);
        auto* counts = one ? sums_.mutable_auc_positive() : sums_.mutable_auc_negative();
        ++*counts->Mutable(static_cast<int>(std::min<int64_t>(bucket, auc_buckets_ - 1)));
      }
    }
  }
  sums_.set_elements(sums_.elements() + n * classes);
  sums_.set_abs_sum(sums_.abs_sum() + abs_sum);
  sums_.set_sq_sum(sums_.sq_sum() + sq_sum);
  sums_.set_true_positives(sums_.true_positives() + tp);
  sums_.set_false_positives(sums_.false_positives() + fp);
  sums_.set_false_negatives(sums_.false_negatives() + fn);
  sums_.set_binary_correct(sums_.binary_correct() + binary);
}

absl::Status MetricSums::Add(const proto::MetricSums& other) {
  const bool no_auc = other.auc_positive_size() == 0 && other.auc_negative_size() == 0;
  if (!no_auc &&
      (other.auc_positive_size() != auc_buckets_ || other.auc_negative_size() != auc_buckets_)) {
    return absl::InvalidArgumentError(absl::StrCat("metric sums with ", other.auc_positive_size(),
                                                   " and ", other.auc_negative_size(),
                                                   " AUC buckets for a job of ", auc_buckets_));
  }
  sums_.set_elements(sums_.elements() + other.elements());
  sums_.set_abs_sum(sums_.abs_sum() + other.abs_sum());
  sums_.set_sq_sum(sums_.sq_sum() + other.sq_sum());
  sums_.set_true_positives(sums_.true_positives() + other.true_positives());
  sums_.set_false_positives(sums_.false_positives() + other.false_positives());
  sums_.set_false_negatives(sums_.false_negatives() + other.false_negatives());
  sums_.set_binary_correct(sums_.binary_correct() + other.binary_correct());
  for (int b = 0; b < other.auc_positive_size(); ++b) {
    *sums_.mutable_auc_positive()->Mutable(b) += other.auc_positive(b);
    *sums_.mutable_auc_negative()->Mutable(b) += other.auc_negative(b);
  }
  return absl::OkStatus();
}

double RocAuc(absl::Span<const int64_t> positive, absl::Span<const int64_t> negative) {
  const size_t t = std::min(positive.size(), negative.size());
  if (t < 2) return 0;
  int64_t total_pos = 0, total_neg = 0;
  for (size_t b = 0; b < t; ++b) {
    total_pos += positive[b];
    total_neg += negative[b];
  }
  // Threshold i counts the elements of bucket >= i as predicted positive.
  std::vector<double> tpr(t), fpr(t);
  int64_t tp = 0, fp = 0;
  for (size_t i = t; i-- > 0;) {
    tp += positive[i];
    fp += negative[i];
    tpr[i] = Ratio(static_cast<double>(tp), static_cast<double>(total_pos));
    fpr[i] = Ratio(static_cast<double>(fp), static_cast<double>(total_neg));
  }
  double auc = 0;
  for (size_t i = 0; i + 1 < t; ++i) auc += (fpr[i] - fpr[i + 1]) * (tpr[i] + tpr[i + 1]) / 2;
  return auc;
}

MetricValues MetricSums::Values() const {
  MetricValues out;
  const double elements = static_cast<double>(sums_.elements());
  const double tp = static_cast<double>(sums_.true_positives());
  for (const proto::CompiledMetric& m : metrics_) {
    double v = 0;
    switch (m.kind()) {
      case proto::CompiledMetric::MAE:
        v = Ratio(sums_.abs_sum(), elements);
        break;
      case proto::CompiledMetric::MSE:
        v = Ratio(sums_.sq_sum(), elements);
        break;
      case proto::CompiledMetric::ROOT_MEAN_SQUARED_ERROR:
        v = std::sqrt(Ratio(sums_.sq_sum(), elements));
        break;
      case proto::CompiledMetric::PRECISION:
        v = Ratio(tp, tp + static_cast<double>(sums_.false_positives()));
        break;
      case proto::CompiledMetric::RECALL:
        v = Ratio(tp, tp + static_cast<double>(sums_.false_negatives()));
        break;
      case proto::CompiledMetric::AUC:
        v = RocAuc(sums_.auc_positive(), sums_.auc_negative());
        break;
      case proto::CompiledMetric::BINARY_ACCURACY:
        v = Ratio(static_cast<double>(sums_.binary_correct()), elements);
        break;
      default:
        continue;
    }
    out.emplace_back(m.name(), v);
  }
  return out;
}

}  // namespace job
}  // namespace psc
