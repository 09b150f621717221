#include "common/tensor/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/tensor/wire_dtype.h"
#include "gtest/gtest.h"

namespace psc {
namespace tensor {
namespace {

// The plain reference: every index sorted by (magnitude down, index up),
// the first k taken, then sorted ascending.
std::vector<uint32_t> ReferenceTopK(const std::vector<float>& v, int64_t k) {
  std::vector<uint32_t> all(v.size());
  for (size_t i = 0; i < v.size(); ++i) all[i] = static_cast<uint32_t>(i);
  auto mag = [](float x) { return std::isnan(x) ? INFINITY : std::fabs(x); };
  std::stable_sort(all.begin(), all.end(),
                   [&](uint32_t a, uint32_t b) { return mag(v[a]) > mag(v[b]); });
  all.resize(k);
  std::sort(all.begin(), all.end());
  return all;
}

TEST(TopKTest, CountIsTheCeilingOfTheRatioAndAtLeastOne) {
  EXPECT_EQ(TopKCount(1000, 0.01), 10);
  EXPECT_EQ(TopKCount(1001, 0.01), 11);
  EXPECT_EQ(TopKCount(10, 0.01), 1);
  EXPECT_EQ(TopKCount(1, 0.5), 1);
  EXPECT_EQ(TopKCount(3, 0.999), 3);
}

TEST(TopKTest, RatioMustBeZeroOrInsideTheOpenInterval) {
  EXPECT_TRUE(CheckTopKRatio(0).ok());
  EXPECT_TRUE(CheckTopKRatio(0.01).ok());
  for (double bad : {-0.1, 1.0, 1.5, std::nan(""), static_cast<double>(INFINITY)}) {
    absl::Status s = CheckTopKRatio(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--topk_ratio"), std::string::npos);
  }
}

TEST(TopKTest, SelectionMatchesTheReferenceWithTiesAndNaN) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (int trial = 0; trial < 50; ++trial) {
    const size_t n = 1 + rng() % 3000;
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    // Ties of magnitude (both signs) and a NaN.
    for (size_t i = 0; i + 3 < n; i += 7) v[i + 1] = -v[i];
    if (n > 5) v[n / 2] = std::nanf("");
    for (int64_t k : {int64_t{1}, TopKCount(n, 0.01), TopKCount(n, 0.3), static_cast<int64_t>(n)}) {
      EXPECT_EQ(SelectTopK(v, k), ReferenceTopK(v, k)) << "n " << n << " k " << k;
    }
  }
}

TEST(TopKTest, SparseRoundTripScattersTheValuesIntoZeros) {
  const std::vector<float> v = {0.5f, -3.0f, 0.25f, 2.0f, -0.125f, 1.0f};
  const std::vector<uint32_t> idx = SelectTopK(v, 3);
  ASSERT_EQ(idx, (std::vector<uint32_t>{1, 3, 5}));
  for (proto::DataType dtype : {proto::DT_FLOAT32, proto::DT_BFLOAT16, proto::DT_FLOAT16}) {
    proto::Tensor t;
    std::vector<float> sent;
    ASSERT_TRUE(SetSparseTensor({2, 3}, v, idx, dtype, &t, &sent).ok());
    EXPECT_EQ(t.indices().size(), 3 * sizeof(uint32_t));
    EXPECT_EQ(sent, (std::vector<float>{-3.0f, 2.0f, 1.0f}));  // exact in every dtype
    std::vector<float> out(6, 9.0f);
    ASSERT_TRUE(DecodeSparse(t, dtype, 3, "g", absl::MakeSpan(out)).ok());
    EXPECT_EQ(out, (std::vector<float>{0, -3.0f, 0, 2.0f, 0, 1.0f}));
  }
}

TEST(TopKTest, SentValuesAreWhatTheReceiverDecodes) {
  const std::vector<float> v = {1.0f + 1.0f / 1024, 0.1f};
  proto::Tensor t;
  std::vector<float> sent;
  ASSERT_TRUE(SetSparseTensor({2}, v, {0, 1}, proto::DT_BFLOAT16, &t, &sent).ok());
  std::vector<float> out(2);
  ASSERT_TRUE(DecodeSparse(t, proto::DT_BFLOAT16, 2, "g", absl::MakeSpan(out)).ok());
  EXPECT_EQ(sent, out);
  EXPECT_NE(sent[0], v[0]) << "bfloat16 rounds";
}

TEST(TopKTest, BadSparseTensorsAreRefusedByName) {
  proto::Tensor t;
  ASSERT_TRUE(SetSparseTensor({4}, {1, 2, 3, 4}, {1, 3}, proto::DT_FLOAT32, &t).ok());
  std::vector<float> out(4);
  auto code = [&](const proto::Tensor& bad, int64_t k = 2) {
    absl::Status s =
        DecodeSparse(bad, proto::DT_FLOAT32, k, "gradient for \"w\"", absl::MakeSpan(out));
    if (!s.ok()) {
      EXPECT_NE(s.message().find("gradient for \"w\""), std::string::npos) << s;
    }
    return s.code();
  };
  EXPECT_EQ(code(t), absl::StatusCode::kOk);
  EXPECT_EQ(code(t, 3), absl::StatusCode::kInvalidArgument) << "another ratio's k";
  proto::Tensor odd = t;
  odd.mutable_indices()->push_back('\0');
  EXPECT_EQ(code(odd), absl::StatusCode::kInvalidArgument);
  proto::Tensor short_data = t;
  short_data.mutable_data()->resize(4);
  EXPECT_EQ(code(short_data), absl::StatusCode::kInvalidArgument);
  for (std::vector<uint32_t> idx :
       {std::vector<uint32_t>{3, 1}, std::vector<uint32_t>{1, 1}, std::vector<uint32_t>{1, 4}}) {
    proto::Tensor bad = t;
    bad.mutable_indices()->assign(reinterpret_cast<const char*>(idx.data()), 8);
    EXPECT_EQ(code(bad), absl::StatusCode::kInvalidArgument) << idx[0] << "," << idx[1];
  }
  proto::Tensor dense;
  ASSERT_TRUE(SetWireTensor({4}, std::vector<float>{1, 2, 3, 4}, proto::DT_FLOAT32, &dense).ok());
  EXPECT_EQ(code(dense), absl::StatusCode::kInvalidArgument) << "a dense push under top-k";
}

}  // namespace
}  // namespace tensor
}  // namespace psc
