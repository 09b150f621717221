// Every optimizer against a plain double-precision reference of Keras's
// formulas, over several steps.
#include "common/optimizer/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
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
  std::vector<double> a;  // RMSprop's average gradient; FTRL's linear
  void Step(std::vector<float> g, int64_t iteration) {
    const double lr = LearningRateAt(c, iteration);
    if (a.empty()) a.assign(w.size(), 0);
    // Keras's clipping first: by value, or by the whole gradient's norm.
    double norm = 0;
    for (float x : g) norm += double(x) * x;
    norm = std::sqrt(norm);
    for (float& x : g) {
      if (c.clipvalue() > 0) x = std::clamp<double>(x, -c.clipvalue(), c.clipvalue());
      if (c.clipnorm() > 0) x = x * c.clipnorm() / std::max(norm, c.clipnorm());
    }
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] -= w[i] * c.weight_decay() * lr;  // Keras 3's, before the update
      switch (c.kind()) {
        case proto::OptimizerConfig::SGD:
          w[i] -= lr * g[i];
          break;
        case proto::OptimizerConfig::MOMENTUM:
          m[i] = c.momentum() * m[i] - lr * g[i];
          w[i] += c.nesterov() ? c.momentum() * m[i] - lr * g[i] : m[i];
          break;
        case proto::OptimizerConfig::RMSPROP: {
          v[i] = c.rho() * v[i] + (1 - c.rho()) * g[i] * g[i];
          double d = v[i] + c.epsilon();
          if (c.centered()) {
            a[i] = c.rho() * a[i] + (1 - c.rho()) * g[i];
            d = v[i] - a[i] * a[i] + c.epsilon();
          }
          const double inc = lr * g[i] / std::sqrt(d);
          if (c.momentum() > 0) {
            m[i] = c.momentum() * m[i] + inc;
            w[i] -= m[i];
          } else {
            w[i] -= inc;
          }
          break;
        }
        case proto::OptimizerConfig::ADAGRAD:
          if (iteration == 0) v[i] = c.initial_accumulator_value();
          v[i] += double(g[i]) * g[i];
          w[i] -= lr * g[i] / std::sqrt(v[i] + c.epsilon());
          break;
        case proto::OptimizerConfig::FTRL: {  // keras/src/optimizers/ftrl.py
          if (iteration == 0) v[i] = c.initial_accumulator_value();
          const double power = -c.learning_rate_power();
          const double l2 = c.l2_regularization_strength() + c.beta() / (2 * lr);
          const double with_shrinkage = g[i] + 2 * c.l2_shrinkage_regularization_strength() * w[i];
          const double new_v = v[i] + double(g[i]) * g[i];
          a[i] += with_shrinkage - (std::pow(new_v, power) - std::pow(v[i], power)) / lr * w[i];
          const double quadratic = std::pow(new_v, power) / lr + 2 * l2;
          const double l1 = c.l1_regularization_strength();
          w[i] = (std::clamp(a[i], -l1, l1) - a[i]) / quadratic;
          v[i] = new_v;
          break;
        }
        case proto::OptimizerConfig::ADAM:
        case proto::OptimizerConfig::ADAMW: {
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
  std::vector<std::vector<float>> slots;
  for (float initial : opt.slot_initial_values()) slots.emplace_back(n, initial);
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

TEST(OptimizerTest, AdamWMatchesKeras) {
  CheckAgainstReference(Config(proto::OptimizerConfig::ADAMW, 0.01));
}

TEST(OptimizerTest, RmspropMatchesKerasPlainWithMomentumAndCentered) {
  CheckAgainstReference(Config(proto::OptimizerConfig::RMSPROP, 0.01));
  auto c = Config(proto::OptimizerConfig::RMSPROP, 0.01);
  c.set_rho(0.8);
  c.set_momentum(0.5);
  CheckAgainstReference(c);
  c.set_centered(true);
  CheckAgainstReference(c);
  c.set_momentum(0);
  CheckAgainstReference(c);
}

TEST(OptimizerTest, AdagradMatchesKeras) {
  CheckAgainstReference(Config(proto::OptimizerConfig::ADAGRAD, 0.05));
  auto c = Config(proto::OptimizerConfig::ADAGRAD, 0.05);
  c.set_initial_accumulator_value(0.5);
  CheckAgainstReference(c);
}

// Keras's Ftrl: its defaults, then L1 (which zeroes weights whose linear
// term stays within it), L2, shrinkage L2, beta, and a fixed learning rate
// (learning_rate_power 0).
TEST(OptimizerTest, FtrlMatchesKeras) {
  CheckAgainstReference(Config(proto::OptimizerConfig::FTRL, 0.05));
  auto c = Config(proto::OptimizerConfig::FTRL, 0.1);
  c.set_l1_regularization_strength(0.01);
  c.set_l2_regularization_strength(0.02);
  c.set_l2_shrinkage_regularization_strength(0.03);
  c.set_beta(0.5);
  c.set_initial_accumulator_value(0.2);
  CheckAgainstReference(c);
  c.set_learning_rate_power(0);
  CheckAgainstReference(c);
  c.set_learning_rate_power(-0.75);
  CheckAgainstReference(c);
  const Optimizer ftrl(*CompleteOptimizerConfig(Config(proto::OptimizerConfig::FTRL)));
  EXPECT_EQ(ftrl.slot_names(), (std::vector<std::string>{"accumulator", "linear"}));
  EXPECT_EQ(ftrl.slot_initial_values(), (std::vector<float>{0.1f, 0.0f}));
  EXPECT_TRUE(ftrl.keras_slots_per_variable());
  EXPECT_EQ(OptimizerText(ftrl.config()),
            "ftrl, lr 0.001 (learning_rate_power -0.5, initial_accumulator_value 0.1, l1 0, l2 0, "
            "l2_shrinkage 0, beta 0)");
  EXPECT_EQ(ParseOptimizerKind("ftrl").value(), proto::OptimizerConfig::FTRL);
  // Its options apply to it alone; each is checked.
  auto adam = Config(proto::OptimizerConfig::ADAM);
  adam.set_beta(0.1);
  EXPECT_THAT(CompleteOptimizerConfig(adam).status().message(), HasSubstr("FTRL only"));
  auto bad = Config(proto::OptimizerConfig::FTRL);
  bad.set_learning_rate_power(0.5);
  EXPECT_THAT(CompleteOptimizerConfig(bad).status().message(),
              HasSubstr("learning_rate_power 0.5 must be <= 0"));
  bad = Config(proto::OptimizerConfig::FTRL);
  bad.set_l1_regularization_strength(-1);
  EXPECT_THAT(CompleteOptimizerConfig(bad).status().message(),
              HasSubstr("l1_regularization_strength -1 must be finite and >= 0"));
  bad = Config(proto::OptimizerConfig::FTRL);
  bad.set_epsilon(1e-7);
  EXPECT_THAT(CompleteOptimizerConfig(bad).status().message(), HasSubstr("SGD or FTRL"));
}

// Keras 3's decoupled weight decay on every kind: w -= w * wd * lr first.
TEST(OptimizerTest, WeightDecayIsDecoupledOnEveryKind) {
  for (auto kind :
       {proto::OptimizerConfig::SGD, proto::OptimizerConfig::MOMENTUM, proto::OptimizerConfig::ADAM,
        proto::OptimizerConfig::RMSPROP, proto::OptimizerConfig::ADAGRAD}) {
    SCOPED_TRACE(proto::OptimizerConfig::Kind_Name(kind));
    auto c = Config(kind, 0.05);
    c.set_weight_decay(0.1);
    CheckAgainstReference(c);
  }
  // With a zero gradient only the decay moves a weight: w (1 - wd lr).
  auto c = *CompleteOptimizerConfig(Config(proto::OptimizerConfig::SGD, 0.5));
  c.set_weight_decay(0.2);
  float w = 3.0f;
  const float g = 0.0f;
  Optimizer(c).Apply(&w, &g, 1, nullptr, 0);
  EXPECT_FLOAT_EQ(w, 3.0f * (1 - 0.2f * 0.5f));
}

// Keras 3's schedules, at the steps Keras evaluates them (iterations
// before the update, from 0).
TEST(OptimizerTest, LearningRateSchedulesAreKerass) {
  using S = proto::LearningRateSchedule;
  auto c = Config(proto::OptimizerConfig::SGD, 0.1);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 7), 0.1);
  S* s = c.mutable_schedule();
  s->set_kind(S::EXPONENTIAL_DECAY);
  s->set_decay_steps(4);
  s->set_decay_rate(0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 2), 0.1 * std::pow(0.5, 0.5));
  s->set_staircase(true);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 3), 0.1);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 4), 0.05);
  s->Clear();
  s->set_kind(S::PIECEWISE_CONSTANT_DECAY);
  for (double b : {2.0, 5.0}) s->add_boundaries(b);
  for (double v : {0.3, 0.2, 0.1}) s->add_values(v);
  const double piecewise[] = {0.3, 0.3, 0.3, 0.2, 0.2, 0.2, 0.1, 0.1};
  for (int step = 0; step < 8; ++step) EXPECT_DOUBLE_EQ(LearningRateAt(c, step), piecewise[step]);
  s->Clear();
  s->set_kind(S::COSINE_DECAY);
  s->set_decay_steps(10);
  s->set_alpha(0.1);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 0), 0.1);
  EXPECT_NEAR(LearningRateAt(c, 5), 0.1 * (0.9 * 0.5 + 0.1), 1e-15);
  EXPECT_NEAR(LearningRateAt(c, 10), 0.01, 1e-15);
  EXPECT_NEAR(LearningRateAt(c, 99), 0.01, 1e-15);  // held at the end
  s->set_warmup_target(0.5);
  s->set_warmup_steps(4);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 0), 0.1);
  EXPECT_NEAR(LearningRateAt(c, 2), 0.3, 1e-15);  // half way from 0.1 to 0.5
  EXPECT_NEAR(LearningRateAt(c, 4), 0.5, 1e-15);  // the decay starts at the target
  EXPECT_NEAR(LearningRateAt(c, 9), 0.5 * (0.9 * 0.5 + 0.1), 1e-15);
  EXPECT_NEAR(LearningRateAt(c, 14), 0.05, 1e-15);
  // The update uses the step's rate: SGD moves by rate * gradient.
  auto done = CompleteOptimizerConfig(c);
  ASSERT_TRUE(done.ok()) << done.status();
  float w = 0;
  const float g = 1;
  Optimizer(*done).Apply(&w, &g, 1, nullptr, 2);
  EXPECT_FLOAT_EQ(w, -0.3f);
  EXPECT_THAT(OptimizerText(*done), HasSubstr("cosine_decay (decay_steps 10, alpha 0.1, warmup "
                                              "to 0.5 over 4 steps)"));
}

TEST(OptimizerTest, BadSchedulesAreRefused) {
  using S = proto::LearningRateSchedule;
  const std::vector<std::pair<std::function<void(S*)>, std::string>> cases = {
      {[](S* s) { s->set_kind(S::EXPONENTIAL_DECAY); }, "decay_steps 0 must be > 0"},
      {[](S* s) {
         s->set_kind(S::EXPONENTIAL_DECAY);
         s->set_decay_steps(3);
         s->set_decay_rate(-1);
       },
       "decay_rate -1 must be > 0"},
      {[](S* s) {
         s->set_kind(S::PIECEWISE_CONSTANT_DECAY);
         s->add_boundaries(3);
         s->add_values(0.1);
       },
       "1 values for 1 boundaries"},
      {[](S* s) {
         s->set_kind(S::PIECEWISE_CONSTANT_DECAY);
         s->add_boundaries(3);
         s->add_boundaries(3);
         for (int i = 0; i < 3; ++i) s->add_values(0.1);
       },
       "boundaries must be finite and increasing"},
      {[](S* s) {
         s->set_kind(S::COSINE_DECAY);
         s->set_decay_steps(10);
         s->set_alpha(2);
       },
       "alpha 2 must be in [0, 1]"},
      {[](S* s) {
         s->set_kind(S::COSINE_DECAY);
         s->set_decay_steps(10);
         s->set_warmup_steps(-1);
       },
       "warmup_steps -1"},
  };
  for (const auto& [make, message] : cases) {
    auto c = Config(proto::OptimizerConfig::SGD, 0.1);
    make(c.mutable_schedule());
    auto done = CompleteOptimizerConfig(c);
    EXPECT_EQ(done.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(done.status().message(), HasSubstr(message));
  }
}

// Keras's clipvalue and clipnorm, before the decay and the update.
TEST(OptimizerTest, ClippingIsKerassOnEveryKind) {
  for (auto kind : {proto::OptimizerConfig::SGD, proto::OptimizerConfig::ADAM,
                    proto::OptimizerConfig::RMSPROP}) {
    SCOPED_TRACE(proto::OptimizerConfig::Kind_Name(kind));
    auto c = Config(kind, 0.05);
    c.set_clipvalue(0.5);
    c.set_weight_decay(0.1);
    CheckAgainstReference(c);
    c.set_clipvalue(0);
    c.set_clipnorm(3.0);  // the 257 N(0, 1) elements' norm is about 16: clipped
    CheckAgainstReference(c);
  }
  // By hand: SGD at rate 1 moves by the clipped gradient.
  auto c = *CompleteOptimizerConfig(Config(proto::OptimizerConfig::SGD, 1.0));
  c.set_clipnorm(1.0);
  std::vector<float> w = {0, 0};
  const std::vector<float> g = {3, 4};  // norm 5
  Optimizer(c).Apply(w.data(), g.data(), 2, nullptr, 0);
  EXPECT_FLOAT_EQ(w[0], -0.6f);
  EXPECT_FLOAT_EQ(w[1], -0.8f);
  const std::vector<float> small = {0.3f, 0.4f};  // norm 0.5: unchanged
  w = {0, 0};
  Optimizer(c).Apply(w.data(), small.data(), 2, nullptr, 0);
  EXPECT_FLOAT_EQ(w[1], -0.4f);
  c.set_clipnorm(0);
  c.set_clipvalue(2);
  w = {0, 0};
  Optimizer(c).Apply(w.data(), g.data(), 2, nullptr, 0);
  EXPECT_FLOAT_EQ(w[0], -2.0f);
  EXPECT_FLOAT_EQ(w[1], -2.0f);
  c.set_clipnorm(1);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(),
              HasSubstr("two of clipvalue, clipnorm and global_clipnorm together"));
  c.set_clipnorm(0);
  c.set_global_clipnorm(1);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(),
              HasSubstr("two of clipvalue, clipnorm and global_clipnorm together"));
  c.set_clipvalue(0);
  c.set_global_clipnorm(-2);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(), HasSubstr("global_clipnorm -2"));
  c.set_global_clipnorm(0);
  c.set_clipnorm(-1);
  c.set_clipvalue(0);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(), HasSubstr("clipnorm -1"));
}

// Keras's clip_by_global_norm: every trainable gradient scaled by
// global_clipnorm / their joint norm when it is above; moving averages'
// statistics neither count nor change; NaN leaves them.
TEST(OptimizerTest, ClipByGlobalNormIsKerass) {
  std::vector<std::vector<float>> g = {{3, 0}, {100, 100}, {0, 4}};
  const std::vector<bool> trainable = {true, false, true};
  EXPECT_DOUBLE_EQ(ClipByGlobalNorm(1.0, trainable, &g), 5.0);
  EXPECT_FLOAT_EQ(g[0][0], 0.6f);
  EXPECT_FLOAT_EQ(g[2][1], 0.8f);
  EXPECT_EQ(g[1], (std::vector<float>{100, 100})) << "a moving average's statistic";
  std::vector<std::vector<float>> small = {{0.3f, 0.4f}};
  EXPECT_NEAR(ClipByGlobalNorm(1.0, {true}, &small), 0.5, 1e-7);  // of the floats 0.3, 0.4
  EXPECT_EQ(small[0], (std::vector<float>{0.3f, 0.4f})) << "below the clip: unchanged";
  std::vector<std::vector<float>> nan = {{std::nanf(""), 1}};
  EXPECT_TRUE(std::isnan(ClipByGlobalNorm(1.0, {true}, &nan)));
  EXPECT_EQ(nan[0][1], 1.0f);
  proto::OptimizerConfig c;
  c.set_kind(proto::OptimizerConfig::SGD);
  c.set_global_clipnorm(0.5);
  auto done = CompleteOptimizerConfig(c);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_THAT(OptimizerText(*done), HasSubstr("global_clipnorm 0.5"));
  // The servers' Apply does not clip by the global norm (the worker did).
  std::vector<float> w = {0, 0};
  const std::vector<float> big = {30, 40};
  Optimizer(*done).Apply(w.data(), big.data(), 2, nullptr, 0);
  EXPECT_FLOAT_EQ(w[0], -0.3f);
}

// clipnorm needs each variable whole on one server.
TEST(OptimizerTest, ClipnormRefusesAVariableSplitOverServers) {
  proto::Placement placement;
  proto::VariablePlacement* whole = placement.add_variables();
  whole->set_name("dense/bias");
  whole->add_parts()->set_shard(0);
  auto c = Config(proto::OptimizerConfig::SGD, 0.1);
  c.set_clipnorm(1.0);
  EXPECT_TRUE(CheckClipnormPlacement(c, placement).ok());
  proto::VariablePlacement* split = placement.add_variables();
  split->set_name("dense/kernel");
  split->add_parts()->set_shard(0);
  split->add_parts()->set_shard(1);
  const absl::Status s = CheckClipnormPlacement(c, placement);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("the variable dense/kernel is split over 2 parameter servers"));
  c.set_clipnorm(0);
  c.set_clipvalue(1.0);  // elementwise: any split is fine
  EXPECT_TRUE(CheckClipnormPlacement(c, placement).ok());
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
  auto rms = Config(proto::OptimizerConfig::RMSPROP);
  EXPECT_THAT(Optimizer(*CompleteOptimizerConfig(rms)).slot_names(),
              ::testing::ElementsAre("velocity"));
  rms.set_momentum(0.5);
  rms.set_centered(true);
  const Optimizer centered(*CompleteOptimizerConfig(rms));
  EXPECT_THAT(centered.slot_names(),
              ::testing::ElementsAre("velocity", "momentum", "average_gradient"));
  EXPECT_FALSE(centered.keras_slots_per_variable());  // Keras: all velocities, then ...
  const Optimizer adagrad(*CompleteOptimizerConfig(Config(proto::OptimizerConfig::ADAGRAD)));
  EXPECT_THAT(adagrad.slot_names(), ::testing::ElementsAre("accumulator"));
  EXPECT_THAT(adagrad.slot_initial_values(), ::testing::ElementsAre(0.1f));
  EXPECT_TRUE(adagrad.keras_slots_per_variable());
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
  EXPECT_FALSE(adam->has_weight_decay());
  auto adamw = CompleteOptimizerConfig(Config(proto::OptimizerConfig::ADAMW));
  EXPECT_DOUBLE_EQ(adamw->weight_decay(), 0.004);
  auto no_decay = Config(proto::OptimizerConfig::ADAMW);
  no_decay.set_weight_decay(0);  // given: kept, not Keras's default
  EXPECT_DOUBLE_EQ(CompleteOptimizerConfig(no_decay)->weight_decay(), 0);
  auto rms = CompleteOptimizerConfig(Config(proto::OptimizerConfig::RMSPROP));
  EXPECT_DOUBLE_EQ(rms->learning_rate(), 0.001);
  EXPECT_DOUBLE_EQ(rms->rho(), 0.9);
  EXPECT_DOUBLE_EQ(rms->momentum(), 0);
  EXPECT_DOUBLE_EQ(rms->epsilon(), 1e-7);
  auto adagrad = CompleteOptimizerConfig(Config(proto::OptimizerConfig::ADAGRAD));
  EXPECT_DOUBLE_EQ(adagrad->initial_accumulator_value(), 0.1);
  EXPECT_DOUBLE_EQ(adagrad->epsilon(), 1e-7);
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
  c = Config(proto::OptimizerConfig::RMSPROP);
  c.set_rho(1.0);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(), HasSubstr("rho 1 must be in (0, 1)"));
  c = Config(proto::OptimizerConfig::RMSPROP);
  c.set_momentum(-0.1);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(), HasSubstr("momentum -0.1"));
  c = Config(proto::OptimizerConfig::ADAM);
  c.set_centered(true);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(), HasSubstr("RMSPROP only"));
  c = Config(proto::OptimizerConfig::SGD);
  c.set_initial_accumulator_value(0.1);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(), HasSubstr("ADAGRAD and FTRL only"));
  c = Config(proto::OptimizerConfig::ADAGRAD);
  c.set_initial_accumulator_value(-1);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(),
              HasSubstr("initial_accumulator_value -1"));
  c = Config(proto::OptimizerConfig::SGD);
  c.set_weight_decay(-0.5);
  EXPECT_THAT(CompleteOptimizerConfig(c).status().message(), HasSubstr("weight_decay -0.5"));
  c.set_weight_decay(NAN);
  EXPECT_FALSE(CompleteOptimizerConfig(c).ok());
  EXPECT_EQ(ParseOptimizerKind("adam").value(), proto::OptimizerConfig::ADAM);
  EXPECT_EQ(ParseOptimizerKind("rmsprop").value(), proto::OptimizerConfig::RMSPROP);
  EXPECT_EQ(ParseOptimizerKind("adagrad").value(), proto::OptimizerConfig::ADAGRAD);
  EXPECT_EQ(ParseOptimizerKind("adamw").value(), proto::OptimizerConfig::ADAMW);
  EXPECT_THAT(ParseOptimizerKind("lion").status().message(), HasSubstr("unknown optimizer"));
}

// Keras's moving-average update, bit for bit: each product rounded to
// float32, then their sum, with one_minus = float(1 - double(momentum)).
TEST(OptimizerTest, MovingAverageIsKerasFloatArithmetic) {
  const size_t n = 257;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0, 3);
  for (const float momentum : {0.99f, 0.9f, 0.5f, 0.0f, 0.999f}) {
    std::vector<float> v(n), expected(n);
    for (float& x : v) x = dist(rng);
    expected = v;
    for (int step = 0; step < 5; ++step) {
      std::vector<float> s(n);
      for (float& x : s) x = dist(rng);
      ApplyMovingAverage(v.data(), s.data(), n, momentum);
      const float one_minus = static_cast<float>(1.0 - static_cast<double>(momentum));
      for (size_t i = 0; i < n; ++i) {
        const float kept = expected[i] * momentum;
        const float added = s[i] * one_minus;
        expected[i] = kept + added;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::memcmp(&v[i], &expected[i], sizeof(float)), 0)
          << "momentum " << momentum << " element " << i << ": " << v[i] << " vs " << expected[i];
    }
  }
  // One value by hand: 0.99 * 10 + 0.01 * 110 is about 11.
  float v = 10.0f;
  const float s = 110.0f;
  ApplyMovingAverage(&v, &s, 1, 0.99f);
  EXPECT_NEAR(v, 11.0f, 1e-5f);
  EXPECT_EQ(v, 10.0f * 0.99f + 110.0f * static_cast<float>(1.0 - static_cast<double>(0.99f)));
  // Momentum 0 takes the statistic; the update touches exactly n values.
  std::vector<float> w = {1, 2, 3};
  const std::vector<float> stat = {7, 8, 9};
  ApplyMovingAverage(w.data(), stat.data(), 2, 0.0f);
  EXPECT_EQ(w, (std::vector<float>{7, 8, 3}));
}

// Momentum 1 is a frozen variable: left bit for bit, whatever the
// statistic (even one whose product with 0 would not be 0).
TEST(OptimizerTest, AFrozenVariableNeverChanges) {
  std::vector<float> var = {-0.0f, 1.5f, -3.25f, 1e-30f};
  const std::vector<float> before = var;
  const std::vector<float> stat = {1.0f, NAN, INFINITY, -2.0f};
  ApplyMovingAverage(var.data(), stat.data(), var.size(), 1.0f);
  EXPECT_EQ(std::memcmp(var.data(), before.data(), var.size() * sizeof(float)), 0);
}

TEST(OptimizerTest, MovingAverageMomentumMustBeFiniteInZeroOne) {
  EXPECT_TRUE(CheckMovingAverageMomentum(0.0f, "bn/moving_mean").ok());
  EXPECT_TRUE(CheckMovingAverageMomentum(0.99f, "bn/moving_mean").ok());
  EXPECT_TRUE(CheckMovingAverageMomentum(1.0f, "frozen/kernel").ok());
  for (const float bad : {1.0001f, -0.1f, 1.5f, NAN, INFINITY, -INFINITY}) {
    absl::Status s = CheckMovingAverageMomentum(bad, "bn/moving_variance");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("moving average \"bn/moving_variance\": momentum"));
  }
}

}  // namespace
}  // namespace optimizer
}  // namespace psc
