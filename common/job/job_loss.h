// The loss a job trains, as Keras computes it: the compile config's
// label_smoothing and reduction, fit's class_weight and sample_weight
// (JobSpec.loss, NumpyData.sample_weight), turned into what a step asks of
// the backend (compute::LossOptions) and what the progress lines show.
//
// A weighted loss is Keras's: sum over the batch of w * loss, divided by the
// batch's size under "sum_over_batch_size" (not by the weights' sum), not
// divided under "sum". In a sync step over R replica slots the servers
// average the slots' gradients: under "sum" each slot's gradient is scaled
// by the number averaged, so the step applies the sum over the global batch,
// as Keras on the whole batch would.
#ifndef PSC_COMMON_JOB_JOB_LOSS_H_
#define PSC_COMMON_JOB_JOB_LOSS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/compute/backend.h"
#include "common/compute/model.h"
#include "proto/job.pb.h"

namespace psc {
namespace job {

class JobLoss {
 public:
  JobLoss() = default;  // sparse_categorical_crossentropy, mean, unweighted
  explicit JobLoss(const proto::JobSpec& job);

  // A step's options. `mean_scale` is 1/n of the n examples whose mean the
  // applied gradient is meant to be (the caller's share); under "sum",
  // `sum_scale` replaces it (1 where the gradient is applied alone, the
  // number of gradients the servers average in a sync step). `weights` is
  // the batch's (empty: none); `targets` a regression's (n x the output's
  // units); the spans must outlive the options.
  compute::LossOptions Step(float mean_scale, float sum_scale, absl::Span<const float> weights,
                            absl::Span<const float> targets = {}) const;
  // Options for evaluation (grad_scale unused).
  compute::LossOptions Eval(absl::Span<const float> weights,
                            absl::Span<const float> targets = {}) const;
  // The loss Keras shows for a mean over examples (sum of w * loss over
  // the examples / their number): under "sum" a batch's sum, so times the
  // batch size.
  double Shown(double mean_per_example) const;

  bool reduction_sum() const { return reduction_sum_; }
  // A regression (mean_squared_error, mean_absolute_error, huber): float
  // targets, and no accuracy.
  bool regression() const { return compute::IsRegression(kind_); }
  // The accuracy of `correct` of `examples` (0 without examples); NaN for a
  // regression, which has none (written as null, left out of the lines).
  double Accuracy(int64_t correct, int64_t examples) const;
  float label_smoothing() const { return label_smoothing_; }
  // "sparse_categorical_crossentropy", with its options when not Keras's
  // defaults: "categorical_crossentropy (label_smoothing 0.1, reduction
  // sum)"; and ", class_weight {0: 1, 1: 5}" when there are class weights.
  std::string Text() const;

 private:
  std::string name_ = "sparse_categorical_crossentropy";
  compute::LossKind kind_ = compute::LossKind::kSoftmaxCrossEntropy;
  float label_smoothing_ = 0;
  float huber_delta_ = 1;
  bool reduction_sum_ = false;
  int64_t batch_size_ = 1;
  std::vector<std::pair<int32_t, float>> class_weight_;  // sorted by class
};

// Whether the model's output is what `loss` trains: the (sparse)
// categorical cross-entropies take >= 2 classes' logits or softmax (a Dense
// without activation, or with a softmax); binary_crossentropy takes one
// unit, a sigmoid or a logit. INVALID_ARGUMENT naming `what` (the model),
// its output and the loss otherwise.
absl::Status CheckLossFitsModel(const proto::LossSpec& loss, const compute::Model& model,
                                absl::string_view what);

// Whether `loss` is a regression (mean_squared_error, mean_absolute_error,
// huber): float targets of the output's shape instead of labels, and no
// accuracy reported.
bool IsRegressionLoss(const proto::LossSpec& loss);

// The range of the job's class ids: the model's classes, or 2 (the labels 0
// and 1) under binary_crossentropy.
int64_t LabelClasses(const proto::LossSpec& loss, const compute::Model& model);

// The training examples' weights: sample_weight (empty: 1 each) times the
// class weight of each label (a class without one: 1), as Keras's fit
// makes them (it refuses both at once; so does the flags' reader). Empty
// when there is neither.
std::vector<float> ExampleWeights(const std::vector<int32_t>& labels,
                                  const std::vector<float>& sample_weight,
                                  const proto::LossSpec& loss);

// --class_weight's text "0:1,1:5.5" (class:weight pairs; classes in
// [0, classes), weights finite and >= 0, each class once) into `loss`.
// INVALID_ARGUMENT naming the flag and the bad pair.
absl::Status ParseClassWeight(const std::string& text, int64_t classes, proto::LossSpec* loss);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_JOB_LOSS_H_
