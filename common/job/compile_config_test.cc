#include "common/job/compile_config.h"

#include "common/keras/keras_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace job {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

// A model's config with `compile` as Keras 3's model.save() writes it.
std::string Config(Json compile, const std::string& output_activation = "linear", int units = 3) {
  Json layers = {
      {{"class_name", "InputLayer"}, {"config", {{"name", "in"}, {"batch_shape", {nullptr, 4}}}}},
      {{"class_name", "Dense"},
       {"config", {{"name", "d"}, {"units", units}, {"activation", output_activation}}}}};
  Json top = {{"class_name", "Sequential"}, {"config", {{"name", "m"}, {"layers", layers}}}};
  if (!compile.is_null()) top["compile_config"] = compile;
  return top.dump();
}

Json Sgd(double lr, double momentum, bool nesterov) {
  return {{"module", "keras.optimizers"},
          {"class_name", "SGD"},
          {"config",
           {{"name", "sgd"},
            {"learning_rate", lr},
            {"weight_decay", nullptr},
            {"clipnorm", nullptr},
            {"use_ema", false},
            {"momentum", momentum},
            {"nesterov", nesterov}}}};
}

Json Loss(bool from_logits) {
  return {{"class_name", "SparseCategoricalCrossentropy"},
          {"config", {{"from_logits", from_logits}, {"ignore_class", nullptr}}}};
}

absl::StatusOr<CompileConfig> Read(const std::string& config) {
  auto model = keras::ModelFromKerasConfig(config, "m.keras");
  EXPECT_TRUE(model.ok()) << model.status();
  return ReadCompileConfig(config, *model, "m.keras");
}

TEST(CompileConfigTest, KerasOptimizersAndLossesAsTheyAreSaved) {
  auto none = Read(Config(nullptr));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->optimizer.has_value());

  auto sgd =
      Read(Config({{"optimizer", Sgd(0.05000000074505806, 0, false)}, {"loss", Loss(true)}}));
  ASSERT_TRUE(sgd.ok()) << sgd.status();
  EXPECT_EQ(sgd->optimizer->kind(), proto::OptimizerConfig::SGD);
  EXPECT_DOUBLE_EQ(sgd->optimizer->learning_rate(), 0.05000000074505806);
  EXPECT_EQ(sgd->loss, "sparse_categorical_crossentropy");

  auto momentum = Read(Config({{"optimizer", Sgd(0.1, 0.8, true)}, {"loss", Loss(true)}}));
  ASSERT_TRUE(momentum.ok()) << momentum.status();
  EXPECT_EQ(momentum->optimizer->kind(), proto::OptimizerConfig::MOMENTUM);
  EXPECT_DOUBLE_EQ(momentum->optimizer->momentum(), 0.8);
  EXPECT_TRUE(momentum->optimizer->nesterov());

  Json adam = {{"class_name", "Adam"},
               {"config",
                {{"learning_rate", 0.002},
                 {"beta_1", 0.8},
                 {"beta_2", 0.99},
                 {"epsilon", 1e-6},
                 {"amsgrad", false}}}};
  auto a =
      Read(Config({{"optimizer", adam}, {"loss", "sparse_categorical_crossentropy"}}, "softmax"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->optimizer->kind(), proto::OptimizerConfig::ADAM);
  EXPECT_DOUBLE_EQ(a->optimizer->beta_1(), 0.8);
  EXPECT_DOUBLE_EQ(a->optimizer->epsilon(), 1e-6);
  auto named =
      Read(Config({{"optimizer", "adam"}, {"loss", "categorical_crossentropy"}}, "softmax"));
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_DOUBLE_EQ(named->optimizer->learning_rate(), 0.001);  // Keras's default
}

// Keras 3's schedules as the optimizer's learning_rate, read and written
// back; the others are refused naming them.
TEST(CompileConfigTest, LearningRateSchedulesRoundTrip) {
  auto with_schedule = [](Json schedule) {
    Json o = Sgd(0.1, 0.9, false);
    o["config"]["learning_rate"] = {{"module", "keras.optimizers.schedules"},
                                    {"class_name", schedule[0]},
                                    {"config", schedule[1]},
                                    {"registered_name", nullptr}};
    return Config({{"optimizer", o}, {"loss", Loss(true)}});
  };
  const Json exponential = {"ExponentialDecay",
                            {{"initial_learning_rate", 0.1},
                             {"decay_steps", 10},
                             {"decay_rate", 0.5},
                             {"staircase", true},
                             {"name", "ExponentialDecay"}}};
  const Json piecewise = {"PiecewiseConstantDecay",
                          {{"boundaries", {3, 7}}, {"values", {0.3, 0.2, 0.1}}, {"name", "p"}}};
  const Json cosine = {"CosineDecay",
                       {{"initial_learning_rate", 0.01},
                        {"decay_steps", 100},
                        {"alpha", 0.1},
                        {"name", "CosineDecay"},
                        {"warmup_target", 0.1},
                        {"warmup_steps", 10}}};
  for (const Json& schedule : {exponential, piecewise, cosine}) {
    SCOPED_TRACE(schedule.dump());
    auto c = Read(with_schedule(schedule));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_NE(c->optimizer->schedule().kind(), proto::LearningRateSchedule::CONSTANT);
    const std::string written = WithCompileConfig(Config(Json()), *c->optimizer, false);
    auto again = Read(written);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << written;
    EXPECT_EQ(again->optimizer->SerializeAsString(), c->optimizer->SerializeAsString());
  }
  auto p = Read(with_schedule(piecewise));
  EXPECT_DOUBLE_EQ(p->optimizer->learning_rate(), 0.3);  // the first value
  auto k = Read(with_schedule(cosine));
  EXPECT_DOUBLE_EQ(k->optimizer->schedule().warmup_target(), 0.1);
  EXPECT_EQ(k->optimizer->schedule().warmup_steps(), 10);
  const std::vector<std::pair<Json, std::string>> bad = {
      {{"PolynomialDecay", {{"initial_learning_rate", 0.1}}},
       "the learning-rate schedule PolynomialDecay is not supported (supported: "
       "ExponentialDecay, PiecewiseConstantDecay, CosineDecay"},
      {{"CosineDecay", {{"initial_learning_rate", 0.1}, {"decay_steps", 0}}},
       "decay_steps 0 must be > 0"},
      {{"ExponentialDecay", {{"initial_learning_rate", 0.1}, {"decay_steps", "x"}}},
       "decay_steps \"x\" is not a number"},
      {{"CosineDecay", {{"initial_learning_rate", 0.1}, {"decay_steps", 5}, {"cycle", true}}},
       "cycle"},
  };
  for (const auto& [schedule, message] : bad) {
    auto c = Read(with_schedule(schedule));
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(message));
  }
}

// RMSprop, Adagrad and AdamW as Keras 3 saves them, each with weight_decay,
// read and written back so that Keras compiles the export alike.
TEST(CompileConfigTest, RmspropAdagradAdamWAndWeightDecayRoundTrip) {
  const Json rms = {{"class_name", "RMSprop"},
                    {"config",
                     {{"learning_rate", 0.01},
                      {"weight_decay", 0.05},
                      {"rho", 0.8},
                      {"momentum", 0.5},
                      {"epsilon", 1e-6},
                      {"centered", true}}}};
  const Json adagrad = {
      {"class_name", "Adagrad"},
      {"config", {{"learning_rate", 0.05}, {"initial_accumulator_value", 0.2}, {"epsilon", 1e-7}}}};
  const Json adamw = {
      {"class_name", "AdamW"},
      {"config", {{"learning_rate", 0.01}, {"weight_decay", 0.1}, {"amsgrad", false}}}};
  const Json sgd_decay = {{"class_name", "SGD"},
                          {"config", {{"weight_decay", 0.05}, {"clipnorm", 1.5}}}};
  const Json adam_clip = {{"class_name", "Adam"}, {"config", {{"clipvalue", 0.25}}}};
  const Json adamw_global = {{"class_name", "AdamW"}, {"config", {{"global_clipnorm", 0.5}}}};
  const Json ftrl = {{"class_name", "Ftrl"},
                     {"config",
                      {{"learning_rate", 0.1},
                       {"learning_rate_power", -0.6},
                       {"initial_accumulator_value", 0.2},
                       {"l1_regularization_strength", 0.001},
                       {"l2_regularization_strength", 0.01},
                       {"l2_shrinkage_regularization_strength", 0.02},
                       {"beta", 0.3}}}};
  for (const Json& o : {rms, adagrad, adamw, sgd_decay, adam_clip, adamw_global, ftrl}) {
    SCOPED_TRACE(o.dump());
    auto c = Read(Config({{"optimizer", o}, {"loss", Loss(true)}}));
    ASSERT_TRUE(c.ok()) << c.status();
    // Written back as Keras serializes it, and read again: the same config.
    const std::string written = WithCompileConfig(Config(Json()), *c->optimizer, false);
    auto again = Read(written);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << written;
    EXPECT_EQ(again->optimizer->SerializeAsString(), c->optimizer->SerializeAsString())
        << again->optimizer->DebugString() << " vs " << c->optimizer->DebugString();
  }
  auto r = Read(Config({{"optimizer", rms}, {"loss", Loss(true)}}));
  EXPECT_EQ(r->optimizer->kind(), proto::OptimizerConfig::RMSPROP);
  EXPECT_DOUBLE_EQ(r->optimizer->rho(), 0.8);
  EXPECT_DOUBLE_EQ(r->optimizer->momentum(), 0.5);
  EXPECT_TRUE(r->optimizer->centered());
  EXPECT_DOUBLE_EQ(r->optimizer->weight_decay(), 0.05);
  auto a = Read(Config({{"optimizer", adagrad}, {"loss", Loss(true)}}));
  EXPECT_DOUBLE_EQ(a->optimizer->initial_accumulator_value(), 0.2);
  EXPECT_FALSE(a->optimizer->has_weight_decay());
  auto w = Read(Config({{"optimizer", adamw}, {"loss", Loss(true)}}));
  EXPECT_EQ(w->optimizer->kind(), proto::OptimizerConfig::ADAMW);
  EXPECT_DOUBLE_EQ(w->optimizer->weight_decay(), 0.1);
  auto g = Read(Config({{"optimizer", adamw_global}, {"loss", Loss(true)}}));
  EXPECT_DOUBLE_EQ(g->optimizer->global_clipnorm(), 0.5);
  auto named = Read(Config({{"optimizer", "adamw"}, {"loss", Loss(true)}}));
  EXPECT_DOUBLE_EQ(named->optimizer->weight_decay(), 0.004);  // Keras's AdamW default
  auto f = Read(Config({{"optimizer", ftrl}, {"loss", Loss(true)}}));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->optimizer->kind(), proto::OptimizerConfig::FTRL);
  EXPECT_DOUBLE_EQ(f->optimizer->learning_rate_power(), -0.6);
  EXPECT_DOUBLE_EQ(f->optimizer->l2_shrinkage_regularization_strength(), 0.02);
  EXPECT_DOUBLE_EQ(f->optimizer->beta(), 0.3);
  auto named_ftrl = Read(Config({{"optimizer", "ftrl"}, {"loss", Loss(true)}}));
  ASSERT_TRUE(named_ftrl.ok()) << named_ftrl.status();
  EXPECT_DOUBLE_EQ(named_ftrl->optimizer->learning_rate_power(), -0.5);  // Keras's default
}

TEST(CompileConfigTest, WhatWeDoNotRunIsAnErrorNamingIt) {
  Json clipped = Sgd(0.1, 0, false);
  clipped["config"]["loss_scale_factor"] = 128.0;
  Json both = Sgd(0.1, 0, false);
  both["config"]["clipnorm"] = 1.0;
  both["config"]["clipvalue"] = 0.5;
  Json schedule = Sgd(0.1, 0, false);
  schedule["config"]["learning_rate"] = {{"class_name", "ExponentialDecay"}};
  const std::vector<std::pair<Json, std::string>> cases = {
      {{{"optimizer", {{"class_name", "Lion"}}}}, "optimizer Lion is not supported"},
      {{{"optimizer", {{"class_name", "RMSprop"}, {"config", {{"rho", 0}}}}}},
       "RMSprop's rho 0 is not supported"},
      {{{"optimizer", {{"class_name", "Adagrad"}, {"config", {{"initial_accumulator_value", 0}}}}}},
       "Adagrad's initial_accumulator_value 0 is not supported"},
      {{{"optimizer", {{"class_name", "AdamW"}, {"config", {{"weight_decay", -1}}}}}},
       "the optimizer's weight_decay -1 is not a number >= 0"},
      {{{"optimizer", {{"class_name", "Adagrad"}, {"config", {{"rho", 0.9}}}}}}, "rho"},
      {{{"optimizer", clipped}}, "loss_scale_factor is not supported"},
      {{{"optimizer", both}}, "two of clipvalue, clipnorm and global_clipnorm together"},
      {{{"optimizer", schedule}}, "the learning-rate schedule ExponentialDecay: the initial"},
      {{{"loss", "mean_squared_logarithmic_error"}},
       "loss mean_squared_logarithmic_error is not supported"},
      // Logits trained as probabilities: not the model's cross-entropy.
      {{{"loss", "sparse_categorical_crossentropy"}},
       "from_logits=False but the model outputs logits"},
      // Nothing silently ignored: what Keras's compile() takes and pscluster
      // does not run is refused, naming it.
      {{{"loss", Loss(true)}, {"loss_weights", {1.0}}}, "loss_weights is not supported"},
      {{{"loss", Loss(true)}, {"metrics", {"mae"}}},
       "the metrics entry mae needs one-hot labels (loss categorical_crossentropy)"},
      {{{"loss", Loss(true)}, {"metrics", {"accuracy", {{"class_name", "AUC"}}}}},
       "the metrics entry AUC needs one-hot labels"},
      {{{"loss", Loss(true)}, {"metrics", {"categorical_accuracy"}}},
       "the metrics entry categorical_accuracy is not supported with class ids"},
      {{{"loss", {{"class_name", "CategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}},
        {"metrics", {"f1_score"}}},
       "the metrics entry f1_score is not supported (supported: accuracy; with one-hot or binary "
       "labels"},
      {{{"loss", {{"class_name", "CategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}},
        {"metrics", {{{"class_name", "AUC"}, {"config", {{"curve", "PR"}}}}}}},
       "the metric AUC's curve \"PR\" is not supported (pscluster runs \"ROC\""},
      {{{"loss", {{"class_name", "CategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}},
        {"metrics", {{{"class_name", "Precision"}, {"config", {{"top_k", 2}}}}}}},
       "the metric Precision's top_k 2 is not supported"},
      {{{"loss", {{"class_name", "CategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}},
        {"metrics", {"sparse_categorical_accuracy"}}},
       "the metrics entry sparse_categorical_accuracy is not supported with one-hot labels"},
      {{{"loss", Loss(true)}, {"weighted_metrics", {"accuracy"}}},
       "the weighted_metrics entry accuracy is not supported"},
      {{{"loss", Loss(true)}, {"steps_per_epoch", 3}},
       "compile()'s option 'steps_per_epoch' is not supported"},
      {{{"loss",
         {{"class_name", "SparseCategoricalCrossentropy"},
          {"config", {{"from_logits", true}, {"reduction", "mean_with_sample_weight"}}}}}},
       "the loss's reduction \"mean_with_sample_weight\" is not supported"},
      {{{"loss",
         {{"class_name", "SparseCategoricalCrossentropy"},
          {"config", {{"from_logits", true}, {"reduction", nullptr}}}}}},
       "the loss's reduction null is not supported"},
      {{{"loss",
         {{"class_name", "SparseCategoricalCrossentropy"},
          {"config", {{"from_logits", true}, {"label_smoothing", 0.1}}}}}},
       "the loss SparseCategoricalCrossentropy has no label_smoothing"},
      {{{"loss",
         {{"class_name", "CategoricalCrossentropy"},
          {"config", {{"from_logits", true}, {"label_smoothing", 1.5}}}}}},
       "the loss's label_smoothing 1.5 is not a number in [0, 1]"},
      {{{"loss",
         {{"class_name", "CategoricalCrossentropy"},
          {"config", {{"from_logits", true}, {"focal", true}}}}}},
       "the loss CategoricalCrossentropy's option 'focal' is not supported"},
      {{{"optimizer", {{"class_name", "SGD"}, {"config", {{"decay", 0.1}}}}}},
       "the optimizer SGD's option 'decay' is not supported"},
  };
  for (const auto& [compile, want] : cases) {
    auto c = Read(Config(compile));
    ASSERT_FALSE(c.ok()) << want;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(want));
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("m.keras: compile_config"));
  }
}

// What Keras 3.15 writes for model.compile(optimizer="adam",
// loss="sparse_categorical_crossentropy", metrics=["accuracy"]): every key
// is honoured or accepted (run_eagerly, steps_per_execution, jit_compile
// choose how Keras executes, not what it computes).
TEST(CompileConfigTest, WhatKerasWritesForACommonCompileIsAccepted) {
  const Json compile = Json::parse(R"({"optimizer": {"module": "keras.optimizers",
      "class_name": "Adam", "config": {"name": "adam", "learning_rate": 0.0010000000474974513,
      "weight_decay": null, "clipnorm": null, "global_clipnorm": null, "clipvalue": null,
      "use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
      "loss_scale_factor": null, "gradient_accumulation_steps": null, "beta_1": 0.9,
      "beta_2": 0.999, "epsilon": 1e-07, "amsgrad": false}, "registered_name": null},
      "loss": "sparse_categorical_crossentropy", "loss_weights": null,
      "metrics": ["accuracy"], "weighted_metrics": null, "run_eagerly": false,
      "steps_per_execution": 1, "jit_compile": true})");
  auto c = Read(Config(compile, "softmax"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->optimizer->kind(), proto::OptimizerConfig::ADAM);
  EXPECT_EQ(c->loss, "sparse_categorical_crossentropy");
  const Json reduced = {{"loss",
                         {{"class_name", "SparseCategoricalCrossentropy"},
                          {"config",
                           {{"name", "scce"},
                            {"reduction", "sum_over_batch_size"},
                            {"from_logits", true},
                            {"ignore_class", nullptr}}}}},
                        {"metrics", {{{"class_name", "SparseCategoricalAccuracy"}}}}};
  EXPECT_TRUE(Read(Config(reduced)).ok()) << Read(Config(reduced)).status();
}

// The metrics beyond the accuracy, with one-hot labels, by Keras's string
// or class names; their History names as Keras gives them.
TEST(CompileConfigTest, MetricsOfOneHotLabelsAreRead) {
  const Json compile = {
      {"loss", {{"class_name", "CategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}},
      {"metrics",
       {"accuracy",
        "mae",
        "mean_squared_error",
        "Recall",
        {{"class_name", "AUC"},
         {"config", {{"name", "auc_50"}, {"num_thresholds", 50}, {"curve", "ROC"}}}},
        {{"class_name", "Precision"}, {"config", {{"thresholds", nullptr}}}},
        "binary_accuracy"}}};
  auto c = Read(Config(compile));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::string> names;
  for (const proto::CompiledMetric& m : c->metrics) names.push_back(m.name());
  EXPECT_THAT(names, ::testing::ElementsAre("mae", "mean_squared_error", "Recall", "auc_50",
                                            "precision", "binary_accuracy"));
  EXPECT_EQ(c->metrics[3].kind(), proto::CompiledMetric::AUC);
  EXPECT_EQ(c->metrics[3].num_thresholds(), 50);
  EXPECT_EQ(c->metrics[1].kind(), proto::CompiledMetric::MSE);
}

// label_smoothing and reduction="sum" are honoured: read into the config.
TEST(CompileConfigTest, LabelSmoothingAndSumAreRead) {
  const Json compile = {
      {"loss",
       {{"class_name", "CategoricalCrossentropy"},
        {"config",
         {{"from_logits", true}, {"label_smoothing", 0.2}, {"reduction", "sum"}, {"axis", -1}}}}}};
  auto c = Read(Config(compile));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->loss, "categorical_crossentropy");
  EXPECT_FLOAT_EQ(c->label_smoothing, 0.2f);
  EXPECT_TRUE(c->reduction_sum);
  c = Read(Config(Json{{"loss", Loss(true)}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->label_smoothing, 0);
  EXPECT_FALSE(c->reduction_sum);
}

// binary_crossentropy of one sigmoid unit or one logit, with its label
// smoothing, and the metrics that compare the output with the 0/1 label.
TEST(CompileConfigTest, BinaryCrossentropyOfASigmoidOrALogit) {
  auto bce = [](bool from_logits) {
    return Json{{"class_name", "BinaryCrossentropy"},
                {"config", {{"from_logits", from_logits}, {"label_smoothing", 0.1}}}};
  };
  auto c = Read(
      Config(Json{{"loss", bce(false)}, {"metrics", {"accuracy", "AUC", "mae"}}}, "sigmoid", 1));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->loss, "binary_crossentropy");
  EXPECT_FLOAT_EQ(c->label_smoothing, 0.1f);
  ASSERT_EQ(c->metrics.size(), 2u);
  EXPECT_EQ(c->metrics[0].kind(), proto::CompiledMetric::AUC);
  c = Read(Config(Json{{"loss", "binary_crossentropy"}}, "sigmoid", 1));
  ASSERT_TRUE(c.ok()) << c.status();
  c = Read(Config(Json{{"loss", bce(true)}}, "linear", 1));
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {Config(Json{{"loss", bce(true)}}, "sigmoid", 1),
       "from_logits=True but the model outputs a sigmoid"},
      {Config(Json{{"loss", bce(false)}}, "linear", 1),
       "from_logits=False but the model outputs logits"},
      {Config(Json{{"loss", bce(false)}, {"metrics", {"sparse_categorical_accuracy"}}}, "sigmoid",
              1),
       "not supported with 0/1 labels of one output unit (binary_crossentropy)"},
  };
  for (const auto& [config, message] : bad) {
    c = Read(config);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(message));
  }
}

// The regression losses by every name Keras saves them under, Huber's
// delta where a config has one (Keras 3.15's Huber drops it), and the
// metrics a regression has: mae, mse, root_mean_squared_error, no accuracy.
TEST(CompileConfigTest, RegressionLossesAndTheirMetrics) {
  const std::vector<std::pair<Json, std::string>> losses = {
      {"mse", "mean_squared_error"},
      {"MSE", "mean_squared_error"},
      {"mean_absolute_error", "mean_absolute_error"},
      {{{"class_name", "MeanSquaredError"},
        {"config", {{"name", "mean_squared_error"}, {"reduction", "sum_over_batch_size"}}}},
       "mean_squared_error"},
      {{{"class_name", "MeanAbsoluteError"}, {"config", {{"name", "mean_absolute_error"}}}},
       "mean_absolute_error"},
      {"huber", "huber"},
      {{{"class_name", "Huber"}, {"config", {{"name", "huber_loss"}}}}, "huber"},
  };
  for (const auto& [loss, want] : losses) {
    auto c = Read(Config(Json{{"loss", loss}, {"metrics", {"mae", "RootMeanSquaredError"}}}));
    ASSERT_TRUE(c.ok()) << loss.dump() << ": " << c.status();
    EXPECT_EQ(c->loss, want) << loss.dump();
    EXPECT_EQ(c->huber_delta, 0) << loss.dump();
    ASSERT_EQ(c->metrics.size(), 2u);
    EXPECT_EQ(c->metrics[0].kind(), proto::CompiledMetric::MAE);
    EXPECT_EQ(c->metrics[1].kind(), proto::CompiledMetric::ROOT_MEAN_SQUARED_ERROR);
    // A string is its own History key, as in Keras.
    EXPECT_EQ(c->metrics[1].name(), "RootMeanSquaredError");
  }
  // Keras 2's Huber saved its delta; any activation but a softmax.
  auto c = Read(Config(Json{{"loss", {{"class_name", "Huber"}, {"config", {{"delta", 2.5}}}}}},
                       "sigmoid", 1));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FLOAT_EQ(c->huber_delta, 2.5f);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {Config(Json{{"loss", "mse"}, {"metrics", {"accuracy"}}}),
       "a regression has no accuracy (use mae, mse or root_mean_squared_error)"},
      {Config(Json{{"loss", "mse"}, {"metrics", {"AUC"}}}),
       "AUC is not supported for a regression"},
      {Config(Json{{"loss", {{"class_name", "Huber"}, {"config", {{"delta", -1}}}}}}),
       "delta -1 is not a number > 0"},
      {Config(Json{{"loss", {{"class_name", "MeanSquaredError"}, {"config", {{"delta", 1}}}}}}),
       "delta 1 is not one of its arguments"},
      {Config(Json{
           {"loss", {{"class_name", "MeanSquaredError"}, {"config", {{"from_logits", true}}}}}}),
       "from_logits"},
      {Config(Json{{"loss", "mean_squared_logarithmic_error"}}),
       "supported: sparse_categorical_crossentropy, categorical_crossentropy, "
       "binary_crossentropy, mean_squared_error, mean_absolute_error, huber"},
  };
  for (const auto& [config, message] : bad) {
    c = Read(config);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(message));
  }
}

}  // namespace
}  // namespace job
}  // namespace psc
