// --optimizer and --learning_rate over a model file's compile_config: a
// flag given wins even at the value a default would have; an absent one
// leaves the compiled choice; Keras's defaults fill the rest.
#include "common/job/job_flags.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "common/job/job_data.h"
#include "common/job/job_loss.h"
#include "common/job/job_model.h"
#include "common/optimizer/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace job {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

class OptimizerFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("job_flags_test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    absl::SetFlag(&FLAGS_data_dir, dir_.string());  // any readable folder: no data is read
    // An Adam(0.002)-compiled model, as a .keras archive's config.json.
    Json layers = {
        {{"class_name", "InputLayer"}, {"config", {{"name", "in"}, {"batch_shape", {nullptr, 4}}}}},
        {{"class_name", "Dense"},
         {"config", {{"name", "d"}, {"units", 3}, {"activation", "softmax"}}}}};
    Json top = {{"class_name", "Sequential"},
                {"config", {{"name", "m"}, {"layers", layers}}},
                {"compile_config",
                 {{"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.002}}}}},
                  {"loss", "sparse_categorical_crossentropy"}}}};
    model_ = (dir_ / "adam.json").string();
    std::ofstream(model_) << top.dump();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // With `flag` set to `value` (for this call only), the flags are
  // INVALID_ARGUMENT saying `want`.
  template <typename T, typename V>
  static void Refused(absl::Flag<T>* flag, V value, const std::string& want) {
    absl::FlagSaver restore;
    absl::SetFlag(flag, value);
    const absl::StatusOr<proto::JobSpec> job = JobSpecFromFlags();
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument) << want;
    EXPECT_THAT(job.status().message(), ::testing::HasSubstr(want));
  }

  // A Sequential model of a Dense of `units` on 4 features, compiled with
  // `compile`, written as dir_/<file>; --model names it.
  void UseModel(const std::string& file, int units, Json compile) {
    Json layers = {
        {{"class_name", "InputLayer"}, {"config", {{"name", "in"}, {"batch_shape", {nullptr, 4}}}}},
        {{"class_name", "Dense"}, {"config", {{"name", "d"}, {"units", units}}}}};
    Json top = {{"class_name", "Sequential"},
                {"config", {{"name", "m"}, {"layers", layers}}},
                {"compile_config", std::move(compile)}};
    const std::string path = (dir_ / file).string();
    std::ofstream(path) << top.dump();
    absl::SetFlag(&FLAGS_model, path);
  }

  proto::OptimizerConfig Resolve(const std::string& model) {
    absl::SetFlag(&FLAGS_model, model);
    absl::StatusOr<proto::JobSpec> job = JobSpecFromFlags();
    EXPECT_TRUE(job.ok()) << job.status();
    source_ = job.ok() ? job->optimizer_source() : "";
    return job.ok() ? job->optimizer() : proto::OptimizerConfig();
  }

  absl::FlagSaver saver_;
  std::filesystem::path dir_;
  std::string model_;
  std::string source_;
};

TEST_F(OptimizerFlagsTest, AbsentFlagsLeaveTheCompiledOptimizer) {
  const proto::OptimizerConfig o = Resolve(model_);
  EXPECT_EQ(optimizer::OptimizerText(o),
            "adam, lr 0.002 (beta_1 0.9, beta_2 0.999, epsilon 1e-07)");
  EXPECT_EQ(source_, "the model's compile_config");
}

TEST_F(OptimizerFlagsTest, AFlagGivenWinsEvenAtWhatWasItsDefault) {
  absl::SetFlag(&FLAGS_learning_rate, 0.01);  // the old default value
  EXPECT_EQ(optimizer::OptimizerText(Resolve(model_)),
            "adam, lr 0.01 (beta_1 0.9, beta_2 0.999, epsilon 1e-07)");
  absl::SetFlag(&FLAGS_learning_rate, std::nullopt);
  absl::SetFlag(&FLAGS_optimizer, "sgd");                                // the old default value
  EXPECT_EQ(optimizer::OptimizerText(Resolve(model_)), "sgd, lr 0.01");  // Keras's SGD default
  EXPECT_EQ(source_, "--optimizer");
}

TEST_F(OptimizerFlagsTest, DefaultsAreKerassForTheOptimizerThatRuns) {
  EXPECT_EQ(optimizer::OptimizerText(Resolve("mlp")), "sgd, lr 0.01");
  EXPECT_EQ(source_, "Keras's default (SGD)");
  absl::SetFlag(&FLAGS_optimizer, "adam");
  EXPECT_EQ(optimizer::OptimizerText(Resolve("mlp")),
            "adam, lr 0.001 (beta_1 0.9, beta_2 0.999, epsilon 1e-07)");
  absl::SetFlag(&FLAGS_learning_rate, -1.0);
  absl::SetFlag(&FLAGS_model, "mlp");
  EXPECT_THAT(JobSpecFromFlags().status().message(),
              ::testing::HasSubstr("--learning_rate=-1: must be finite and > 0"));
}

// A compiled schedule runs unless --learning_rate replaces it; with
// --reduce_lr_monitor it is refused, as Keras's ReduceLROnPlateau does.
TEST_F(OptimizerFlagsTest, ACompiledScheduleAndTheFlagsOverIt) {
  Json top = Json::parse(std::ifstream(model_));
  top["compile_config"]["optimizer"]["config"]["learning_rate"] = {
      {"class_name", "ExponentialDecay"},
      {"config", {{"initial_learning_rate", 0.01}, {"decay_steps", 10}, {"decay_rate", 0.5}}}};
  const std::string path = (dir_ / "scheduled.json").string();
  std::ofstream(path) << top.dump();
  EXPECT_EQ(optimizer::OptimizerText(Resolve(path)),
            "adam, lr 0.01 (beta_1 0.9, beta_2 0.999, epsilon 1e-07), learning rate by "
            "exponential_decay (decay_steps 10, decay_rate 0.5)");
  {
    absl::FlagSaver restore;
    absl::SetFlag(&FLAGS_reduce_lr_monitor, std::string("val_loss"));
    absl::SetFlag(&FLAGS_model, path);
    EXPECT_THAT(JobSpecFromFlags().status().message(),
                ::testing::HasSubstr("--reduce_lr_monitor: the optimizer's learning rate is a "
                                     "schedule (exponential_decay"));
  }
  absl::SetFlag(&FLAGS_learning_rate, 0.02);
  EXPECT_EQ(optimizer::OptimizerText(Resolve(path)),
            "adam, lr 0.02 (beta_1 0.9, beta_2 0.999, epsilon 1e-07)");
}

// The flags this issue added refuse bad values naming the flag.
TEST_F(OptimizerFlagsTest, NewFlagsRefuseBadValuesNamingThem) {
  absl::SetFlag(&FLAGS_model, "mlp");
  absl::SetFlag(&FLAGS_data, model_);  // any readable file: --standardize_axis needs --data
  Refused(&FLAGS_standardize_axis, std::string("first"), "--standardize_axis=first");
  absl::SetFlag(&FLAGS_data, std::string());
  Refused(&FLAGS_standardize_axis, std::string("last"), "apply to --data=FILE.npz");
  Refused(&FLAGS_early_stopping_monitor, std::string("val_auc"),
          "--early_stopping_monitor=val_auc");
  Refused(&FLAGS_export_best, std::string("best.h5"), "--export_best=best.h5");
  absl::SetFlag(&FLAGS_reduce_lr_monitor, std::string("val_loss"));
  Refused(&FLAGS_reduce_lr_factor, 1.5, "--reduce_lr_factor=1.5: must be in (0, 1)");
  Refused(&FLAGS_strategy, std::string("multi_worker_mirrored"),
          "--reduce_lr_monitor is for --strategy=parameter_server");
  absl::SetFlag(&FLAGS_reduce_lr_monitor, std::string());
  Refused(&FLAGS_class_weight, std::string("10:2"), "--class_weight=10:2: \"10:2\" is not");
  Refused(&FLAGS_sample_weight, std::string("sw"), "--sample_weight=sw names an array of --data");
  absl::SetFlag(&FLAGS_class_weight, std::string("1:2"));
  Refused(&FLAGS_sample_weight, std::string("sw"),
          "--class_weight and --sample_weight together: Keras's fit refuses both");
}

// The data files' flags: the --data form and its keys, and the three flags
// beside it, refuse bad values naming them; good ones reach the JobSpec.
TEST_F(OptimizerFlagsTest, DataFileFlagsRefuseBadValuesNamingThem) {
  absl::SetFlag(&FLAGS_model, "mlp");
  const std::string train = (dir_ / "train.tfrecord").string();
  const std::string spec = (dir_ / "spec.json").string();
  std::ofstream(train) << "";
  std::ofstream(spec) << R"({"inputs": {"x": {"kind": "float"}}, "label": {"kind": "int64"}})";
  const std::string files = absl::StrCat("tfrecord:train=", train, ",spec=", spec);
  Refused(&FLAGS_data, absl::StrCat("tfrecord:train=", train), "give train=GLOB and spec=FILE");
  Refused(&FLAGS_data, files + ",shuffle=1", "\"shuffle=1\": want KEY=VALUE");
  Refused(&FLAGS_data, files + ",compression=lz4", "--data=");
  Refused(&FLAGS_data, files + ",validation_split=1", "validation_split=1: want a fraction");
  Refused(&FLAGS_data, files + ",read=lazy", "read=lazy: want auto, whole or stream");
  Refused(&FLAGS_data, files + ",read=stream,shuffle_buffer=0", "shuffle_buffer=0: want a count");
  Refused(&FLAGS_data, files + ",read=stream,shuffle_buffer=x", "shuffle_buffer=x: want a count");
  Refused(&FLAGS_data, files + ",read=stream,shuffle_buffer=16777217", "shuffle_buffer=16777217");
  Refused(&FLAGS_data, files + ",shuffle_buffer=100", "give read=stream");
  Refused(&FLAGS_data, absl::StrCat("csv:train=", dir_.string(), "/none*,spec=", spec),
          "matches no file");
  {
    absl::FlagSaver restore;
    absl::SetFlag(&FLAGS_data, files);
    Refused(&FLAGS_max_skipped_fraction, 1.5, "--max_skipped_fraction=1.5: want a fraction");
    Refused(&FLAGS_max_record_bytes, uint64_t{0}, "--max_record_bytes=0: want 1 to");
    Refused(&FLAGS_max_record_bytes, uint64_t{1} << 31, "--max_record_bytes=2147483648");
    Refused(&FLAGS_validation_split, 0.1, "--validation_split and --sample_weight are for an .npz");
    absl::SetFlag(&FLAGS_skip_corrupt_records, true);
    absl::SetFlag(&FLAGS_max_record_bytes, uint64_t{4096});
    const absl::StatusOr<proto::JobSpec> job = JobSpecFromFlags();
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_TRUE(job->record_data().skip_corrupt_records());
    EXPECT_EQ(job->record_data().max_record_bytes(), 4096u);
    EXPECT_EQ(job->record_data().train_size(), 1);
    EXPECT_EQ(job->record_data().read(), "whole");  // auto: an empty file is not over 1 GiB
    EXPECT_FALSE(job->has_numpy_data());
    absl::SetFlag(&FLAGS_data, files + ",read=stream,shuffle_buffer=64");
    const absl::StatusOr<proto::JobSpec> streamed = JobSpecFromFlags();
    ASSERT_TRUE(streamed.ok()) << streamed.status();
    EXPECT_EQ(streamed->record_data().read(), "stream");
    EXPECT_EQ(streamed->record_data().shuffle_buffer(), 64);
  }
  Refused(&FLAGS_skip_corrupt_records, true, "--skip_corrupt_records is for data files");
}

// The compiled loss's options and --class_weight reach the JobSpec.
TEST_F(OptimizerFlagsTest, TheLossAndItsWeightsReachTheJob) {
  UseModel(
      "smooth.json", 3,
      {{"loss",
        {{"class_name", "CategoricalCrossentropy"},
         {"config", {{"from_logits", true}, {"label_smoothing", 0.1}, {"reduction", "sum"}}}}}});
  absl::SetFlag(&FLAGS_class_weight, std::string("0:0.5,2:3"));
  absl::SetFlag(&FLAGS_shuffle, false);
  const absl::StatusOr<proto::JobSpec> job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->no_shuffle()) << "--noshuffle: fit(shuffle=False)";
  EXPECT_EQ(job->loss().name(), "categorical_crossentropy");
  EXPECT_FLOAT_EQ(job->loss().label_smoothing(), 0.1f);
  EXPECT_TRUE(job->loss().reduction_sum());
  EXPECT_EQ(job->loss().class_weight().size(), 2u);
  EXPECT_EQ(job->loss().class_weight().at(2), 3.0f);
  EXPECT_EQ(JobLoss(*job).Text(),
            "categorical_crossentropy (label_smoothing 0.1, reduction sum), class_weight {0: 0.5, "
            "2: 3}");
}

// A regression's compile config reaches the job: its loss, Huber's delta,
// its metrics without an accuracy; --class_weight is refused for it.
TEST_F(OptimizerFlagsTest, ARegressionsLossReachesTheJob) {
  UseModel(
      "huber.json", 2,
      {{"loss", {{"class_name", "Huber"}, {"config", {{"delta", 0.5}}}}}, {"metrics", {"mae"}}});
  const absl::StatusOr<proto::JobSpec> job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->loss().name(), "huber");
  EXPECT_FLOAT_EQ(job->loss().huber_delta(), 0.5f);
  EXPECT_EQ(JobLoss(*job).Text(), "huber (delta 0.5)");
  EXPECT_EQ(MetricNames(*job), "mae");
  absl::SetFlag(&FLAGS_class_weight, std::string("0:2"));
  EXPECT_THAT(JobSpecFromFlags().status().message(),
              ::testing::HasSubstr("--class_weight with the regression loss huber: a regression "
                                   "has no classes"));
  absl::SetFlag(&FLAGS_class_weight, std::string());
  absl::SetFlag(&FLAGS_early_stopping_monitor, std::string("val_accuracy"));
  EXPECT_THAT(JobSpecFromFlags().status().message(),
              ::testing::HasSubstr("--early_stopping_monitor=val_accuracy: expected one of loss, "
                                   "mae"));
}

// global_clipnorm reaches the job; with --push_overlap it is refused (the
// parts would go out before the whole gradient's norm is known).
TEST_F(OptimizerFlagsTest, GlobalClipnormNeedsTheWholeGradient) {
  UseModel(
      "global.json", 3,
      {{"optimizer", {{"class_name", "AdamW"}, {"config", {{"global_clipnorm", 0.5}}}}},
       {"loss",
        {{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}}});
  const absl::StatusOr<proto::JobSpec> job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_DOUBLE_EQ(job->optimizer().global_clipnorm(), 0.5);
  absl::SetFlag(&FLAGS_push_overlap, true);
  EXPECT_THAT(JobSpecFromFlags().status().message(),
              ::testing::HasSubstr("--push_overlap with the optimizer's global_clipnorm 0.5"));
}

// --dtype_policy: in the job, every process's model computing in it, the
// wire bfloat16 by default under bfloat16 (a flag's own value kept, and
// float32 where no servers are), unknown policies refused naming the flag.
TEST_F(OptimizerFlagsTest, TheDtypePolicyReachesTheJobAndTheWire) {
  absl::SetFlag(&FLAGS_model, "mlp");
  absl::SetFlag(&FLAGS_dtype_policy, "mixed_bfloat16");
  absl::StatusOr<proto::JobSpec> job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->dtype_policy(), "mixed_bfloat16");
  EXPECT_EQ(job->policy().wire_dtype(), proto::DT_BFLOAT16);
  absl::StatusOr<compute::Model> model = ModelForJob(*job);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->ComputeDtypesText(), "bfloat16");

  absl::SetFlag(&FLAGS_wire_dtype, "float32");
  job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->policy().wire_dtype(), proto::DT_FLOAT32);
  absl::SetFlag(&FLAGS_wire_dtype, "");
  absl::SetFlag(&FLAGS_strategy, "multi_worker_mirrored");
  job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->policy().wire_dtype(), proto::DT_FLOAT32);
  absl::SetFlag(&FLAGS_strategy, "parameter_server");

  absl::SetFlag(&FLAGS_dtype_policy, "");
  job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->dtype_policy(), "");
  EXPECT_EQ(job->policy().wire_dtype(), proto::DT_FLOAT32);

  absl::SetFlag(&FLAGS_dtype_policy, "float64");
  job = JobSpecFromFlags();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(job.status().message()),
              HasSubstr("--dtype_policy=float64: the dtype policy \"float64\" is not supported"));
}

// --loss_scale: Keras's auto_scale_loss under float16 by default, none
// otherwise; the model's LossScaleOptimizer's settings; the flag's own
// forms; bad values and what cannot run with it refused naming the flag.
TEST_F(OptimizerFlagsTest, TheLossScaleFollowsKerasAndTheFlag) {
  absl::SetFlag(&FLAGS_model, "mlp");
  absl::StatusOr<proto::JobSpec> job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->policy().has_loss_scale()) << "float32: none";

  absl::SetFlag(&FLAGS_dtype_policy, "mixed_float16");
  job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(job->policy().has_loss_scale()) << "float16: Keras's auto_scale_loss";
  EXPECT_EQ(job->policy().loss_scale().initial_scale(), 32768.0);
  EXPECT_EQ(job->policy().loss_scale().growth_steps(), 2000);
  EXPECT_NE(job->policy().wire_dtype(), proto::DT_FLOAT16);

  absl::SetFlag(&FLAGS_loss_scale, "none");
  job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->policy().has_loss_scale()) << "Keras's auto_scale_loss=False";
  absl::SetFlag(&FLAGS_dtype_policy, "");

  absl::SetFlag(&FLAGS_loss_scale, "dynamic:256:10");
  job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->policy().loss_scale().initial_scale(), 256.0);
  EXPECT_EQ(job->policy().loss_scale().growth_steps(), 10);
  absl::SetFlag(&FLAGS_loss_scale, "dynamic:8");
  job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->policy().loss_scale().initial_scale(), 8.0);
  EXPECT_EQ(job->policy().loss_scale().growth_steps(), 2000);

  for (const char* bad : {"dynamic:0", "dynamic:x", "dynamic:8:0", "dynamic:8:9:10", "static"}) {
    absl::SetFlag(&FLAGS_loss_scale, bad);
    job = JobSpecFromFlags();
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(job.status().message()), HasSubstr(absl::StrCat("--loss_scale=", bad)));
  }
  absl::SetFlag(&FLAGS_loss_scale, "dynamic");
  absl::SetFlag(&FLAGS_push_overlap, true);
  EXPECT_THAT(std::string(JobSpecFromFlags().status().message()), HasSubstr("with --push_overlap"));
  absl::SetFlag(&FLAGS_push_overlap, false);
  absl::SetFlag(&FLAGS_topk_ratio, 0.1);
  EXPECT_THAT(std::string(JobSpecFromFlags().status().message()),
              HasSubstr("with --topk_ratio=0.1"));
  absl::SetFlag(&FLAGS_topk_ratio, 0.0);
  absl::SetFlag(&FLAGS_loss_scale, "");
}

// A model compiled with keras.optimizers.LossScaleOptimizer (as Keras 3.15
// saves it): its inner optimizer trains, its settings scale the loss, and
// --loss_scale still decides.
TEST_F(OptimizerFlagsTest, AModelsLossScaleOptimizerIsRead) {
  const nlohmann::json sgd = {{"module", "keras.optimizers"},
                              {"class_name", "SGD"},
                              {"config",
                               {{"name", "sgd"},
                                {"learning_rate", 0.05},
                                {"loss_scale_factor", nullptr},
                                {"momentum", 0.0},
                                {"nesterov", false}}},
                              {"registered_name", nullptr}};
  UseModel(
      "scaled.json", 3,
      {{"optimizer",
        {{"module", "keras.optimizers"},
         {"class_name", "LossScaleOptimizer"},
         {"config",
          {{"name", "loss_scale_optimizer"},
           {"inner_optimizer", sgd},
           {"initial_scale", 256.0},
           {"dynamic_growth_steps", 100}}},
         {"registered_name", nullptr}}},
       {"loss",
        {{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}}});
  absl::StatusOr<proto::JobSpec> job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->optimizer().kind(), proto::OptimizerConfig::SGD);
  EXPECT_DOUBLE_EQ(job->optimizer().learning_rate(), 0.05);
  ASSERT_TRUE(job->policy().has_loss_scale());
  EXPECT_EQ(job->policy().loss_scale().initial_scale(), 256.0);
  EXPECT_EQ(job->policy().loss_scale().growth_steps(), 100);
  absl::SetFlag(&FLAGS_loss_scale, "none");
  job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->policy().has_loss_scale());
  absl::SetFlag(&FLAGS_loss_scale, "");

  // An older Keras 3 save: the base optimizer's keys at their defaults.
  UseModel(
      "older.json", 3,
      {{"optimizer",
        {{"class_name", "LossScaleOptimizer"},
         {"config",
          {{"inner_optimizer", sgd},
           {"initial_scale", 64.0},
           {"weight_decay", nullptr},
           {"use_ema", false},
           {"ema_momentum", 0.99},
           {"loss_scale_factor", nullptr}}}}},
       {"loss",
        {{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}}});
  job = JobSpecFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->policy().loss_scale().initial_scale(), 64.0);
  UseModel("decayed.json", 3,
           {{"optimizer",
             {{"class_name", "LossScaleOptimizer"},
              {"config", {{"inner_optimizer", sgd}, {"weight_decay", 0.1}}}}}});
  EXPECT_THAT(std::string(JobSpecFromFlags().status().message()),
              HasSubstr("the LossScaleOptimizer's weight_decay is not supported"));

  UseModel("bad_scale.json", 3,
           {{"optimizer",
             {{"class_name", "LossScaleOptimizer"},
              {"config", {{"inner_optimizer", sgd}, {"dynamic_growth_steps", 0.5}}}}}});
  EXPECT_THAT(std::string(JobSpecFromFlags().status().message()),
              HasSubstr("dynamic_growth_steps 0.5 is not a whole number"));
  UseModel("no_inner.json", 3,
           {{"optimizer", {{"class_name", "LossScaleOptimizer"}, {"config", {{"name", "x"}}}}}});
  EXPECT_THAT(std::string(JobSpecFromFlags().status().message()),
              HasSubstr("has no inner_optimizer"));
}

}  // namespace
}  // namespace job
}  // namespace psc
