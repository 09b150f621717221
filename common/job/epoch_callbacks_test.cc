// The sequences below follow Keras 3.15's callbacks line by line
// (keras/src/callbacks/early_stopping.py, monitor_callback.py,
// model_checkpoint.py); each case notes the step that decides it.
#include "common/job/epoch_callbacks.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace job {
namespace {

using ::testing::HasSubstr;

proto::Callbacks Stopping(const std::string& monitor, int64_t patience, double min_delta = 0) {
  proto::Callbacks c;
  c.set_early_stopping_monitor(monitor);
  c.set_early_stopping_patience(patience);
  c.set_early_stopping_min_delta(min_delta);
  c.set_early_stopping_mode("auto");
  return c;
}

// The 0-based epoch at which training stops for `values` of the monitor,
// or -1.
int64_t StopsAt(const proto::Callbacks& spec, const std::vector<double>& values) {
  EpochCallbacks c(spec);
  for (size_t e = 0; e < values.size(); ++e) {
    if (c.OnEpochEnd(static_cast<int64_t>(e), {{spec.early_stopping_monitor(), values[e]}}).stop) {
      return static_cast<int64_t>(e);
    }
  }
  return -1;
}

TEST(EpochCallbacksTest, EarlyStoppingAsKerasDecides) {
  // wait counts every epoch and resets on an improvement; training stops
  // once wait >= patience on an epoch that does not improve (and epoch > 0).
  EXPECT_EQ(StopsAt(Stopping("val_loss", 2), {1.0, 0.9, 0.95, 0.92, 0.91}), 3);
  EXPECT_EQ(StopsAt(Stopping("val_loss", 0), {1.0, 1.1, 0.5}), 1);
  EXPECT_EQ(StopsAt(Stopping("val_loss", 0), {1.0, 0.9, 0.8}), -1);
  // min_delta: 0.96 is not below 1.0 - 0.05.
  EXPECT_EQ(StopsAt(Stopping("val_loss", 0, 0.05), {1.0, 0.96}), 1);
  EXPECT_EQ(StopsAt(Stopping("val_loss", 0, 0.05), {1.0, 0.94, 0.9}), 2);
  // An accuracy is maximized in auto mode; a loss in max mode too.
  EXPECT_EQ(StopsAt(Stopping("val_accuracy", 1), {0.5, 0.6, 0.55, 0.58}), 2);
  proto::Callbacks max_loss = Stopping("loss", 0);
  max_loss.set_early_stopping_mode("max");
  EXPECT_EQ(StopsAt(max_loss, {1.0, 0.5}), 1);
  // Improving never stops, even past patience with a baseline not beaten.
  proto::Callbacks baseline = Stopping("val_loss", 2);
  baseline.mutable_early_stopping_baseline()->set_value(0.5);
  EXPECT_EQ(StopsAt(baseline, {0.8, 0.7, 0.6}), -1);
  EXPECT_EQ(StopsAt(baseline, {0.8, 0.7, 0.75}), 2);
  // start_from_epoch: the first epochs are not monitored.
  proto::Callbacks late = Stopping("val_loss", 0);
  late.set_early_stopping_start_from_epoch(2);
  EXPECT_EQ(StopsAt(late, {1.0, 2.0, 3.0, 4.0}), 3);
  // A monitor missing from the logs changes nothing.
  EXPECT_EQ(StopsAt(Stopping("val_loss", 0), {}), -1);
}

TEST(EpochCallbacksTest, TheVerdictSaysWhichWeightsToKeepAndWhy) {
  proto::Callbacks spec = Stopping("val_loss", 1);
  spec.set_restore_best_weights(true);
  EpochCallbacks c(spec);
  EXPECT_TRUE(c.OnEpochEnd(0, {{"val_loss", 1.0}}).keep_weights);
  EXPECT_TRUE(c.OnEpochEnd(1, {{"val_loss", 0.8}}).keep_weights);
  const EpochCallbacks::Verdict worse = c.OnEpochEnd(2, {{"val_loss", 0.9}});
  EXPECT_FALSE(worse.keep_weights);
  EXPECT_TRUE(worse.stop);
  EXPECT_EQ(c.best_epoch(), 1);
  EXPECT_THAT(worse.why, HasSubstr("early stopping after epoch 3: val_loss did not improve on "
                                   "0.8 (epoch 2)"));
}

TEST(EpochCallbacksTest, ExportBestOnlyExportsOnEachImprovement) {
  proto::Callbacks spec;
  spec.set_export_best("/tmp/best.keras");
  spec.set_export_monitor("val_accuracy");
  spec.set_export_mode("auto");
  EpochCallbacks c(spec);
  std::vector<bool> exported;
  for (double a : {0.5, 0.7, 0.6, 0.7, 0.71}) {
    exported.push_back(
        c.OnEpochEnd(static_cast<int64_t>(exported.size()), {{"val_accuracy", a}}).export_now);
  }
  EXPECT_EQ(exported, (std::vector<bool>{true, true, false, false, true}));
}

// A compiled metric is a monitor, with Keras's direction in auto mode:
// down for mae and mse, up for the others.
TEST(EpochCallbacksTest, CompiledMetricsAreMonitors) {
  std::vector<proto::CompiledMetric> metrics(2);
  metrics[0].set_name("auc");
  metrics[0].set_kind(proto::CompiledMetric::AUC);
  metrics[1].set_name("mae");
  metrics[1].set_kind(proto::CompiledMetric::MAE);
  auto auc = Monitor::Create("val_auc", "auto", 0, "early_stopping", metrics);
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_TRUE(auc->IsImprovement(0.8, 0.7));
  auto mae = Monitor::Create("mae", "auto", 0, "early_stopping", metrics);
  ASSERT_TRUE(mae.ok()) << mae.status();
  EXPECT_TRUE(mae->IsImprovement(0.1, 0.2));
  EXPECT_THAT(Monitor::Create("val_mse", "auto", 0, "export", metrics).status().message(),
              HasSubstr("--export_monitor=val_mse: expected one of loss, accuracy, auc, mae"));
  // A regression has no accuracy to monitor; its rmse is lower-is-better.
  metrics[0].set_name("root_mean_squared_error");
  metrics[0].set_kind(proto::CompiledMetric::ROOT_MEAN_SQUARED_ERROR);
  EXPECT_THAT(Monitor::Create("val_accuracy", "auto", 0, "early_stopping", metrics, false)
                  .status()
                  .message(),
              HasSubstr("expected one of loss, root_mean_squared_error, mae"));
  auto rmse =
      Monitor::Create("val_root_mean_squared_error", "auto", 0, "early_stopping", metrics, false);
  ASSERT_TRUE(rmse.ok()) << rmse.status();
  EXPECT_TRUE(rmse->IsImprovement(0.1, 0.2));
  metrics[0].set_name("auc");
  metrics[0].set_kind(proto::CompiledMetric::AUC);
  // Stopping on val_auc, from an epoch's record.
  EpochCallbacks c(Stopping("val_auc", 1), metrics);
  EpochRecord e;
  e.val_metrics = {{"auc", 0.8}};
  EXPECT_FALSE(c.OnEpochEnd(0, LogsOf(e)).stop);
  e.val_metrics = {{"auc", 0.7}};
  EXPECT_TRUE(c.OnEpochEnd(1, LogsOf(e)).stop);
}

TEST(EpochCallbacksTest, BadFlagsAreRefusedNamingThem) {
  EXPECT_THAT(EpochCallbacks::Validate(Stopping("val_auc", 1)).message(),
              HasSubstr("--early_stopping_monitor=val_auc: expected one of loss, accuracy, each "
                        "also with val_"));
  proto::Callbacks mode = Stopping("val_loss", 1);
  mode.set_early_stopping_mode("up");
  EXPECT_THAT(EpochCallbacks::Validate(mode).message(), HasSubstr("--early_stopping_mode=up"));
  proto::Callbacks orphan;
  orphan.set_restore_best_weights(true);
  EXPECT_THAT(EpochCallbacks::Validate(orphan).message(),
              HasSubstr("need --early_stopping_monitor"));
  EXPECT_TRUE(EpochCallbacks::Validate(proto::Callbacks()).ok());
}

// Keras's ReduceLROnPlateau.on_epoch_end: wait counts epochs without an
// improvement larger than min_delta (1e-4 by default); at patience the rate
// is multiplied by factor (never below min_lr) and a cooldown starts.
std::vector<double> Rates(const proto::Callbacks& spec, const std::vector<double>& values,
                          double lr) {
  EpochCallbacks c(spec);
  std::vector<double> out;
  for (size_t e = 0; e < values.size(); ++e) {
    const EpochCallbacks::Verdict v =
        c.OnEpochEnd(static_cast<int64_t>(e), {{spec.reduce_lr_monitor(), values[e]}}, lr);
    if (v.learning_rate.has_value()) lr = *v.learning_rate;
    out.push_back(lr);
  }
  return out;
}

proto::Callbacks Reduce(int64_t patience, int64_t cooldown = 0, double min_lr = 0) {
  proto::Callbacks c;
  c.set_reduce_lr_monitor("val_loss");
  c.set_reduce_lr_factor(0.5);
  c.set_reduce_lr_patience(patience);
  c.set_reduce_lr_mode("auto");
  c.set_reduce_lr_min_delta(1e-4);
  c.set_reduce_lr_cooldown(cooldown);
  c.set_reduce_lr_min_lr(min_lr);
  return c;
}

TEST(EpochCallbacksTest, ReduceLrOnPlateauAsKerasDecides) {
  const double lr = 0.1;
  const double f = static_cast<float>(lr);  // Keras reads its float32 variable
  EXPECT_EQ(Rates(Reduce(1), {1.0, 0.9, 0.95, 0.96, 0.8}, lr),
            (std::vector<double>{lr, lr, f * 0.5, static_cast<float>(f * 0.5) * 0.5,
                                 static_cast<float>(f * 0.5) * 0.5}));
  // An improvement below min_delta is none.
  EXPECT_EQ(Rates(Reduce(1), {1.0, 0.99995}, lr), (std::vector<double>{lr, f * 0.5}));
  // cooldown: Keras counts it down before it looks, so cooldown=1 skips
  // nothing and cooldown=2 skips the epoch after a reduction.
  EXPECT_EQ(Rates(Reduce(1, 1), {1.0, 1.1, 1.2}, lr),
            (std::vector<double>{lr, f * 0.5, static_cast<float>(f * 0.5) * 0.5}));
  EXPECT_EQ(Rates(Reduce(1, 2), {1.0, 1.1, 1.2, 1.3}, lr),
            (std::vector<double>{lr, f * 0.5, f * 0.5, static_cast<float>(f * 0.5) * 0.5}));
  // min_lr: never below it, and no reduction once there.
  EXPECT_EQ(Rates(Reduce(1, 0, 0.08), {1.0, 1.1, 1.2}, lr), (std::vector<double>{lr, 0.08, 0.08}));
  proto::Callbacks bad = Reduce(1);
  bad.set_reduce_lr_factor(1.0);
  EXPECT_THAT(EpochCallbacks::Validate(bad).message(), HasSubstr("--reduce_lr_factor=1"));
}

}  // namespace
}  // namespace job
}  // namespace psc
