#include "ps_server/variable_store.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "common/tensor/initializer.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

proto::NamedTensor Named(const std::string& name, const std::vector<int64_t>& shape,
                         const std::vector<float>& values) {
  proto::NamedTensor t;
  t.set_name(name);
  tensor::SetFloatTensor(shape, values, t.mutable_tensor());
  return t;
}

proto::OptimizerConfig Sgd(double lr) {
  proto::OptimizerConfig c;
  c.set_kind(proto::OptimizerConfig::SGD);
  c.set_learning_rate(lr);
  return *optimizer::CompleteOptimizerConfig(c);
}

class VariableStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.set_optimizer(Sgd(0.5));
    VariableStore::Tensors v;
    *v.Add() = Named("a", {2}, {1, 2});
    *v.Add() = Named("b", {3}, {0, 0, 0});
    int created = 0, existing = 0;
    ASSERT_TRUE(store_.Create(v, &created, &existing).ok());
    ASSERT_EQ(created, 2);
  }

  std::vector<float> Values(const std::string& name) {
    VariableStore::Names names;
    names.Add(std::string(name));
    VariableStore::Tensors out;
    store_.Read(names, proto::DT_FLOAT32, false, false, &out);
    return tensor::FloatValues(out.Get(0).tensor());
  }

  VariableStore store_;
  std::vector<std::vector<float>> decoded_;  // Match's storage for wire dtypes
};

TEST_F(VariableStoreTest, CreateIsAllOrNothing) {
  VariableStore::Tensors v;
  *v.Add() = Named("c", {1}, {1});
  *v.Add() = Named("a", {3}, {1, 2, 3});  // exists with another shape
  int created = 0, existing = 0;
  absl::Status s = store_.Create(v, &created, &existing);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("exists with shape [2]"));
  EXPECT_EQ(store_.size(), 2) << "c must not be created";
  v.Mutable(1)->CopyFrom(Named("a", {2}, {7, 7}));
  ASSERT_TRUE(store_.Create(v, &created, &existing).ok());
  EXPECT_EQ(created, 1);
  EXPECT_EQ(existing, 1);
  EXPECT_EQ(Values("a"), (std::vector<float>{1, 2})) << "an existing variable is left as it is";
  *v.Add() = Named("bad", {1}, {NAN});
  EXPECT_THAT(store_.Create(v, &created, &existing).message(), HasSubstr("non-finite"));
}

// An embedding table's rows made by the server from the seed: the values
// tensor::InitializeRows draws, checked as given ones are, all or nothing.
TEST_F(VariableStoreTest, GeneratedRowsAreTheSeedsRowsAndBadOnesCreateNothing) {
  proto::GeneratedVariable g;
  g.set_name("table/part_1");
  for (int64_t d : {40, 3}) g.add_variable_shape(d);
  for (int64_t d : {15, 3}) g.add_shape(d);
  g.set_first_row(25);
  g.set_seed(9);
  g.set_index(2);
  g.mutable_initializer()->set_kind(proto::InitializerSpec::RANDOM_UNIFORM);
  g.mutable_initializer()->set_a(-1);
  g.mutable_initializer()->set_b(1);
  VariableStore::Generated generated;
  *generated.Add() = g;
  int created = 0, existing = 0;
  ASSERT_TRUE(store_.Create({}, {}, generated, &created, &existing).ok());
  EXPECT_EQ(created, 1);
  std::vector<float> want(40 * 3);
  tensor::InitializeRows({tensor::Initializer::Kind::kRandomUniform, -1, 1}, {40, 3}, 9, 2, 0,
                         absl::MakeSpan(want));
  EXPECT_EQ(Values("table/part_1"), std::vector<float>(want.begin() + 75, want.end()));
  ASSERT_TRUE(store_.Create({}, {}, generated, &created, &existing).ok());
  EXPECT_EQ(existing, 1) << "made again: the same spec, left as it is";

  auto refused = [&](const proto::GeneratedVariable& bad, const std::string& why) {
    VariableStore::Tensors v;
    *v.Add() = Named("c", {1}, {1});
    VariableStore::Generated gen;
    *gen.Add() = bad;
    absl::Status s = store_.Create(v, {}, gen, &created, &existing);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << why;
    EXPECT_THAT(s.message(), HasSubstr(why));
    EXPECT_EQ(store_.size(), 3) << "\"c\" must not be created: " << why;
  };
  proto::GeneratedVariable bad = g;
  bad.set_name("t2");
  bad.set_first_row(26);
  refused(bad, "rows [26, +15) are not in a table of 40 rows");
  bad = g;
  bad.set_name("t2");
  bad.set_shape(1, 4);
  refused(bad, "rows of shape [15,4] are not rows of a table of shape [40,3]");
  bad = g;
  bad.set_name("t2");
  bad.mutable_initializer()->set_kind(static_cast<proto::InitializerSpec::Kind>(77));
  refused(bad, "variable \"t2\": unknown initializer kind 77");
  bad = g;
  bad.set_name("t2");
  bad.set_shape(0, int64_t{1} << 40);
  bad.set_variable_shape(0, int64_t{1} << 41);
  refused(bad, "variable \"t2\"");
  bad = g;
  bad.set_name("c");
  refused(bad, "\"c\" given twice");
}

// A shape whose byte count wraps 2^64 to the 4 bytes it carries ([2^62 + 1]
// floats) once passed validation; its allocation then threw after the valid
// variable before it had been created.
TEST_F(VariableStoreTest, AWrappingShapeIsRefusedAndCreatesNothing) {
  VariableStore::Tensors v;
  *v.Add() = Named("c", {1}, {1});
  proto::NamedTensor* huge = v.Add();
  huge->set_name("huge");
  huge->mutable_tensor()->set_dtype(proto::DT_FLOAT32);
  huge->mutable_tensor()->add_shape((int64_t{1} << 62) + 1);
  huge->mutable_tensor()->set_data(std::string(4, '\0'));
  int created = 0, existing = 0;
  absl::Status s = store_.Create(v, &created, &existing);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("variable \"huge\": shape [4611686018427387905]"));
  EXPECT_EQ(store_.size(), 2);  // "c" was not created
}

// A checkpoint is held to exactly what CreateVariables accepts.
TEST_F(VariableStoreTest, RestoreValidatesLikeCreate) {
  proto::ShardCheckpoint good;
  store_.Save(&good);
  auto expect_refused = [](const proto::ShardCheckpoint& c, const std::string& why) {
    auto r = VariableStore::Restore(c, Sgd(0.5), "here");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << why;
    EXPECT_THAT(r.status().message(), HasSubstr(why));
  };
  proto::ShardCheckpoint c = good;
  c.mutable_variables(0)->set_name("has space");
  expect_refused(c, "has a space or control character");
  VariableStore::Tensors v;
  *v.Add() = Named("has space", {2}, {1, 2});
  int created = 0, existing = 0;
  EXPECT_EQ(store_.Create(v, &created, &existing).code(), absl::StatusCode::kInvalidArgument);
  c = good;
  c.mutable_variables(0)->set_name(std::string(513, 'x'));
  expect_refused(c, "longer than 512");
  c = good;
  c.mutable_variables(0)->mutable_value()->set_shape(0, (int64_t{1} << 62) + 1);
  c.mutable_variables(0)->mutable_value()->set_data(std::string(4, '\0'));
  expect_refused(c, "exceeds the limit");
  c = good;
  const float inf = INFINITY;
  c.mutable_variables(0)->mutable_value()->mutable_data()->replace(
      0, 4, reinterpret_cast<const char*>(&inf), 4);
  expect_refused(c, "non-finite value at element 0");
}

TEST_F(VariableStoreTest, MatchWantsExactlyOneGradientPerVariable) {
  std::vector<absl::string_view> matched;
  VariableStore::Tensors g;
  *g.Add() = Named("b", {3}, {1, 1, 1});
  *g.Add() = Named("a", {2}, {1, 1});
  ASSERT_TRUE(store_.Match(g, 0, &matched, &decoded_).ok());
  ASSERT_EQ(matched.size(), 2u);
  EXPECT_EQ(matched[0].size(), 8u) << "in variable order";
  VariableStore::Tensors missing;
  *missing.Add() = Named("a", {2}, {1, 1});
  EXPECT_THAT(store_.Match(missing, 0, &matched, &decoded_).message(),
              HasSubstr("lacks a gradient for \"b\""));
  VariableStore::Tensors unknown = g;
  unknown.Mutable(0)->set_name("zz");
  EXPECT_EQ(store_.Match(unknown, 3, &matched, &decoded_).code(), absl::StatusCode::kNotFound);
  VariableStore::Tensors shape = g;
  shape.Mutable(1)->CopyFrom(Named("a", {1, 2}, {1, 1}));
  EXPECT_THAT(store_.Match(shape, 0, &matched, &decoded_).message(), HasSubstr("has shape [1,2]"));
  ASSERT_TRUE(store_.Match(g, 0, &matched, &decoded_).ok());
  EXPECT_TRUE(store_.CheckFinite(matched).ok());
}

TEST_F(VariableStoreTest, AppliesAGradientAndAStepMean) {
  VariableStore::Tensors g;
  *g.Add() = Named("a", {2}, {2, 2});
  *g.Add() = Named("b", {3}, {1, 2, 3});
  std::vector<absl::string_view> matched;
  ASSERT_TRUE(store_.Match(g, 0, &matched, &decoded_).ok());
  store_.Apply(matched, 0);
  EXPECT_EQ(Values("a"), (std::vector<float>{0, 1}));
  std::vector<SyncAccumulator::Gradient> grads;
  for (float k : {2.0f, 6.0f}) {
    std::vector<float> a = {k, k}, b = {k, k, k};
    grads.push_back({proto::PushId(),
                     {std::string(reinterpret_cast<char*>(a.data()), 8),
                      std::string(reinterpret_cast<char*>(b.data()), 12)}});
  }
  store_.ApplyStep(SyncAccumulator::Step(std::move(grads)), 1);
  EXPECT_EQ(Values("a"), (std::vector<float>{-2, -1}));  // minus 0.5 * mean 4
}

TEST_F(VariableStoreTest, SaveAndRestoreRoundTrip) {
  proto::ShardCheckpoint ckpt;
  store_.Save(&ckpt);
  auto restored = VariableStore::Restore(ckpt, Sgd(0.5), "here");
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->size(), 2);
  EXPECT_EQ(restored->num_elements(), 5);
  ckpt.mutable_variables(1)->set_name("a");
  EXPECT_THAT(VariableStore::Restore(ckpt, Sgd(0.5), "here").status().message(),
              HasSubstr("here: variable \"a\": repeated name"));
  proto::OptimizerConfig momentum;
  momentum.set_kind(proto::OptimizerConfig::MOMENTUM);
  proto::ShardCheckpoint fresh;
  store_.Save(&fresh);
  EXPECT_EQ(VariableStore::Restore(fresh, *optimizer::CompleteOptimizerConfig(momentum), "here")
                .status()
                .code(),
            absl::StatusCode::kDataLoss)
      << "a momentum slot is missing";
}

TEST_F(VariableStoreTest, CheckNamesAndRead) {
  VariableStore::Names names;
  names.Add("b");
  names.Add("a");
  EXPECT_TRUE(store_.CheckNames(names, 0).ok());
  VariableStore::Tensors out;
  EXPECT_EQ(store_.Read(names, proto::DT_FLOAT32, false, false, &out), 20);
  ASSERT_EQ(out.size(), 2);
  EXPECT_EQ(out.Get(0).name(), "b");
  names.Add("a");
  EXPECT_EQ(store_.CheckNames(names, 0).code(), absl::StatusCode::kInvalidArgument);
  VariableStore::Names unknown;
  unknown.Add("c");
  EXPECT_EQ(store_.CheckNames(unknown, 0).code(), absl::StatusCode::kNotFound);
}

// ---------------------------------------------------------------- moving averages

proto::MovingAverage Moving(const std::string& variable, float momentum) {
  proto::MovingAverage m;
  m.set_variable(variable);
  m.set_momentum(momentum);
  return m;
}

// Keras's update as a plain float expression.
float KerasMovingAverage(float v, float s, float momentum) {
  const float one_minus = static_cast<float>(1.0 - static_cast<double>(momentum));
  const float kept = v * momentum;
  const float added = s * one_minus;
  return kept + added;
}

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// "w" trainable [2] (1, 2) and "mean" a moving average [3] (0.5, -1, 4) of
// momentum 0.9, under SGD with learning rate 0.5.
class MovingAverageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.set_optimizer(Sgd(0.5));
    VariableStore::Tensors v;
    *v.Add() = Named("w", {2}, {1, 2});
    *v.Add() = Named("mean", {3}, {0.5f, -1, 4});
    VariableStore::MovingAverages m;
    *m.Add() = Moving("mean", 0.9f);
    int created = 0, existing = 0;
    ASSERT_TRUE(store_.Create(v, m, &created, &existing).ok());
    ASSERT_EQ(created, 2);
  }

  std::vector<float> Values(const VariableStore& store, const std::string& name) {
    VariableStore::Names names;
    names.Add(std::string(name));
    VariableStore::Tensors out;
    store.Read(names, proto::DT_FLOAT32, false, false, &out);
    return tensor::FloatValues(out.Get(0).tensor());
  }

  void ApplyOnce(VariableStore* store, const std::vector<float>& w, const std::vector<float>& s) {
    VariableStore::Tensors g;
    *g.Add() = Named("w", {2}, w);
    *g.Add() = Named("mean", {3}, s);
    std::vector<absl::string_view> matched;
    std::vector<std::vector<float>> decoded;
    ASSERT_TRUE(store->Match(g, 0, &matched, &decoded).ok());
    store->Apply(matched, 0);
  }

  VariableStore store_;
};

TEST_F(MovingAverageStoreTest, ApplyTakesTheMomentumRuleAndTheOthersTheOptimizer) {
  ApplyOnce(&store_, {2, 4}, {3, 7, -2});
  EXPECT_EQ(Values(store_, "w"), (std::vector<float>{0, 0})) << "SGD: 1 - 0.5 * 2, 2 - 0.5 * 4";
  std::vector<float> want = {KerasMovingAverage(0.5f, 3, 0.9f), KerasMovingAverage(-1, 7, 0.9f),
                             KerasMovingAverage(4, -2, 0.9f)};
  EXPECT_EQ(Floats(Values(store_, "mean")), Floats(want)) << "bit for bit";
  // Not 0.5 - 0.5 * 3 (the optimizer's): about 0.75.
  EXPECT_NEAR(Values(store_, "mean")[0], 0.75f, 1e-6f);
  ApplyOnce(&store_, {0, 0}, {1, 1, 1});
  for (float& x : want) x = KerasMovingAverage(x, 1, 0.9f);
  EXPECT_EQ(Floats(Values(store_, "mean")), Floats(want)) << "one update per apply";
}

TEST_F(MovingAverageStoreTest, ApplyStepUpdatesFromTheMeanOfTheStatistics) {
  std::vector<SyncAccumulator::Gradient> grads;
  const std::vector<std::vector<float>> w = {{2, 2}, {6, 6}};
  const std::vector<std::vector<float>> s = {{1, 10, 0.3f}, {4, -3, 0.6f}};
  for (int r = 0; r < 2; ++r) grads.push_back({proto::PushId(), {Floats(w[r]), Floats(s[r])}});
  store_.ApplyStep(SyncAccumulator::Step(std::move(grads)), 0);
  EXPECT_EQ(Values(store_, "w"), (std::vector<float>{-1, 0})) << "SGD with the mean 4";
  std::vector<float> want(3);
  const std::vector<float> before = {0.5f, -1, 4};
  for (int i = 0; i < 3; ++i) {
    const float mean = (s[0][i] + s[1][i]) / 2.0f;
    want[i] = KerasMovingAverage(before[i], mean, 0.9f);
  }
  EXPECT_EQ(Floats(Values(store_, "mean")), Floats(want));
}

TEST_F(MovingAverageStoreTest, BadMovingAveragesAreInvalidAndCreateNothing) {
  auto expect_invalid = [&](VariableStore::MovingAverages m, const std::string& why) {
    VariableStore::Tensors v;
    *v.Add() = Named("var", {1}, {3});
    *v.Add() = Named("stat", {1}, {4});
    int created = -1, existing = -1;
    absl::Status s = store_.Create(v, m, &created, &existing);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << why << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(why));
    EXPECT_EQ(store_.size(), 2) << why;
    EXPECT_EQ(created, -1) << why;
  };
  VariableStore::MovingAverages m;
  *m.Add() = Moving("nope", 0.9f);
  expect_invalid(m, "moving average \"nope\": no variable of that name in this request");
  m.Clear();
  *m.Add() = Moving("w", 0.9f);  // on the shard, but not in this request
  expect_invalid(m, "moving average \"w\": no variable");
  m.Clear();
  *m.Add() = Moving("stat", 0.9f);
  *m.Add() = Moving("stat", 0.9f);
  expect_invalid(m, "moving average \"stat\" given twice");
  for (const float bad : {NAN, 1.5f, -0.1f, INFINITY}) {
    m.Clear();
    *m.Add() = Moving("stat", bad);
    expect_invalid(m, "moving average \"stat\": momentum");
  }
  // Momentum 0 is valid (the statistic replaces the value).
  m.Clear();
  *m.Add() = Moving("stat", 0.0f);
  VariableStore::Tensors v;
  *v.Add() = Named("stat", {1}, {4});
  int created = 0, existing = 0;
  EXPECT_TRUE(store_.Create(v, m, &created, &existing).ok());
  EXPECT_EQ(created, 1);
}

TEST_F(MovingAverageStoreTest, ARuleMismatchOnAnExistingVariableIsFailedPrecondition) {
  auto create = [&](const std::string& name, const std::vector<float>& value,
                    std::optional<float> momentum, int* existing) {
    VariableStore::Tensors v;
    *v.Add() = Named("fresh", {1}, {0});
    *v.Add() = Named(name, {static_cast<int64_t>(value.size())}, value);
    VariableStore::MovingAverages m;
    if (momentum) *m.Add() = Moving(name, *momentum);
    int created = 0;
    return store_.Create(v, m, &created, existing);
  };
  int existing = 0;
  absl::Status s = create("mean", {0, 0, 0}, std::nullopt, &existing);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("exists as a moving average of momentum 0.9; cannot create "
                                     "it as trainable"));
  s = create("mean", {0, 0, 0}, 0.99f, &existing);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("momentum 0.99"));
  s = create("w", {0, 0}, 0.9f, &existing);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("exists as trainable"));
  EXPECT_EQ(store_.size(), 2) << "\"fresh\" must not be created";
  // The same rule again: left as it is.
  ASSERT_TRUE(create("mean", {9, 9, 9}, 0.9f, &existing).ok());
  EXPECT_EQ(existing, 1);
  EXPECT_EQ(Values(store_, "mean"), (std::vector<float>{0.5f, -1, 4}));
}

TEST_F(MovingAverageStoreTest, SaveAndRestoreKeepTheRule) {
  proto::ShardCheckpoint ckpt;
  store_.Save(&ckpt);
  ASSERT_EQ(ckpt.variables_size(), 2);
  EXPECT_FALSE(ckpt.variables(0).has_moving_average_momentum());
  ASSERT_TRUE(ckpt.variables(1).has_moving_average_momentum());
  EXPECT_EQ(ckpt.variables(1).moving_average_momentum(), 0.9f);
  auto restored = VariableStore::Restore(ckpt, Sgd(0.5), "here");
  ASSERT_TRUE(restored.ok()) << restored.status();
  ApplyOnce(&*restored, {2, 4}, {3, 7, -2});
  const std::vector<float> want = {KerasMovingAverage(0.5f, 3, 0.9f),
                                   KerasMovingAverage(-1, 7, 0.9f),
                                   KerasMovingAverage(4, -2, 0.9f)};
  EXPECT_EQ(Floats(Values(*restored, "mean")), Floats(want))
      << "the restored store still applies the moving rule";
  EXPECT_EQ(Values(*restored, "w"), (std::vector<float>{0, 0}));

  // A checkpoint written before the field: every variable trainable.
  proto::ShardCheckpoint old = ckpt;
  old.mutable_variables(1)->clear_moving_average_momentum();
  auto trainable = VariableStore::Restore(old, Sgd(0.5), "here");
  ASSERT_TRUE(trainable.ok()) << trainable.status();
  ApplyOnce(&*trainable, {2, 4}, {3, 7, -2});
  EXPECT_EQ(Values(*trainable, "mean"), (std::vector<float>{-1, -4.5f, 5})) << "SGD";

  // A momentum CreateVariables would refuse is corrupt.
  for (const float bad : {NAN, 1.5f, -0.1f}) {
    proto::ShardCheckpoint c = ckpt;
    c.mutable_variables(1)->set_moving_average_momentum(bad);
    auto r = VariableStore::Restore(c, Sgd(0.5), "here");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("here: moving average \"mean\": momentum"));
  }
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
