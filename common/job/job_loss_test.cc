#include "common/job/job_loss.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/keras/keras_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace job {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

proto::JobSpec Job(bool sum, float smoothing) {
  proto::JobSpec job;
  job.set_batch_size(64);
  job.mutable_loss()->set_name("categorical_crossentropy");
  job.mutable_loss()->set_reduction_sum(sum);
  job.mutable_loss()->set_label_smoothing(smoothing);
  return job;
}

TEST(JobLossTest, MeanUsesTheMeanScaleAndSumTheSumScale) {
  const std::vector<float> w = {1, 2};
  const JobLoss mean(Job(false, 0.1f));
  compute::LossOptions o = mean.Step(0.25f, 3.0f, w);
  EXPECT_EQ(o.grad_scale, 0.25f);
  EXPECT_EQ(o.label_smoothing, 0.1f);
  EXPECT_EQ(o.weights.data(), w.data());
  EXPECT_DOUBLE_EQ(mean.Shown(0.5), 0.5);
  const JobLoss sum(Job(true, 0));
  o = sum.Step(0.25f, 3.0f, {});
  EXPECT_EQ(o.grad_scale, 3.0f);
  EXPECT_TRUE(o.weights.empty());
  // Keras shows a batch's sum: the mean per example times the batch.
  EXPECT_DOUBLE_EQ(sum.Shown(0.5), 32.0);
}

TEST(JobLossTest, TextNamesWhatIsNotKerasDefault) {
  EXPECT_EQ(JobLoss().Text(), "sparse_categorical_crossentropy");
  proto::JobSpec job = Job(true, 0.1f);
  (*job.mutable_loss()->mutable_class_weight())[1] = 5;
  (*job.mutable_loss()->mutable_class_weight())[0] = 0.5;
  EXPECT_EQ(JobLoss(job).Text(),
            "categorical_crossentropy (label_smoothing 0.1, reduction sum), class_weight {0: 0.5, "
            "1: 5}");
}

TEST(JobLossTest, ExampleWeightsMultiplyClassWeightsIntoSampleWeights) {
  proto::LossSpec loss;
  EXPECT_TRUE(ExampleWeights({0, 1, 2}, {}, loss).empty()) << "neither: unweighted";
  EXPECT_THAT(ExampleWeights({0, 1, 2}, {0.5f, 1, 2}, loss), ElementsAre(0.5f, 1, 2));
  (*loss.mutable_class_weight())[1] = 4;
  // A class without an entry weighs 1 (Keras's class_weight_to_sample_weights).
  EXPECT_THAT(ExampleWeights({0, 1, 2, 1}, {}, loss), ElementsAre(1, 4, 1, 4));
  EXPECT_THAT(ExampleWeights({0, 1}, {0.5f, 0.5f}, loss), ElementsAre(0.5f, 2));
}

TEST(JobLossTest, ParseClassWeight) {
  proto::LossSpec loss;
  ASSERT_TRUE(ParseClassWeight(" 0:1, 2:5.5 ", 3, &loss).ok());
  EXPECT_EQ(loss.class_weight().size(), 2u);
  EXPECT_EQ(loss.class_weight().at(2), 5.5f);
  ASSERT_TRUE(ParseClassWeight("", 3, &loss).ok());
  EXPECT_TRUE(loss.class_weight().empty());
  for (const char* bad :
       {"3:1", "-1:1", "0:-1", "0:nan", "0:inf", "0", "a:1", "0:1:2", "0:1,", "0:1e39"}) {
    absl::Status s = ParseClassWeight(bad, 3, &loss);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--class_weight=")) << bad;
    EXPECT_TRUE(loss.class_weight().empty()) << bad << ": nothing half-set";
  }
  absl::Status twice = ParseClassWeight("0:1,0:2", 3, &loss);
  EXPECT_THAT(twice.message(), HasSubstr("class 0 is given twice"));
}

compute::Model ModelEndingIn(int units, const std::string& activation) {
  const std::string config =
      absl::StrCat(R"({"class_name": "Sequential", "config": {"name": "m", "layers": [)",
                   R"({"class_name": "InputLayer", "config": {"batch_shape": [null, 4]}},)",
                   R"({"class_name": "Dense", "config": {"name": "d", "units": )", units,
                   R"(, "activation": ")", activation, R"("}}]}})");
  auto m = keras::ModelFromKerasConfig(config, "m.json");
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

// Each loss takes the outputs it is defined on; anything else names the
// model's output and what the loss takes.
TEST(JobLossTest, TheLossMustFitTheModelsOutput) {
  proto::LossSpec sparse, binary;
  binary.set_name("binary_crossentropy");
  EXPECT_TRUE(CheckLossFitsModel(sparse, ModelEndingIn(3, "linear"), "m").ok());
  EXPECT_TRUE(CheckLossFitsModel(sparse, ModelEndingIn(3, "softmax"), "m").ok());
  EXPECT_TRUE(CheckLossFitsModel(binary, ModelEndingIn(1, "sigmoid"), "m").ok());
  EXPECT_TRUE(CheckLossFitsModel(binary, ModelEndingIn(1, "linear"), "m").ok());
  EXPECT_EQ(LabelClasses(binary, ModelEndingIn(1, "sigmoid")), 2);
  EXPECT_EQ(LabelClasses(sparse, ModelEndingIn(3, "linear")), 3);
  const struct {
    const proto::LossSpec* loss;
    int units;
    const char* activation;
    const char* message;
  } bad[] = {
      {&sparse, 1, "sigmoid",
       "m: the model outputs 1 unit (sigmoid); sparse_categorical_crossentropy takes the logits "
       "or the softmax of >= 2 classes"},
      {&sparse, 1, "sigmoid", "compile it with binary_crossentropy"},
      {&sparse, 1, "linear", "takes the logits or the softmax of >= 2 classes"},
      {&sparse, 3, "relu", "m: the model outputs 3 units (relu)"},
      {&binary, 2, "sigmoid", "binary_crossentropy takes one unit, a sigmoid or a logit"},
      {&binary, 1, "tanh", "m: the model outputs 1 unit (tanh); binary_crossentropy takes"},
  };
  for (const auto& b : bad) {
    const absl::Status s = CheckLossFitsModel(*b.loss, ModelEndingIn(b.units, b.activation), "m");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.message;
    EXPECT_THAT(s.message(), HasSubstr(b.message));
  }
}

// A regression: float targets into the options, Huber's delta, no
// accuracy, and any output but a softmax.
TEST(JobLossTest, ARegressionHasTargetsADeltaAndNoAccuracy) {
  proto::JobSpec job;
  job.mutable_loss()->set_name("huber");
  job.mutable_loss()->set_huber_delta(2.0f);
  const JobLoss huber(job);
  EXPECT_TRUE(huber.regression());
  const std::vector<float> t = {1, 2, 3};
  const compute::LossOptions o = huber.Step(0.5f, 1.0f, {}, t);
  EXPECT_EQ(o.kind, compute::LossKind::kHuber);
  EXPECT_EQ(o.targets.data(), t.data());
  EXPECT_EQ(o.huber_delta, 2.0f);
  EXPECT_EQ(huber.Text(), "huber (delta 2)");
  EXPECT_TRUE(std::isnan(huber.Accuracy(3, 4)));
  job.mutable_loss()->set_name("mean_squared_error");
  job.mutable_loss()->set_huber_delta(0);
  EXPECT_EQ(JobLoss(job).Step(1, 1, {}).kind, compute::LossKind::kMeanSquaredError);
  EXPECT_EQ(JobLoss(job).Step(1, 1, {}).huber_delta, 1.0f) << "Keras's default";
  EXPECT_DOUBLE_EQ(JobLoss().Accuracy(3, 4), 0.75);
  EXPECT_DOUBLE_EQ(JobLoss().Accuracy(0, 0), 0.0);
  EXPECT_TRUE(IsRegressionLoss(job.loss()));
  EXPECT_FALSE(IsRegressionLoss(proto::LossSpec()));
  EXPECT_TRUE(CheckLossFitsModel(job.loss(), ModelEndingIn(3, "linear"), "m").ok());
  EXPECT_TRUE(CheckLossFitsModel(job.loss(), ModelEndingIn(1, "sigmoid"), "m").ok());
  const absl::Status s = CheckLossFitsModel(job.loss(), ModelEndingIn(3, "softmax"), "m");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("mean_squared_error is a regression: it takes an output "
                                     "without a softmax"));
}

}  // namespace
}  // namespace job
}  // namespace psc
