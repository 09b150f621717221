#include "common/compute/regression_loss.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {
namespace {

using ::testing::HasSubstr;

// One example's loss as Keras writes it, in long double from its formula.
long double KerasExampleLoss(LossKind kind, const float* o, const float* t, int units,
                             long double delta) {
  long double sum = 0;
  for (int j = 0; j < units; ++j) {
    const long double e = static_cast<long double>(o[j]) - t[j];
    switch (kind) {
      case LossKind::kMeanSquaredError:
        sum += e * e;
        break;
      case LossKind::kMeanAbsoluteError:
        sum += std::fabs(e);
        break;
      default:
        sum += std::fabs(e) <= delta ? 0.5L * e * e : delta * std::fabs(e) - 0.5L * delta * delta;
        break;
    }
  }
  return sum / units;
}

TEST(RegressionLossTest, LossAndGradientAreKerassWithWeights) {
  const int units = 2;
  // Errors on both sides of Huber's delta (1.5), none at 0 (where |e| has
  // no central difference).
  const std::vector<float> outputs = {0.5f, -2.0f, 3.0f, 0.25f, -1.0f, 4.0f};
  const std::vector<float> targets = {0.0f, 1.0f, 0.5f, 0.0f, -0.75f, 1.0f};
  const std::vector<float> weights = {1.0f, 2.5f, 0.0f};
  for (LossKind kind :
       {LossKind::kMeanSquaredError, LossKind::kMeanAbsoluteError, LossKind::kHuber}) {
    SCOPED_TRACE(static_cast<int>(kind));
    LossOptions o;
    o.kind = kind;
    o.grad_scale = 0.5f;
    o.weights = weights;
    o.targets = targets;
    o.huber_delta = 1.5f;
    std::vector<float> grad(outputs.size());
    double loss = 0;
    ASSERT_TRUE(RegressionLoss(outputs, units, o, absl::MakeSpan(grad), &loss).ok());
    long double want = 0;
    for (int i = 0; i < 3; ++i) {
      want += weights[i] *
              KerasExampleLoss(kind, &outputs[i * units], &targets[i * units], units, 1.5L);
      for (int j = 0; j < units; ++j) {
        // Central differences of the weighted, scaled loss.
        std::vector<float> plus(outputs.begin() + i * units, outputs.begin() + (i + 1) * units);
        std::vector<float> minus = plus;
        const float h = 1e-3f;
        plus[j] += h;
        minus[j] -= h;
        const long double numeric =
            (KerasExampleLoss(kind, plus.data(), &targets[i * units], units, 1.5L) -
             KerasExampleLoss(kind, minus.data(), &targets[i * units], units, 1.5L)) /
            (static_cast<long double>(plus[j]) - minus[j]) * weights[i] * 0.5L;
        EXPECT_NEAR(grad[i * units + j], static_cast<double>(numeric),
                    1e-5 + 1e-4 * std::fabs(static_cast<double>(numeric)))
            << "example " << i << " unit " << j;
      }
    }
    EXPECT_NEAR(loss, static_cast<double>(want), 1e-9 * std::fabs(static_cast<double>(want)));
  }
}

TEST(RegressionLossTest, AbsoluteErrorHasNoGradientWhereOutputEqualsTarget) {
  const std::vector<float> outputs = {1.0f, 2.0f};
  const std::vector<float> targets = {1.0f, 1.0f};
  LossOptions o;
  o.kind = LossKind::kMeanAbsoluteError;
  o.targets = targets;
  std::vector<float> grad(2);
  double loss = 0;
  ASSERT_TRUE(RegressionLoss(outputs, 1, o, absl::MakeSpan(grad), &loss).ok());
  EXPECT_EQ(grad[0], 0.0f);  // JAX's d|x|/dx at 0
  EXPECT_EQ(grad[1], 1.0f);
  EXPECT_DOUBLE_EQ(loss, 1.0);
}

TEST(RegressionLossTest, RefusesSizesThatDoNotAgree) {
  const std::vector<float> outputs = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> three = {0.0f, 0.0f, 0.0f};
  const std::vector<float> four = {0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> grad(4);
  double loss = 0;
  LossOptions o;
  o.kind = LossKind::kMeanSquaredError;
  o.targets = three;
  EXPECT_THAT(RegressionLoss(outputs, 2, o, absl::MakeSpan(grad), &loss).message(),
              HasSubstr("3 targets"));
  o.targets = four;
  EXPECT_FALSE(RegressionLoss(outputs, 3, o, absl::MakeSpan(grad), &loss).ok());  // 4 % 3
  EXPECT_FALSE(RegressionLoss(outputs, 0, o, absl::MakeSpan(grad), &loss).ok());
  const std::vector<float> weights = {1.0f};
  o.weights = weights;
  EXPECT_THAT(RegressionLoss(outputs, 2, o, absl::MakeSpan(grad), &loss).message(),
              HasSubstr("1 weights for 2 examples"));
  o.weights = {};
  o.kind = LossKind::kHuber;
  o.huber_delta = 0;
  EXPECT_THAT(RegressionLoss(outputs, 2, o, absl::MakeSpan(grad), &loss).message(),
              HasSubstr("delta"));
  o.kind = LossKind::kBinaryCrossEntropy;
  EXPECT_FALSE(RegressionLoss(outputs, 2, o, absl::MakeSpan(grad), &loss).ok());
}

}  // namespace
}  // namespace compute
}  // namespace psc
