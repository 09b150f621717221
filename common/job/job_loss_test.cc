#include "common/job/job_loss.h"

#include <vector>

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

}  // namespace
}  // namespace job
}  // namespace psc
