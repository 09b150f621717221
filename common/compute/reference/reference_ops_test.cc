#include "common/compute/reference/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {
namespace reference {
namespace {

using ::testing::ElementsAre;

// |got - want| <= atol + rtol * |want| elementwise; names the first mismatches.
::testing::AssertionResult AllClose(const std::vector<double>& got, const std::vector<double>& want,
                                    double rtol, double atol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " values, want " << want.size();
  }
  int bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]);
    if (!(err <= atol + rtol * std::abs(want[i]))) {
      if (++bad <= 5) absl::StrAppend(&first, " [", i, "] got ", got[i], " want ", want[i], ";");
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " differ:" << first;
}

// Tolerances for the pure-double finite-difference checks: the functions are
// linear (or smooth) in the perturbed input, so central differences are exact
// up to rounding (~1e-16 |L| / eps).
constexpr double kFdRtol = 1e-6;
constexpr double kFdAtol = 1e-8;
constexpr double kFdEps = 1e-3;

constexpr Window2D kSame3{3, 3, 1, 1, true};   // Keras's Conv2D(3, padding="same")
constexpr Window2D kPool2{2, 2, 2, 2, false};  // Keras's MaxPooling2D()

// ---- Hand-computed cases ----

TEST(ReferenceConv2DTest, AllOnesKernelSumsTheZeroPaddedNeighbourhood) {
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // 1x3x3x1
  const std::vector<double> k(9, 1.0);
  EXPECT_THAT(Conv2D(x, 1, 3, 3, 1, k, {0.5}, 1, kSame3, /*relu=*/false),
              ElementsAre(12.5, 21.5, 16.5, 27.5, 45.5, 33.5, 24.5, 39.5, 28.5));
}

TEST(ReferenceConv2DTest, KernelIsCrossCorrelationInHwioOrder) {
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  // Only the top-left tap (ky=0, kx=0): y[i][j] = x[i-1][j-1], a shift down-right.
  std::vector<double> k(9, 0.0);
  k[0] = 1;
  EXPECT_THAT(Conv2D(x, 1, 3, 3, 1, k, {0}, 1, kSame3, false),
              ElementsAre(0, 0, 0, 0, 1, 2, 0, 4, 5));
  // Only the bottom-right tap (ky=2, kx=2): y[i][j] = x[i+1][j+1].
  k[0] = 0;
  k[8] = 1;
  EXPECT_THAT(Conv2D(x, 1, 3, 3, 1, k, {0}, 1, kSame3, false),
              ElementsAre(5, 6, 0, 8, 9, 0, 0, 0, 0));
  // Only the right-middle tap (ky=1, kx=2): y[i][j] = x[i][j+1].
  k[8] = 0;
  k[5] = 1;
  EXPECT_THAT(Conv2D(x, 1, 3, 3, 1, k, {0}, 1, kSame3, false),
              ElementsAre(2, 3, 0, 5, 6, 0, 8, 9, 0));
}

TEST(ReferenceConv2DTest, ChannelsIndexAsHwioAndReluClamps) {
  // 1x1x1x2 input, 3 outputs: only the centre tap (1,1) sees the pixel.
  const std::vector<double> x = {2, 3};
  std::vector<double> k(9 * 2 * 3, 100.0);  // off-centre taps read padding
  const int centre = (1 * 3 + 1) * 2 * 3;   // [1][1][c][o] = centre + c*3 + o
  const double kc[2][3] = {{1, 2, 3}, {4, 5, 6}};
  for (int c = 0; c < 2; ++c) {
    for (int o = 0; o < 3; ++o) k[centre + c * 3 + o] = kc[c][o];
  }
  // y[o] = 2*kc[0][o] + 3*kc[1][o] + b[o].
  EXPECT_THAT(Conv2D(x, 1, 1, 1, 2, k, {0, 0, -100}, 3, kSame3, false), ElementsAre(14, 19, -76));
  EXPECT_THAT(Conv2D(x, 1, 1, 1, 2, k, {0, 0, -100}, 3, kSame3, true), ElementsAre(14, 19, 0));
}

TEST(ReferenceConv2DTest, BackwardOfTheShiftKernelShiftsBack) {
  std::vector<double> k(9, 0.0);
  k[0] = 1;  // y[i][j] = x[i-1][j-1], so dx[i][j] = dy[i+1][j+1]
  const std::vector<double> dy = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_THAT(Conv2DBackwardData(dy, 1, 3, 3, 1, k, 1, kSame3),
              ElementsAre(5, 6, 0, 8, 9, 0, 0, 0, 0));
  // dw[0][0] = sum over outputs of x[i-1][j-1] * dy[i][j]; db = sum dy.
  const std::vector<double> x = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  const WeightGrads g = Conv2DBackwardWeights(x, 1, 3, 3, 1, dy, 1, kSame3);
  EXPECT_EQ(g.dw[0], 5 + 6 + 8 + 9);  // outputs with i, j >= 1
  EXPECT_EQ(g.dw[4], 45);             // centre tap sees every output
  EXPECT_EQ(g.dw[8], 1 + 2 + 4 + 5);  // outputs with i, j <= 1
  EXPECT_THAT(g.db, ElementsAre(45));
}

TEST(ReferenceReluTest, ForwardAndBackward) {
  EXPECT_THAT(Relu({-1, 0, 2}), ElementsAre(0, 0, 2));
  EXPECT_THAT(ReluBackward({0, 0, 2, 0.5}, {7, 8, 9, 10}), ElementsAre(0, 0, 9, 10));
}

TEST(ReferenceMaxPoolTest, TiesGoToTheFirstInRowMajorOrder) {
  // 1x2x4x1: window 0 = {5,5;5,1} (tie: first), window 1 = {1,7;7,2} (tie: (0,1)).
  const std::vector<double> x = {5, 5, 1, 7, 5, 1, 7, 2};
  EXPECT_THAT(MaxPool(x, 1, 2, 4, 1, kPool2), ElementsAre(5, 7));
  EXPECT_THAT(MaxPoolBackward(x, 1, 2, 4, 1, {10, 20}, kPool2),
              ElementsAre(10, 0, 0, 20, 0, 0, 0, 0));
}

TEST(ReferenceMaxPoolTest, FloorDropsTheLastRowAndColumn) {
  // 1x3x3x1 -> 1x1x1x1; the max 9 sits in the cut-off corner.
  const std::vector<double> x = {1, 2, 0, 4, 3, 0, 0, 0, 9};
  EXPECT_THAT(MaxPool(x, 1, 3, 3, 1, kPool2), ElementsAre(4));
  EXPECT_THAT(MaxPoolBackward(x, 1, 3, 3, 1, {1.5}, kPool2),
              ElementsAre(0, 0, 0, 1.5, 0, 0, 0, 0, 0));
}

TEST(ReferenceMaxPoolTest, ChannelsPoolIndependently) {
  // 1x2x2x2, channel 0 = {1,2,3,4}, channel 1 = {8,7,6,5}.
  const std::vector<double> x = {1, 8, 2, 7, 3, 6, 4, 5};
  EXPECT_THAT(MaxPool(x, 1, 2, 2, 2, kPool2), ElementsAre(4, 8));
  EXPECT_THAT(MaxPoolBackward(x, 1, 2, 2, 2, {1, 2}, kPool2), ElementsAre(0, 2, 0, 0, 0, 0, 1, 0));
}

TEST(ReferenceWindowTest, ExtentsAsKerasPads) {
  int out = 0, before = 0;
  Extent(28, 3, 2, /*same=*/true, &out, &before);  // TF: pads 0 before, 1 after
  EXPECT_EQ(out, 14);
  EXPECT_EQ(before, 0);
  Extent(7, 3, 2, true, &out, &before);  // (4 - 1) * 2 + 3 - 7 = 2: 1 and 1
  EXPECT_EQ(out, 4);
  EXPECT_EQ(before, 1);
  Extent(5, 4, 1, true, &out, &before);  // 3: 1 before, 2 after
  EXPECT_EQ(out, 5);
  EXPECT_EQ(before, 1);
  Extent(7, 3, 2, false, &out, &before);
  EXPECT_EQ(out, 3);
  EXPECT_EQ(before, 0);
  Extent(2, 3, 1, false, &out, &before);  // no valid window
  EXPECT_EQ(out, 0);
}

TEST(ReferenceConv2DTest, StridedSamePadsAfterMoreThanBefore) {
  // 1x4x4x1, 3x3 all ones, strides 2, "same": out 2x2, pad 0 before and 1
  // after, so output (0,0) sums rows and columns 0..2.
  std::vector<double> x(16);
  for (int i = 0; i < 16; ++i) x[i] = i;
  const std::vector<double> k(9, 1.0);
  const Window2D win{3, 3, 2, 2, true};
  EXPECT_THAT(Conv2D(x, 1, 4, 4, 1, k, {}, 1, win, false),
              ElementsAre(0 + 1 + 2 + 4 + 5 + 6 + 8 + 9 + 10, 2 + 3 + 6 + 7 + 10 + 11,
                          8 + 9 + 10 + 12 + 13 + 14, 10 + 11 + 14 + 15));
}

TEST(ReferencePoolTest, SameAverageCountsOnlyTheInside) {
  // 1x3x3x1, 2x2 windows, strides 2, "same": out 2x2, pad 0 before, 1 after.
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const Window2D win{2, 2, 2, 2, true};
  EXPECT_THAT(AvgPool(x, 1, 3, 3, 1, win), ElementsAre(3, 4.5, 7.5, 9));
  EXPECT_THAT(MaxPool(x, 1, 3, 3, 1, win), ElementsAre(5, 6, 8, 9));
  EXPECT_THAT(AvgPoolBackward(1, 3, 3, 1, {4, 2, 2, 1}, win),
              ElementsAre(1, 1, 1, 1, 1, 1, 1, 1, 1));
}

TEST(ReferencePoolTest, OverlappingMaxWindowsAddTheirGradients) {
  // 1x1x3x1, windows of 1x2 with stride 1: both hold the 9 in the middle.
  const std::vector<double> x = {1, 9, 2};
  const Window2D win{1, 2, 1, 1, false};
  EXPECT_THAT(MaxPool(x, 1, 1, 3, 1, win), ElementsAre(9, 9));
  EXPECT_THAT(MaxPoolBackward(x, 1, 1, 3, 1, {10, 5}, win), ElementsAre(0, 15, 0));
}

TEST(ReferenceBatchNormTest, NormalizesEachChannel) {
  // rows 4, 2 channels: channel 0 = {1, 2, 3, 4} (mean 2.5, var 1.25),
  // channel 1 constant 7 (var 0).
  const std::vector<double> x = {1, 7, 2, 7, 3, 7, 4, 7};
  const BatchNormResult r = BatchNorm(x, 4, 2, {2, 1}, {0.5, -1}, 0.0);
  EXPECT_THAT(r.mean, ElementsAre(2.5, 7));
  EXPECT_THAT(r.variance, ElementsAre(1.25, 0));
  const double s = 2 / std::sqrt(1.25);
  EXPECT_NEAR(r.y[0], -1.5 * s + 0.5, 1e-12);
  EXPECT_NEAR(r.y[6], 1.5 * s + 0.5, 1e-12);
  EXPECT_TRUE(std::isnan(r.y[1]));  // 0 / 0 without epsilon
  EXPECT_THAT(BatchNormInference({1, 7}, 1, 2, {1, 1}, {0, 0}, {1, 7}, {4, 1}, 0.0),
              ElementsAre(0, 0));
}

TEST(ReferenceGradientTest, BatchNormBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(16);
  const int64_t rows = 6;
  const int c = 3;
  const std::vector<double> x = RandomUniform(&rng, rows * c, -1, 2);
  const std::vector<double> gamma = RandomUniform(&rng, c, 0.5, 1.5);
  const std::vector<double> beta = RandomUniform(&rng, c, -0.5, 0.5);
  const std::vector<double> r = RandomUniform(&rng, rows * c, -1, 1);
  const double eps = 1e-3;
  const BatchNormGrads g = BatchNormBackward(x, rows, c, r, gamma, eps);
  const auto loss_x = [&](const std::vector<double>& v) {
    return Dot(BatchNorm(v, rows, c, gamma, beta, eps).y, r);
  };
  const auto loss_g = [&](const std::vector<double>& v) {
    return Dot(BatchNorm(x, rows, c, v, beta, eps).y, r);
  };
  const auto loss_b = [&](const std::vector<double>& v) {
    return Dot(BatchNorm(x, rows, c, gamma, v, eps).y, r);
  };
  // Not linear in x: a smaller step.
  EXPECT_TRUE(AllClose(g.dx, NumericalGradient(loss_x, x, 1e-5), 1e-5, 1e-7));
  EXPECT_TRUE(AllClose(g.dgamma, NumericalGradient(loss_g, gamma, kFdEps), kFdRtol, kFdAtol));
  EXPECT_TRUE(AllClose(g.dbeta, NumericalGradient(loss_b, beta, kFdEps), kFdRtol, kFdAtol));
}

TEST(ReferenceDenseTest, KnownNumbers) {
  const std::vector<double> x = {1, 2, 3, 4, 5, 6};  // [2,3]
  const std::vector<double> w = {1, 0, 0, 1, 1, 1};  // [3,2]
  EXPECT_THAT(Dense(x, 2, 3, w, {0.5, -20}, 2, false), ElementsAre(4.5, -15, 10.5, -9));
  EXPECT_THAT(Dense(x, 2, 3, w, {0.5, -20}, 2, true), ElementsAre(4.5, 0, 10.5, 0));
  const std::vector<double> dy = {1, 2, 3, 4};  // [2,2]
  // dx = dy·wᵀ: row 0 = {1, 2, 3}, row 1 = {3, 4, 7}.
  EXPECT_THAT(DenseBackwardData(dy, 2, 2, w, 3), ElementsAre(1, 2, 3, 3, 4, 7));
  const WeightGrads g = DenseBackwardWeights(x, 2, 3, dy, 2);
  // dw = xᵀ·dy: [1*1+4*3, 1*2+4*4; 2+15, 4+20; 3+18, 6+24].
  EXPECT_THAT(g.dw, ElementsAre(13, 18, 17, 24, 21, 30));
  EXPECT_THAT(g.db, ElementsAre(4, 6));
}

TEST(ReferenceSoftmaxCrossEntropyTest, EqualLogitsGiveLogTwo) {
  absl::StatusOr<SoftmaxCrossEntropyResult> r = SoftmaxCrossEntropy({0, 0}, 1, 2, {0}, 0.5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->loss_sum, std::log(2.0));
  EXPECT_EQ(r->correct, 1);  // argmax of a tie is the first: 0
  EXPECT_THAT(r->dlogits, ElementsAre(-0.25, 0.25));
  r = SoftmaxCrossEntropy({0, 0}, 1, 2, {1}, 1.0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->correct, 0);
  EXPECT_THAT(r->dlogits, ElementsAre(0.5, -0.5));
}

TEST(ReferenceSoftmaxCrossEntropyTest, SumsRowsAndCountsCorrect) {
  // Row 0: logits {0, ln 3} -> p = {1/4, 3/4}, label 1 (correct).
  // Row 1: logits {ln 3, 0} -> p = {3/4, 1/4}, label 1 (wrong).
  const std::vector<double> logits = {0, std::log(3.0), std::log(3.0), 0};
  absl::StatusOr<SoftmaxCrossEntropyResult> r = SoftmaxCrossEntropy(logits, 2, 2, {1, 1}, 1.0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->loss_sum, -std::log(0.75) - std::log(0.25), 1e-15);
  EXPECT_EQ(r->correct, 1);
  EXPECT_TRUE(AllClose(r->dlogits, {0.25, -0.25, 0.75, -0.75}, 0, 1e-15));
}

TEST(ReferenceSoftmaxCrossEntropyTest, LargeLogitsStayFinite) {
  absl::StatusOr<SoftmaxCrossEntropyResult> r =
      SoftmaxCrossEntropy({1000, 0, -1000, 1000, 1000, 999}, 2, 3, {1, 2}, 1.0);
  ASSERT_TRUE(r.ok()) << r.status();
  // Row 0: -log p[1] = 1000 + log(1 + e^-1000 + e^-2000) = 1000.
  // Row 1: -log p[2] = 1 + log(2 + e^-1).
  EXPECT_NEAR(r->loss_sum, 1000 + 1 + std::log(2 + std::exp(-1.0)), 1e-9);
  EXPECT_EQ(r->correct, 0);
  for (double d : r->dlogits) EXPECT_TRUE(std::isfinite(d));
  EXPECT_NEAR(r->dlogits[0], 1.0, 1e-12);
  EXPECT_NEAR(r->dlogits[1], -1.0, 1e-12);
}

// Keras's CategoricalCrossentropy(label_smoothing=0.2) on two classes:
// targets {0.9, 0.1}; equal logits give p = {1/2, 1/2}, loss log 2 and
// dlogits p - t. A weight scales the row's loss and gradient.
TEST(ReferenceSoftmaxCrossEntropyTest, SmoothedTargetsAndRowWeights) {
  absl::StatusOr<SoftmaxCrossEntropyResult> r =
      SoftmaxCrossEntropy({0, 0}, 1, 2, {0}, 1.0, /*label_smoothing=*/0.2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->loss_sum, std::log(2.0));
  EXPECT_TRUE(AllClose(r->dlogits, {0.5 - 0.9, 0.5 - 0.1}, 0, 1e-15));
  // Row 0: p = {1/4, 3/4}, t = {0.9, 0.1}: 0.9 log 4 + 0.1 log(4/3), weight 2.
  // Row 1: weight 0 contributes nothing, but its right answer counts.
  const std::vector<double> logits = {0, std::log(3.0), 5, -5};
  r = SoftmaxCrossEntropy(logits, 2, 2, {0, 0}, 0.5, 0.2, {2.0, 0.0});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->loss_sum, 2 * (0.9 * std::log(4.0) + 0.1 * std::log(4.0 / 3)), 1e-14);
  EXPECT_EQ(r->correct, 1) << "accuracy is not weighted";
  EXPECT_TRUE(
      AllClose(r->dlogits, {(0.25 - 0.9) * 2 * 0.5, (0.75 - 0.1) * 2 * 0.5, 0, 0}, 0, 1e-15));
  EXPECT_EQ(SoftmaxCrossEntropy(logits, 2, 2, {0, 1}, 1.0, 0, {1.0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceSoftmaxCrossEntropyTest, LabelOutOfRangeIsInvalidArgument) {
  EXPECT_EQ(SoftmaxCrossEntropy({0, 0}, 1, 2, {2}, 1.0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SoftmaxCrossEntropy({0, 0}, 1, 2, {-1}, 1.0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SoftmaxCrossEntropy({0, 0}, 1, 2, {0, 0}, 1.0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- Test support ----

TEST(ReferenceRandomTest, UsesTheRawDrawsOfTheStandardEngine) {
  std::mt19937 rng(5489);  // the standard fixes this engine's first output: 3499211612
  const std::vector<double> v = RandomUniform(&rng, 1, 0.0, 1.0);
  EXPECT_EQ(v[0], (3499211612u >> 8) / 16777216.0);
  std::mt19937 a(7), b(7);
  EXPECT_EQ(RandomUniform(&a, 100, -1, 1), RandomUniform(&b, 100, -1, 1));
  for (double e : RandomUniform(&a, 1000, -0.3, 0.7)) {
    EXPECT_GE(e, -0.3f);
    EXPECT_LT(e, 0.7);
    EXPECT_EQ(e, static_cast<float>(e));
  }
}

TEST(ReferenceRandomTest, DistinctIsAShuffledGrid) {
  std::mt19937 rng(3);
  std::vector<double> v = RandomDistinct(&rng, 5, -1, 1);
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_THAT(sorted, ElementsAre(-1, -0.5, 0, 0.5, 1));
  EXPECT_NE(v, sorted);  // shuffled (for this seed)
}

// ---- The reference backward ops against central differences of the forward ----

TEST(ReferenceGradientTest, Conv2DBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(11);
  for (bool relu : {false, true}) {
    SCOPED_TRACE(absl::StrCat("relu=", relu));
    const int n = 2, h = 5, w = 4, c = 3, kout = 4;
    const std::vector<double> x = RandomUniform(&rng, n * h * w * c, -1, 1);
    const std::vector<double> k = RandomUniform(&rng, 9 * c * kout, -1, 1);
    const std::vector<double> b = RandomUniform(&rng, kout, -0.5, 0.5);
    std::vector<double> r = RandomUniform(&rng, n * h * w * kout, -1, 1);
    // Keep the perturbations off the ReLU's kink: a step of kFdEps in one input
    // moves a pre-activation by at most kFdEps (|k| < 1), so outputs within 0.01
    // of zero get no weight.
    const std::vector<double> pre = Conv2D(x, n, h, w, c, k, b, kout, kSame3, false);
    if (relu) {
      for (size_t i = 0; i < r.size(); ++i) {
        if (std::abs(pre[i]) < 0.01) r[i] = 0;
      }
    }
    const std::vector<double> y = Conv2D(x, n, h, w, c, k, b, kout, kSame3, relu);
    const std::vector<double> dy = relu ? ReluBackward(y, r) : r;

    const auto loss_x = [&](const std::vector<double>& v) {
      return Dot(Conv2D(v, n, h, w, c, k, b, kout, kSame3, relu), r);
    };
    const auto loss_k = [&](const std::vector<double>& v) {
      return Dot(Conv2D(x, n, h, w, c, v, b, kout, kSame3, relu), r);
    };
    const auto loss_b = [&](const std::vector<double>& v) {
      return Dot(Conv2D(x, n, h, w, c, k, v, kout, kSame3, relu), r);
    };
    EXPECT_TRUE(AllClose(Conv2DBackwardData(dy, n, h, w, kout, k, c, kSame3),
                         NumericalGradient(loss_x, x, kFdEps), kFdRtol, kFdAtol));
    const WeightGrads g = Conv2DBackwardWeights(x, n, h, w, c, dy, kout, kSame3);
    EXPECT_TRUE(AllClose(g.dw, NumericalGradient(loss_k, k, kFdEps), kFdRtol, kFdAtol));
    EXPECT_TRUE(AllClose(g.db, NumericalGradient(loss_b, b, kFdEps), kFdRtol, kFdAtol));
  }
}

TEST(ReferenceGradientTest, ReluBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(12);
  // Inputs at least 0.1 away from the kink.
  std::vector<double> z = RandomUniform(&rng, 50, 0.1, 1.0);
  for (size_t i = 0; i < z.size(); i += 2) z[i] = -z[i];
  const std::vector<double> r = RandomUniform(&rng, z.size(), -1, 1);
  const auto loss = [&](const std::vector<double>& v) { return Dot(Relu(v), r); };
  EXPECT_TRUE(
      AllClose(ReluBackward(Relu(z), r), NumericalGradient(loss, z, kFdEps), kFdRtol, kFdAtol));
}

TEST(ReferenceGradientTest, MaxPool2x2BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(13);
  const int n = 2, h = 5, w = 7, c = 3;
  // Distinct values 2/209 > 2 kFdEps apart: no perturbation changes a window's max.
  const std::vector<double> x = RandomDistinct(&rng, n * h * w * c, -1, 1);
  const std::vector<double> r = RandomUniform(&rng, n * (h / 2) * (w / 2) * c, -1, 1);
  const auto loss = [&](const std::vector<double>& v) {
    return Dot(MaxPool(v, n, h, w, c, kPool2), r);
  };
  EXPECT_TRUE(AllClose(MaxPoolBackward(x, n, h, w, c, r, kPool2),
                       NumericalGradient(loss, x, kFdEps), kFdRtol, kFdAtol));
}

TEST(ReferenceGradientTest, DenseBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(14);
  for (bool relu : {false, true}) {
    SCOPED_TRACE(absl::StrCat("relu=", relu));
    const int n = 3, k = 7, m = 5;
    const std::vector<double> x = RandomUniform(&rng, n * k, -1, 1);
    const std::vector<double> wk = RandomUniform(&rng, k * m, -1, 1);
    const std::vector<double> b = RandomUniform(&rng, m, -0.5, 0.5);
    std::vector<double> r = RandomUniform(&rng, n * m, -1, 1);
    const std::vector<double> pre = Dense(x, n, k, wk, b, m, false);
    if (relu) {
      for (size_t i = 0; i < r.size(); ++i) {
        if (std::abs(pre[i]) < 0.01) r[i] = 0;
      }
    }
    const std::vector<double> dy = relu ? ReluBackward(Dense(x, n, k, wk, b, m, true), r) : r;
    const auto loss_x = [&](const std::vector<double>& v) {
      return Dot(Dense(v, n, k, wk, b, m, relu), r);
    };
    const auto loss_w = [&](const std::vector<double>& v) {
      return Dot(Dense(x, n, k, v, b, m, relu), r);
    };
    const auto loss_b = [&](const std::vector<double>& v) {
      return Dot(Dense(x, n, k, wk, v, m, relu), r);
    };
    EXPECT_TRUE(AllClose(DenseBackwardData(dy, n, m, wk, k), NumericalGradient(loss_x, x, kFdEps),
                         kFdRtol, kFdAtol));
    const WeightGrads g = DenseBackwardWeights(x, n, k, dy, m);
    EXPECT_TRUE(AllClose(g.dw, NumericalGradient(loss_w, wk, kFdEps), kFdRtol, kFdAtol));
    EXPECT_TRUE(AllClose(g.db, NumericalGradient(loss_b, b, kFdEps), kFdRtol, kFdAtol));
  }
}

TEST(ReferenceGradientTest, SoftmaxCrossEntropyGradientMatchesFiniteDifferences) {
  std::mt19937 rng(15);
  const int n = 4, m = 7;
  const double scale = 0.25;
  const std::vector<double> logits = RandomUniform(&rng, n * m, -4, 4);
  const std::vector<int32_t> labels = {0, 6, 3, 3};
  const auto loss = [&](const std::vector<double>& v) {
    return SoftmaxCrossEntropy(v, n, m, labels, scale).value().loss_sum * scale;
  };
  // The loss is not linear: a smaller step keeps the eps^2 error under 1e-9.
  EXPECT_TRUE(AllClose(SoftmaxCrossEntropy(logits, n, m, labels, scale).value().dlogits,
                       NumericalGradient(loss, logits, 1e-4), kFdRtol, kFdAtol));
  // With smoothed targets and row weights, as Keras's loss times sample_weight.
  const std::vector<double> w = {0.5, 2.0, 0.0, 1.25};
  const auto smoothed = [&](const std::vector<double>& v) {
    return SoftmaxCrossEntropy(v, n, m, labels, scale, 0.1, w).value().loss_sum * scale;
  };
  EXPECT_TRUE(AllClose(SoftmaxCrossEntropy(logits, n, m, labels, scale, 0.1, w).value().dlogits,
                       NumericalGradient(smoothed, logits, 1e-4), kFdRtol, kFdAtol));
}

}  // namespace
}  // namespace reference
}  // namespace compute
}  // namespace psc
