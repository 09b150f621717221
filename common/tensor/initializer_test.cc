#include "common/tensor/initializer.h"

#include <cmath>
#include <tuple>
#include <vector>

#include "common/tensor/initializer_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace tensor {
namespace {

using ::testing::HasSubstr;

// A server makes rows [first, first + n) of a table: they must be the rows
// of the whole table drawn at once, whichever range it asks for.
TEST(InitializerTest, RowsAreTheSameWhicheverRangeDrawsThem) {
  const std::vector<int64_t> shape = {1000, 6};
  for (Initializer init : {Initializer{Initializer::Kind::kRandomUniform, -0.05, 0.05},
                           Initializer{Initializer::Kind::kGlorotNormal},
                           Initializer{Initializer::Kind::kRandomNormal, 1, 2}}) {
    std::vector<float> whole(6000);
    InitializeRows(init, shape, 42, 3, 0, absl::MakeSpan(whole));
    std::vector<float> part(6 * 250);
    InitializeRows(init, shape, 42, 3, 517, absl::MakeSpan(part));
    for (int i = 0; i < 6 * 250; ++i) ASSERT_EQ(part[i], whole[517 * 6 + i]) << init.Text() << i;
    // Another seed, and another variable index, draw other rows.
    std::vector<float> other(6000);
    InitializeRows(init, shape, 43, 3, 0, absl::MakeSpan(other));
    EXPECT_NE(other, whole);
    InitializeRows(init, shape, 42, 4, 0, absl::MakeSpan(other));
    EXPECT_NE(other, whole);
  }
}

TEST(InitializerTest, DrawsFollowTheInitializer) {
  const std::vector<int64_t> shape = {4000, 8};
  std::vector<float> v(32000);
  InitializeRows({Initializer::Kind::kRandomUniform, -0.05, 0.05}, shape, 1, 0, 0,
                 absl::MakeSpan(v));
  double sum = 0, sq = 0;
  for (float x : v) {
    ASSERT_GE(x, -0.05f);
    ASSERT_LT(x, 0.05f);
    sum += x;
    sq += double{x} * x;
  }
  // U(-0.05, 0.05): mean 0, variance 0.1^2 / 12; 32,000 draws.
  EXPECT_NEAR(sum / v.size(), 0, 1e-3);
  EXPECT_NEAR(sq / v.size(), 0.01 / 12, 2e-5);
  // Neighbouring rows are not shifted copies of each other's streams.
  for (int r = 0; r + 1 < 100; ++r) {
    ASSERT_NE(std::vector<float>(v.begin() + r * 8 + 1, v.begin() + r * 8 + 8),
              std::vector<float>(v.begin() + (r + 1) * 8, v.begin() + (r + 1) * 8 + 7));
  }
  // Glorot over the whole table's fans, not the range's.
  InitializeRows({Initializer::Kind::kGlorotUniform}, shape, 1, 0, 10, absl::MakeSpan(v).first(8));
  const double limit = std::sqrt(6.0 / (4000 + 8));
  for (int i = 0; i < 8; ++i) EXPECT_LE(std::fabs(v[i]), limit);
}

// Keras's Orthogonal: the fewer of the rows and columns (the last axis)
// orthonormal, times the gain; a recurrent kernel [U, 4U] has orthonormal
// rows, a [4U, U] one orthonormal columns. An LSTM's forget-gate bias.
TEST(InitializerTest, OrthogonalAndTheForgetGateBias) {
  for (const auto& [r, c] : {std::pair<int64_t, int64_t>{4, 16}, {16, 4}, {5, 5}}) {
    const int64_t rows = r, cols = c;  // a lambda below takes them (not bindings, in C++17)
    std::vector<float> w(static_cast<size_t>(rows * cols));
    InitializeVariable({Initializer::Kind::kOrthogonal, 2.0}, {rows, cols}, 7, 1,
                       absl::MakeSpan(w));
    const bool by_rows = rows <= cols;
    const int64_t count = by_rows ? rows : cols, length = by_rows ? cols : rows;
    auto at = [&](int64_t v, int64_t i) { return by_rows ? w[v * cols + i] : w[i * cols + v]; };
    for (int64_t a = 0; a < count; ++a) {
      for (int64_t b = 0; b < count; ++b) {
        double dot = 0;
        for (int64_t i = 0; i < length; ++i) dot += double{at(a, i)} * at(b, i);
        EXPECT_NEAR(dot, a == b ? 4.0 : 0.0, 1e-5) << rows << "x" << cols << " " << a << "," << b;
      }
    }
    std::vector<float> again(w.size());
    InitializeVariable({Initializer::Kind::kOrthogonal, 2.0}, {rows, cols}, 8, 1,
                       absl::MakeSpan(again));
    EXPECT_NE(w, again);  // another seed, another matrix
  }
  std::vector<float> bias(12, -1.0f);
  InitializeVariable({Initializer::Kind::kUnitForgetBias, 3}, {12}, 1, 0, absl::MakeSpan(bias));
  EXPECT_EQ(bias, (std::vector<float>{0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
}

TEST(InitializerTest, TheWireFormRoundTripsAndRefusesWhatIsNotAnInitializer) {
  Initializer in{Initializer::Kind::kRandomNormal, 0.5, 2};
  Initializer out;
  ASSERT_TRUE(FromProto(ToProto(in), &out).ok());
  EXPECT_EQ(out.Text(), in.Text());
  proto::InitializerSpec bad;
  bad.set_kind(static_cast<proto::InitializerSpec::Kind>(42));
  EXPECT_THAT(FromProto(bad, &out).message(), HasSubstr("unknown initializer kind 42"));
  // Bounds whose values a float32 cannot hold: infinite, beyond FLT_MAX, a
  // uniform range that overflows, a negative standard deviation.
  for (auto [kind, a, b] : {std::tuple{Initializer::Kind::kRandomNormal, 0.5, double{INFINITY}},
                            std::tuple{Initializer::Kind::kConstant, 1e300, 0.0},
                            std::tuple{Initializer::Kind::kRandomUniform, -3e38, 3e38},
                            std::tuple{Initializer::Kind::kRandomNormal, 0.0, -1.0}}) {
    bad = ToProto({kind, a, b});
    EXPECT_THAT(FromProto(bad, &out).message(), HasSubstr("finite float32")) << a << " " << b;
  }
}

}  // namespace
}  // namespace tensor
}  // namespace psc
