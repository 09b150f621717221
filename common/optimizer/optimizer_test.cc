// Every optimizer against a plain double-precision reference of Keras's
// formulas, over several steps.
#include "common/optimizer/optimizer.h"

#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace optimizer {
namespace {

using ::testing::HasSubstr;

proto::OptimizerConfig Config(proto::OptimizerConfig::Kind kind, double lr = 0) {
  proto::OptimizerConfig c;
  c.set_kind(kind);
  c.set_learning_rate(lr);
  return c;
}

struct Reference {
  proto::OptimizerConfig c;
  std::vector<double> w, m, v;
  void Step(const std::vector<float>& g, int64_t iteration) {
    const double lr = c.learning_rate();
    for (size_t i = 0; i < w.size(); ++i) {
      switch (c.kind()) {
        case proto::OptimizerConfig::SGD:
          w[i] -= lr * g[i];
          break;
        case proto::OptimizerConfig::MOMENTUM:
          m[i] = c.momentum() * m[i] - lr * g[i];
          w[i] += c.nesterov() ? c.momentum() * m[i] - lr * g[i] : m[i];
          break;
        case proto::OptimizerConfig::ADAM: {
          const double t = iteration + 1;
          const double alpha =
              lr * std::sqrt(1 - std::pow(c.beta_2(), t)) / (1 - std::pow(c.beta_1(), t));
          m[i] += (g[i] - m[i]) * (1 - c.beta_1());
          v[i] += (double(g[i]) * g[i] - v[i]) * (1 - c.beta_2());
          w[i] -= alpha * m[i] / (std::sqrt(v[i]) + c.epsilon());
          break;
        }
        default:
          break;
      }
    }
  }
};

void CheckAgainstReference(proto::OptimizerConfig config) {
  auto complete = CompleteOptimizerConfig(config);
  ASSERT_TRUE(complete.ok()) << complete.status();
  Optimizer opt(*complete);
  const size_t n = 257;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0, 1);
  std::vector<float> w(n);
  for (float& x : w) x = dist(rng);
  std::vector<std::vector<float>> slots(opt.slot_names().size(), std::vector<float>(n, 0));
  std::vector<float*> slot_ptrs;
  for (auto& s : slots) slot_ptrs.push_back(s.data());
  Reference ref{*complete, std::vector<double>(w.begin(), w.end()), std::vector<double>(n, 0),
                std::vector<double>(n, 0)};
  for (int64_t step = 0; step < 20; ++step) {
    std::vector<float> g(n);
    for (float& x : g) x = dist(rng);
    opt.Apply(w.data(), g.data(), n, slot_ptrs.data(), step);
    ref.Step(g, step);
  }
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(w[i], ref.w[i], 1e-5 * (1 + std::fabs(ref.w[i]))) << "element " << i;
  }
}

TEST(OptimizerTest, SgdMatchesKeras) {
  CheckAgainstReference(Config(proto::OptimizerConfig::SGD, 0.05));
}

TEST(OptimizerTest, MomentumMatchesKeras) {
  CheckAgainstReference(Config(proto::OptimizerConfig::MOMENTUM, 0.01));
}

TEST(OptimizerTest, NesterovMatchesKeras) {
  auto c = Config(proto::OptimizerConfig::MOMENTUM, 0.01);
  c.set_nesterov(true);
  c.set_momentum(0.8);
  CheckAgainstReference(c);
}

TEST(OptimizerTest, AdamMatchesKeras) {
  CheckAgainstReference(Config(proto::OptimizerConfig::ADAM));
}

TEST(OptimizerTest, SlotsPerKind) {
  EXPECT_TRUE(Optimizer(*CompleteOptimizerConfig(Config(proto::OptimizerConfig::SGD)))
                  .slot_names()
                  .empty());
  EXPECT_THAT(
      Optimizer(*CompleteOptimizerConfig(Config(proto::OptimizerConfig::MOMENTUM))).slot_names(),
      ::testing::ElementsAre("momentum"));
  EXPECT_THAT(
      Optimizer(*CompleteOptimizerConfig(Config(proto::OptimizerConfig::ADAM))).slot_names(),
      ::testing::ElementsAre("m", "v"));
}

TEST(OptimizerTest, KerasDefaults) {
  auto sgd = CompleteOptimizerConfig(Config(proto::OptimizerConfig::SGD));
  EXPECT_DOUBLE_EQ(sgd->learning_rate(), 0.01);
  auto momentum = CompleteOptimizerConfig(Config(proto::OptimizerConfig::MOMENTUM));
  EXPECT_DOUBLE_EQ(momentum->momentum(), 0.9);
  auto adam = CompleteOptimizerConfig(Config(proto::OptimizerConfig::ADAM));
  EXPECT_DOUBLE_EQ(adam->learning_rate(), 0.001);
  EXPECT_DOUBLE_EQ(adam->beta_1(), 0.9);
  EXPECT_DOUBLE_EQ(adam->beta_2(), 0.999);
  EXPECT_DOUBLE_EQ(adam->epsilon(), 1e-7);
}

TEST(OptimizerTest, RejectsBadConfigs) {
  EXPECT_THAT(CompleteOptimizerConfig(proto::OptimizerConfig()).status().message(),
              HasSubstr("kind must be"));
  EXPECT_THAT(CompleteOptimizerConfig(Config(proto::OptimizerConfig::SGD, -1)).status().message(),
              HasSubstr("learning_rate -1 must be finite and > 0"));
  EXPECT_FALSE(CompleteOptimizerConfig(Config(proto::OptimizerConfig::SGD, NAN)).ok());
  auto c = Config(proto::OptimizerConfig::MOMENTUM);
  c.set_momentum(1.5);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(), HasSubstr("momentum 1.5"));
  c = Config(proto::OptimizerConfig::SGD);
  c.set_nesterov(true);
  EXPECT_FALSE(CompleteOptimizerConfig(c).ok());
  c = Config(proto::OptimizerConfig::ADAM);
  c.set_beta_2(1.0);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(), HasSubstr("beta_2"));
  c = Config(proto::OptimizerConfig::ADAM);
  c.set_epsilon(-1);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(), HasSubstr("epsilon"));
  EXPECT_EQ(ParseOptimizerKind("adam").value(), proto::OptimizerConfig::ADAM);
  EXPECT_THAT(ParseOptimizerKind("rmsprop").status().message(), HasSubstr("unknown optimizer"));
}

}  // namespace
}  // namespace optimizer
}  // namespace psc
