#include "common/compute/binary_cross_entropy.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {
namespace {

using ::testing::HasSubstr;

// Keras's formula, written out in long double for one example.
long double KerasLoss(float out, int label, bool from_logits, long double s) {
  const long double t = label * (1 - s) + s / 2;
  if (from_logits) {
    const long double p = 1 / (1 + std::exp(-static_cast<long double>(out)));
    return -(t * std::log(p) + (1 - t) * std::log(1 - p));
  }
  const long double p = std::fmin(std::fmax(out, 1e-7f), 1.0f - 1e-7f);
  return -(t * std::log(p) + (1 - t) * std::log(1 - p));
}

TEST(BinaryCrossEntropyTest, LossAndGradientAreKerassWithWeightsAndSmoothing) {
  const std::vector<float> logits = {-3.0f, -0.2f, 0.0f, 0.7f, 4.0f, 1.5f};
  const std::vector<int32_t> labels = {0, 1, 1, 0, 1, 0};
  const std::vector<float> weights = {1.0f, 2.0f, 0.5f, 1.0f, 3.0f, 0.0f};
  for (bool from_logits : {true, false}) {
    for (float smoothing : {0.0f, 0.2f}) {
      SCOPED_TRACE(::testing::Message()
                   << "from_logits " << from_logits << " smoothing " << smoothing);
      std::vector<float> out = logits;
      if (!from_logits) {
        for (float& v : out) v = 1.0f / (1.0f + std::exp(-v));
      }
      LossOptions o;
      o.grad_scale = 0.25f;
      o.label_smoothing = smoothing;
      o.weights = weights;
      std::vector<float> grad(out.size());
      double loss = 0;
      int64_t correct = 0;
      ASSERT_TRUE(
          BinaryCrossEntropy(out, labels, from_logits, o, absl::MakeSpan(grad), &loss, &correct)
              .ok());
      long double want = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        want += weights[i] * KerasLoss(out[i], labels[i], from_logits, smoothing);
        // Central differences of the weighted, scaled loss in long double.
        const float h = from_logits ? 1e-3f : 1e-4f;
        const long double numeric = (KerasLoss(out[i] + h, labels[i], from_logits, smoothing) -
                                     KerasLoss(out[i] - h, labels[i], from_logits, smoothing)) /
                                    (2.0L * h) * weights[i] * 0.25L;
        EXPECT_NEAR(grad[i], static_cast<double>(numeric), 2e-4 + 1e-3 * std::fabs(numeric))
            << "example " << i;
      }
      EXPECT_NEAR(loss, static_cast<double>(want), 1e-9 * std::fabs(static_cast<double>(want)));
      // Binary accuracy, output > 0.5 (on logits too, as Keras): examples
      // 0 and 4 either way; example 2's logit 0 (probability 0.5) is not
      // above 0.5, and example 3's 0.7 (0.67) is.
      EXPECT_EQ(correct, 2);
    }
  }
}

// Probabilities are clipped to [1e-7, 1 - 1e-7] as Keras clips them: a
// saturated output has a finite loss and no gradient; logits never saturate.
TEST(BinaryCrossEntropyTest, SaturatedOutputsStayFinite) {
  const std::vector<float> out = {0.0f, 1.0f, 1e-9f};
  const std::vector<int32_t> labels = {1, 0, 1};
  std::vector<float> grad(3);
  double loss = 0;
  int64_t correct = 0;
  ASSERT_TRUE(
      BinaryCrossEntropy(out, labels, false, {}, absl::MakeSpan(grad), &loss, &correct).ok());
  const double lo = 1e-7f, hi = 1.0f - 1e-7f;
  EXPECT_NEAR(loss, -2 * std::log(lo) - std::log(1 - hi), 1e-9);
  EXPECT_EQ(correct, 0);
  EXPECT_THAT(grad, ::testing::Each(0.0f));
  const std::vector<float> logits = {-200.0f, 200.0f, 90.0f};
  ASSERT_TRUE(
      BinaryCrossEntropy(logits, labels, true, {}, absl::MakeSpan(grad), &loss, &correct).ok());
  EXPECT_NEAR(loss, 400.0, 1e-9);
  EXPECT_FLOAT_EQ(grad[0], -1.0f);
  EXPECT_FLOAT_EQ(grad[1], 1.0f);
  EXPECT_NEAR(grad[2], 0.0f, 1e-30);
  EXPECT_EQ(correct, 1);
}

TEST(BinaryCrossEntropyTest, BadArgumentsAreInvalidArgument) {
  std::vector<float> grad(2);
  double loss = 0;
  int64_t correct = 0;
  const std::vector<float> out = {0.5f, 0.5f};
  auto status = BinaryCrossEntropy(out, std::vector<int32_t>{0, 2}, false, {}, absl::MakeSpan(grad),
                                   &loss, &correct);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("label 2 of example 1 is not 0 or 1"));
  status = BinaryCrossEntropy(out, std::vector<int32_t>{0}, false, {}, absl::MakeSpan(grad), &loss,
                              &correct);
  EXPECT_THAT(status.message(), HasSubstr("2 outputs, 1 labels and 2 gradients"));
  const std::vector<float> w = {1.0f};
  LossOptions o;
  o.weights = w;
  status = BinaryCrossEntropy(out, std::vector<int32_t>{0, 1}, false, o, absl::MakeSpan(grad),
                              &loss, &correct);
  EXPECT_THAT(status.message(), HasSubstr("1 weights for 2 examples"));
  o = {};
  o.label_smoothing = 1.5f;
  status = BinaryCrossEntropy(out, std::vector<int32_t>{0, 1}, false, o, absl::MakeSpan(grad),
                              &loss, &correct);
  EXPECT_THAT(status.message(), HasSubstr("label_smoothing 1.5 is not in [0, 1]"));
}

}  // namespace
}  // namespace compute
}  // namespace psc
