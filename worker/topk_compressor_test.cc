#include "worker/topk_compressor.h"

#include <cmath>
#include <random>
#include <vector>

#include "common/tensor/tensor.h"
#include "common/tensor/topk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace worker {
namespace {

using ::testing::HasSubstr;

// "w" [4, 2] split over two shards (rows 0-1, 2-3), and "mean" [2], a
// moving average, whole.
proto::Placement TwoParts() {
  proto::Placement p;
  p.set_num_shards(2);
  proto::VariablePlacement* w = p.add_variables();
  w->set_name("w");
  w->add_shape(4);
  w->add_shape(2);
  for (int j = 0; j < 2; ++j) {
    proto::VariablePlacement::Part* part = w->add_parts();
    part->set_shard_variable("w/part_" + std::to_string(j));
    part->set_shard(j);
    part->set_first_axis_offset(2 * j);
    part->set_first_axis_size(2);
  }
  proto::VariablePlacement* m = p.add_variables();
  m->set_name("mean");
  m->add_shape(2);
  proto::VariablePlacement::Part* part = m->add_parts();
  part->set_shard_variable("mean");
  part->set_first_axis_size(2);
  // "w" is trainable, "mean" a moving average's statistic: dense.
  w->set_gradient(proto::GRADIENT_TOP_K);
  return p;
}

proto::NamedTensor Dense(const std::string& name, std::vector<int64_t> shape,
                         const std::vector<float>& v) {
  proto::NamedTensor t;
  t.set_name(name);
  tensor::SetFloatTensor(shape, v, t.mutable_tensor());
  return t;
}

// What a server makes of a pushed tensor: the dense values.
std::vector<float> Received(const proto::NamedTensor& t, int64_t k) {
  std::vector<float> out(tensor::NumElements(t.tensor().shape()));
  EXPECT_TRUE(
      tensor::DecodeSparse(t.tensor(), t.tensor().dtype(), k, t.name(), absl::MakeSpan(out)).ok());
  return out;
}

std::unique_ptr<TopKCompressor> Make(double ratio) {
  auto c = TopKCompressor::Create(ratio, TwoParts());
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

TEST(TopKCompressorTest, SendsTheLargestAndFeedsTheRestBack) {
  auto c = Make(0.25);  // 4 elements per part: k = 1
  std::vector<proto::NamedTensor> shard = {Dense("w/part_0", {2, 2}, {1, -3, 2, 0.5f}),
                                           Dense("mean", {2}, {7, 8})};
  ASSERT_TRUE(c->Encode(proto::DT_FLOAT32, &shard).ok());
  EXPECT_EQ(Received(shard[0], 1), (std::vector<float>{0, -3, 0, 0}));
  EXPECT_TRUE(shard[1].tensor().indices().empty()) << "a moving average's statistic is dense";
  EXPECT_EQ(tensor::FloatValues(shard[1].tensor()), (std::vector<float>{7, 8}));
  // Step 2: residual {1, 0, 2, 0.5} + gradient {1, 1, 0.5, 0}: 2.5 wins.
  shard = {Dense("w/part_0", {2, 2}, {1, 1, 0.5f, 0})};
  ASSERT_TRUE(c->Encode(proto::DT_FLOAT32, &shard).ok());
  EXPECT_EQ(Received(shard[0], 1), (std::vector<float>{0, 0, 2.5f, 0}));
  const proto::ErrorFeedback saved = c->Save(3, 2);
  EXPECT_EQ(saved.worker(), 3);
  EXPECT_EQ(saved.step(), 2);
  ASSERT_EQ(saved.residuals_size(), 1) << "all-zero residuals are left out";
  EXPECT_EQ(saved.residuals(0).name(), "w/part_0");
  EXPECT_EQ(tensor::FloatValues(saved.residuals(0).tensor()), (std::vector<float>{2, 1, 0, 0.5f}));
}

// No gradient is lost, only delayed: what was sent plus what is left is
// what the steps computed (exactly, with values exact in float32), and the
// rounding to a 16-bit wire dtype is fed back as well.
TEST(TopKCompressorTest, SentPlusResidualIsEverythingComputed) {
  for (proto::DataType wire : {proto::DT_FLOAT32, proto::DT_BFLOAT16}) {
    auto c = Make(0.5);
    std::mt19937 rng(5);
    std::vector<double> computed(4, 0.0), sent(4, 0.0);
    for (int step = 0; step < 20; ++step) {
      std::vector<float> g(4);
      for (size_t i = 0; i < 4; ++i) {
        g[i] = static_cast<float>(static_cast<int>(rng() % 64) - 32) / 8.0f;
        computed[i] += g[i];
      }
      std::vector<proto::NamedTensor> shard = {Dense("w/part_1", {2, 2}, g)};
      ASSERT_TRUE(c->Encode(wire, &shard).ok());
      EXPECT_EQ(shard[0].tensor().dtype(), wire);
      const std::vector<float> got = Received(shard[0], 2);
      for (size_t i = 0; i < 4; ++i) sent[i] += got[i];
    }
    const proto::ErrorFeedback left = c->Save(0, 20);
    std::vector<float> residual(4, 0.0f);
    for (const auto& r : left.residuals()) {
      if (r.name() == "w/part_1") residual = tensor::FloatValues(r.tensor());
    }
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_NEAR(sent[i] + residual[i], computed[i], 1e-4) << i << " wire " << wire;
    }
  }
}

TEST(TopKCompressorTest, LoadIsAllOrNothingAndResetZeros) {
  auto c = Make(0.25);
  proto::ErrorFeedback f;
  f.set_worker(1);
  f.set_step(5);
  *f.add_residuals() = Dense("w/part_1", {4}, {1, 2, 3, 4});
  ASSERT_TRUE(c->Load(f).ok());
  EXPECT_EQ(c->Save(1, 5).SerializeAsString(), f.SerializeAsString());

  proto::ErrorFeedback bad = f;
  *bad.add_residuals() = Dense("mean", {2}, {1, 1});  // not sparsified
  absl::Status s = c->Load(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"mean\""));
  bad = f;
  *bad.mutable_residuals(0) = Dense("w/part_1", {3}, {1, 2, 3});  // another size
  EXPECT_EQ(c->Load(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = f;
  *bad.mutable_residuals(0) = Dense("w/part_1", {4}, {1, NAN, 3, 4});
  EXPECT_EQ(c->Load(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Save(1, 5).SerializeAsString(), f.SerializeAsString()) << "left as it was";

  c->Reset();
  EXPECT_EQ(c->Save(1, 5).residuals_size(), 0);
}

TEST(TopKCompressorTest, SparsifiesOnlyTheVariablesDeclaredTopK) {
  proto::Placement dense = TwoParts();
  dense.mutable_variables(0)->set_gradient(proto::GRADIENT_DENSE);
  auto c = TopKCompressor::Create(0.25, dense);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<proto::NamedTensor> shard = {Dense("w/part_0", {2, 2}, {1, -2, 3, -4})};
  ASSERT_TRUE((*c)->Encode(proto::DT_FLOAT32, &shard).ok());
  EXPECT_TRUE(shard[0].tensor().indices().empty()) << "declared dense: travels dense";
  auto sparse = TopKCompressor::Create(0.25, TwoParts());
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  shard = {Dense("w/part_0", {2, 2}, {1, -2, 3, -4})};
  ASSERT_TRUE((*sparse)->Encode(proto::DT_FLOAT32, &shard).ok());
  EXPECT_FALSE(shard[0].tensor().indices().empty());
}

TEST(TopKCompressorTest, CreateRefusesABadRatioOrPlacement) {
  EXPECT_FALSE(TopKCompressor::Create(0, TwoParts()).ok());
  EXPECT_FALSE(TopKCompressor::Create(1.5, TwoParts()).ok());
  proto::Placement huge = TwoParts();
  huge.mutable_variables(0)->set_shape(0, int64_t{1} << 40);
  huge.mutable_variables(0)->mutable_parts(0)->set_first_axis_size(int64_t{1} << 40);
  EXPECT_FALSE(TopKCompressor::Create(0.1, huge).ok());
}

}  // namespace
}  // namespace worker
}  // namespace psc
