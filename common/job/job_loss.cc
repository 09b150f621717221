#include "common/job/job_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace psc {
namespace job {

JobLoss::JobLoss(const proto::JobSpec& job)
    : label_smoothing_(job.loss().label_smoothing()),
      reduction_sum_(job.loss().reduction_sum()),
      batch_size_(std::max<int64_t>(job.batch_size(), 1)) {
  if (!job.loss().name().empty()) name_ = job.loss().name();
  if (name_ == "binary_crossentropy") kind_ = compute::LossKind::kBinaryCrossEntropy;
  if (name_ == "mean_squared_error") kind_ = compute::LossKind::kMeanSquaredError;
  if (name_ == "mean_absolute_error") kind_ = compute::LossKind::kMeanAbsoluteError;
  if (name_ == "huber") kind_ = compute::LossKind::kHuber;
  if (job.loss().huber_delta() > 0) huber_delta_ = job.loss().huber_delta();
  for (const auto& [c, w] : job.loss().class_weight()) class_weight_.emplace_back(c, w);
  std::sort(class_weight_.begin(), class_weight_.end());
}

compute::LossOptions JobLoss::Step(float mean_scale, float sum_scale,
                                   absl::Span<const float> weights,
                                   absl::Span<const float> targets) const {
  compute::LossOptions o;
  o.grad_scale = reduction_sum_ ? sum_scale : mean_scale;
  o.kind = kind_;
  o.label_smoothing = label_smoothing_;
  o.weights = weights;
  o.targets = targets;
  o.huber_delta = huber_delta_;
  return o;
}

compute::LossOptions JobLoss::Eval(absl::Span<const float> weights,
                                   absl::Span<const float> targets) const {
  return Step(1.0f, 1.0f, weights, targets);
}

double JobLoss::Accuracy(int64_t correct, int64_t examples) const {
  if (regression()) return std::numeric_limits<double>::quiet_NaN();
  return examples > 0 ? static_cast<double>(correct) / static_cast<double>(examples) : 0.0;
}

double JobLoss::Shown(double mean_per_example) const {
  return reduction_sum_ ? mean_per_example * static_cast<double>(batch_size_) : mean_per_example;
}

std::string JobLoss::Text() const {
  std::vector<std::string> options;
  if (kind_ == compute::LossKind::kHuber && huber_delta_ != 1) {
    options.push_back(absl::StrCat("delta ", huber_delta_));
  }
  if (label_smoothing_ != 0) options.push_back(absl::StrCat("label_smoothing ", label_smoothing_));
  if (reduction_sum_) options.push_back("reduction sum");
  std::string out = name_;
  if (!options.empty()) absl::StrAppend(&out, " (", absl::StrJoin(options, ", "), ")");
  if (!class_weight_.empty()) {
    absl::StrAppend(&out, ", class_weight {",
                    absl::StrJoin(class_weight_, ", ",
                                  [](std::string* s, const std::pair<int32_t, float>& e) {
                                    absl::StrAppend(s, e.first, ": ", e.second);
                                  }),
                    "}");
  }
  return out;
}

absl::Status CheckLossFitsModel(const proto::LossSpec& loss, const compute::Model& model,
                                absl::string_view what) {
  const std::string name =
      loss.name().empty() ? std::string("sparse_categorical_crossentropy") : loss.name();
  const std::string act = model.output_activation();
  const std::string output = absl::StrCat(what, ": the model outputs ", model.classes(), " unit",
                                          model.classes() == 1 ? "" : "s",
                                          act == "linear" ? "" : absl::StrCat(" (", act, ")"));
  if (IsRegressionLoss(loss)) {
    // Any output but a softmax, whose fused cross-entropy would not leave
    // the probabilities for a regression to compare.
    if (act == "softmax") {
      return absl::InvalidArgumentError(absl::StrCat(
          output, "; ", name,
          " is a regression: it takes an output without a softmax (e.g. Dense(units))"));
    }
    return absl::OkStatus();
  }
  if (name == "binary_crossentropy") {
    if (model.classes() != 1 || (act != "sigmoid" && act != "linear")) {
      return absl::InvalidArgumentError(
          absl::StrCat(output,
                       "; binary_crossentropy takes one unit, a sigmoid or a logit (Dense(1, "
                       "activation=\"sigmoid\"), or Dense(1) with from_logits=True)"));
    }
    return absl::OkStatus();
  }
  if (model.classes() < 2 || (act != "linear" && act != "softmax")) {
    return absl::InvalidArgumentError(absl::StrCat(
        output, "; ", name,
        " takes the logits or the softmax of >= 2 classes (a last Dense without activation, or "
        "with a softmax)",
        model.classes() == 1 && act == "sigmoid"
            ? "; one sigmoid unit is a binary classifier: compile it with binary_crossentropy"
            : ""));
  }
  return absl::OkStatus();
}

bool IsRegressionLoss(const proto::LossSpec& loss) {
  return loss.name() == "mean_squared_error" || loss.name() == "mean_absolute_error" ||
         loss.name() == "huber";
}

int64_t LabelClasses(const proto::LossSpec& loss, const compute::Model& model) {
  return loss.name() == "binary_crossentropy" ? 2 : model.classes();
}

std::vector<float> ExampleWeights(const std::vector<int32_t>& labels,
                                  const std::vector<float>& sample_weight,
                                  const proto::LossSpec& loss) {
  if (sample_weight.empty() && loss.class_weight().empty()) return {};
  std::vector<float> w =
      sample_weight.empty() ? std::vector<float>(labels.size(), 1.0f) : sample_weight;
  if (loss.class_weight().empty()) return w;
  for (size_t i = 0; i < labels.size() && i < w.size(); ++i) {
    const auto it = loss.class_weight().find(labels[i]);
    if (it != loss.class_weight().end()) w[i] *= it->second;
  }
  return w;
}

absl::Status ParseClassWeight(const std::string& text, int64_t classes, proto::LossSpec* loss) {
  loss->clear_class_weight();
  if (text.empty()) return absl::OkStatus();
  for (absl::string_view pair : absl::StrSplit(text, ',')) {
    pair = absl::StripAsciiWhitespace(pair);
    const std::vector<absl::string_view> parts = absl::StrSplit(pair, ':');
    int32_t c = -1;
    double w = -1;
    const bool parsed = parts.size() == 2 &&
                        absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[0]), &c) &&
                        absl::SimpleAtod(absl::StripAsciiWhitespace(parts[1]), &w);
    if (!parsed || c < 0 || c >= classes || !std::isfinite(w) || w < 0 ||
        w > 3.4e38 /* a float */) {
      loss->clear_class_weight();
      return absl::InvalidArgumentError(absl::StrCat(
          "--class_weight=", text, ": \"", pair, "\" is not CLASS:WEIGHT with CLASS in [0, ",
          classes, ") and a finite WEIGHT >= 0 (e.g. --class_weight=0:1,1:5)"));
    }
    if (loss->class_weight().contains(c)) {
      loss->clear_class_weight();
      return absl::InvalidArgumentError(
          absl::StrCat("--class_weight=", text, ": class ", c, " is given twice"));
    }
    (*loss->mutable_class_weight())[c] = static_cast<float>(w);
  }
  return absl::OkStatus();
}

}  // namespace job
}  // namespace psc
