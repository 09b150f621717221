#include "common/job/job_flags.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_conv.h"
#include "common/job/compile_config.h"
#include "common/job/compiled_metrics.h"
#include "common/job/epoch_callbacks.h"
#include "common/job/job_loss.h"
#include "common/job/job_model.h"
#include "common/job/job_records.h"
#include "common/keras/dtype_policy.h"
#include "common/optimizer/loss_scale.h"
#include "common/optimizer/optimizer.h"
#include "common/tensor/topk.h"
#include "common/tensor/wire_dtype.h"
#include "common/tfrecord/record_reader.h"

ABSL_FLAG(std::string, mode, "sync", "Training mode: sync, async or ssp.");
ABSL_FLAG(std::string, strategy, "parameter_server",
          "How the replicas share the variables, named as tf.distribute names its strategies: "
          "parameter_server (ps tasks; --mode sync, async or ssp), multi_worker_mirrored (no ps: "
          "every worker a full replica, gradients all-reduced with Gloo, or NCCL on GPUs; sync "
          "only), mirrored (one worker, one replica per local device, no servers) or "
          "central_storage (one worker's local replicas, the variables on one ps on its host).");
ABSL_FLAG(int64_t, bucket_bytes, 0,
          "multi_worker_mirrored: gradients are fused into buckets of about this many bytes "
          "before the all-reduce; parameter_server with --overlap: the size of a push's parts; "
          "0 = 256 KiB.");
ABSL_FLAG(absl::Duration, collective_timeout, absl::Seconds(60),
          "multi_worker_mirrored: forming a group, and each all-reduce, fails after this long "
          "(a hung peer); a peer that dies fails it at once.");
ABSL_FLAG(bool, overlap, true,
          "multi_worker_mirrored: all-reduce each bucket as soon as the backward pass has made "
          "it, while the pass goes on (one local replica per worker).");
ABSL_FLAG(bool, push_overlap, false,
          "parameter_server: push each bucket of --bucket_bytes of gradients to its ps as soon "
          "as the backward pass has made it, while the pass goes on (a push in parts), and pull "
          "the next step's parameters in the same parts, the first layers' first, while the "
          "forward pass runs (one local replica per worker). Trains bit for bit as without.");
ABSL_FLAG(bool, lazy_adam, false,
          "adam on embedding tables trained by rows: update only the rows a step pushed, their "
          "moments included (TF Addons' LazyAdam), instead of Keras's result, where every row's "
          "moments decay each step (a pass over the table per update).");
ABSL_FLAG(bool, dense_embeddings, false,
          "parameter_server: push and pull embedding tables whole, as every other variable, "
          "instead of only the rows each step's ids touch (no worker then holds a whole table).");
ABSL_FLAG(std::string, wire_dtype, "",
          "parameter_server: how gradients and pulled variables travel between workers and "
          "servers: float32, bfloat16 or float16 (half the bytes; rounded to nearest even). "
          "Servers and the optimizer keep float32. Default: bfloat16 when the model computes "
          "in bfloat16 (--dtype_policy=mixed_bfloat16), else float32.");
ABSL_FLAG(std::string, dtype_policy, "",
          "The Keras dtype policy every layer computes in, replacing the model's own: float32, "
          "mixed_bfloat16 or bfloat16 (bfloat16 on CPUs with AVX512_BF16 or AMX), "
          "mixed_float16 or float16 (GPU workers; the loss scaled by default, see "
          "--loss_scale). Variables stay float32 on the servers. Default: each layer's policy "
          "as the model file has it.");
ABSL_FLAG(std::string, loss_scale, "",
          "Keras's dynamic loss scaling (LossScaleOptimizer): none, dynamic (initial scale "
          "2^15 doubled after 2000 finite steps, or the model's LossScaleOptimizer's), or "
          "dynamic:INITIAL[:GROWTH_STEPS]. A step whose gradient overflows is skipped on every "
          "server and the scale halves. Default: the model's LossScaleOptimizer if its "
          "compile_config has one, else dynamic when a layer computes in float16 (Keras's "
          "auto_scale_loss), else none.");
ABSL_FLAG(double, topk_ratio, 0,
          "parameter_server: push only this fraction (0 < r < 1) of each trainable variable's "
          "gradient elements, those of largest magnitude, as a sparse tensor, and keep the rest "
          "on the worker as error feedback added to the next step's gradient; 0 = dense "
          "gradients.");
ABSL_FLAG(int64_t, staleness, 4, "ssp: how many steps a worker may run ahead of the slowest.");
ABSL_FLAG(int32_t, replicas_to_aggregate, 0,
          "sync: gradients that complete a step; 0 = the number of workers.");
ABSL_FLAG(std::string, model, "seed_cnn",
          "Model: seed_cnn, mlp, or a Keras model file: FILE.keras (model.save(); its weights "
          "are the initial ones) or FILE.json (model.to_json()).");
ABSL_FLAG(std::optional<std::string>, optimizer, std::nullopt,
          "Optimizer: sgd, momentum, adam, adamw, rmsprop, adagrad or ftrl, with Keras's default "
          "hyperparameters. Given, it "
          "replaces the model file's compiled optimizer; not given: the compiled one, else SGD.");
ABSL_FLAG(std::optional<double>, learning_rate, std::nullopt,
          "Learning rate. Given, it overrides the compiled optimizer's; not given: the compiled "
          "optimizer's, else Keras's default for the optimizer (SGD 0.01, Adam 0.001).");
ABSL_FLAG(int64_t, batch_size, 128, "Global batch of one step, split over the replicas.");
ABSL_FLAG(int64_t, epochs, 10, "Epochs to train.");
ABSL_FLAG(int64_t, steps_per_epoch, 0,
          "Steps per epoch; 0 = training examples / batch size (429 for the full data).");
ABSL_FLAG(int64_t, max_train_examples, 0,
          "Train on only the first N training examples (after the 5,000 held out); 0 = all.");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist",
          "Folder with the Fashion-MNIST IDX files (Debian's dataset-fashion-mnist).");
ABSL_FLAG(std::string, data, "",
          "Train on this .npz archive (np.savez) instead of --data_dir's IDX files; or on data "
          "files: tfrecord:train=GLOB[,validation=GLOB][,test=GLOB],spec=FILE"
          "[,compression=auto|none|gzip|zlib][,validation_split=F] (csv:... alike), read "
          "through the feature spec FILE (see `pscluster data inspect`).");
ABSL_FLAG(bool, skip_corrupt_records, false,
          "Data files: skip a damaged record, or one whose features do not fit the spec, and "
          "count it per file (records_skipped in the result file) instead of failing the job.");
ABSL_FLAG(double, max_skipped_fraction, 0.01,
          "Data files with --skip_corrupt_records: the job fails when more than this fraction "
          "of a split's records is skipped.");
ABSL_FLAG(uint64_t, max_record_bytes, uint64_t{64} << 20,
          "Data files: the longest TFRecord record (or CSV row) read, in bytes; a longer one is "
          "an error naming the file and offset, before anything is allocated for it. 1 to "
          "2147483647.");
ABSL_FLAG(std::string, x_train, "x_train", "--data: the array of training examples.");
ABSL_FLAG(std::string, y_train, "y_train", "--data: the array of training labels.");
ABSL_FLAG(std::string, x_val, "x_val", "--data: the validation examples (optional).");
ABSL_FLAG(std::string, y_val, "y_val", "--data: the validation labels (optional).");
ABSL_FLAG(std::string, x_test, "x_test", "--data: the test examples (optional).");
ABSL_FLAG(std::string, y_test, "y_test", "--data: the test labels (optional).");
ABSL_FLAG(std::string, sample_weight, "",
          "--data: the array of one weight per training example (Keras's fit(sample_weight=)), "
          "split with x_train by --validation_split; the loss is the sum of weight x loss over "
          "the batch, over the batch size.");
ABSL_FLAG(std::string, class_weight, "",
          "Weights of the training examples by class, as Keras's fit(class_weight=): "
          "CLASS:WEIGHT pairs, e.g. 0:1,1:5; a class not named weighs 1. Not with "
          "--sample_weight (as Keras).");
ABSL_FLAG(double, validation_split, 0,
          "--data without validation arrays: validate on this fraction of x_train, its last "
          "rows (as Keras's fit); in [0, 1).");
ABSL_FLAG(bool, standardize, true,
          "Standardize the examples with one mean and std fitted on the training examples.");
ABSL_FLAG(std::string, standardize_axis, "auto",
          "--standardize: last = one mean and std per feature (the example's last axis, as "
          "Keras's Normalization(axis=-1) and scikit-learn's StandardScaler), none = one over "
          "every element (Normalization(axis=None)), auto = last for (N, features) data and "
          "none for images.");
ABSL_FLAG(std::string, rescale, "",
          "--data: multiply the examples by this factor instead of standardizing (\"1/255\" "
          "or a number); it replaces --standardize.");
ABSL_FLAG(std::string, export, "",
          "At the end of the job, write the trained model here as a .keras archive "
          "(keras.models.load_model opens it).");
ABSL_FLAG(std::string, export_weights, "",
          "At the end of the job, write the trained variables here as a .weights.h5 file "
          "(model.load_weights reads it).");
ABSL_FLAG(
    std::string, early_stopping_monitor, "",
    "Keras's EarlyStopping: stop training when this (loss, accuracy, a compiled metric, "
    "each also with val_) has not improved for --early_stopping_patience epochs; empty: off.");
ABSL_FLAG(int64_t, early_stopping_patience, 0,
          "EarlyStopping's patience: epochs with no improvement after which training stops.");
ABSL_FLAG(double, early_stopping_min_delta, 0,
          "EarlyStopping's min_delta: a smaller change is no improvement.");
ABSL_FLAG(std::string, early_stopping_mode, "auto",
          "EarlyStopping's mode: min, max, or auto (min for a loss, max for an accuracy).");
ABSL_FLAG(std::optional<double>, early_stopping_baseline, std::nullopt,
          "EarlyStopping's baseline: training stops unless the monitor beats it.");
ABSL_FLAG(bool, restore_best_weights, false,
          "EarlyStopping's restore_best_weights: the chief keeps the best epoch's weights (in "
          "its memory), and the test evaluation, the export and final_variables_sha256 are "
          "theirs.");
ABSL_FLAG(int64_t, early_stopping_start_from_epoch, 0,
          "EarlyStopping's start_from_epoch: epochs before any is monitored.");
ABSL_FLAG(std::string, export_best, "",
          "Keras's ModelCheckpoint(FILE.keras, save_best_only=True): write the model here at "
          "each epoch end where --export_monitor improves, so that it holds the best epoch's "
          "(--export still gets the last's).");
ABSL_FLAG(std::string, export_monitor, "val_loss",
          "--export_best: what is monitored (loss, accuracy, a compiled metric, each also with "
          "val_).");
ABSL_FLAG(std::string, export_mode, "auto", "--export_best: min, max or auto.");
ABSL_FLAG(std::string, reduce_lr_monitor, "",
          "Keras's ReduceLROnPlateau: multiply the learning rate by --reduce_lr_factor when this "
          "(loss, accuracy, a compiled metric, each also with val_) has not improved for "
          "--reduce_lr_patience "
          "epochs; empty: off. parameter_server and worker --standalone only.");
ABSL_FLAG(double, reduce_lr_factor, 0.1, "ReduceLROnPlateau's factor, in (0, 1).");
ABSL_FLAG(int64_t, reduce_lr_patience, 10, "ReduceLROnPlateau's patience, in epochs.");
ABSL_FLAG(std::string, reduce_lr_mode, "auto", "ReduceLROnPlateau's mode: min, max or auto.");
ABSL_FLAG(double, reduce_lr_min_delta, 1e-4, "ReduceLROnPlateau's min_delta.");
ABSL_FLAG(int64_t, reduce_lr_cooldown, 0,
          "ReduceLROnPlateau's cooldown: epochs after a reduction before counting again.");
ABSL_FLAG(double, reduce_lr_min_lr, 0, "ReduceLROnPlateau's min_lr.");
ABSL_FLAG(uint64_t, seed, 0, "Seed of initialization and data order.");
ABSL_FLAG(std::string, conv_algorithm, "auto",
          "CPU convolutions: auto (Winograd F(4x4, 3x3) for 3x3 stride-1 \"same\" convolutions "
          "of multiples of 16 channels, where the CPU has AVX-512; direct otherwise) or direct "
          "(oneDNN's direct convolution everywhere: slower, and its float32 rounding closer to "
          "Keras's).");
ABSL_FLAG(bool, shuffle, true,
          "Shuffle the training examples each epoch (Keras's fit(shuffle=True)); --noshuffle "
          "reads them in their order, as fit(shuffle=False).");
ABSL_FLAG(std::string, metrics_out, "", "Write the result JSON here.");
ABSL_FLAG(int32_t, intra_op_threads, 0, "CPU threads for compute; 0 = all cores.");

namespace psc {
namespace job {

std::string StrategyName(proto::Strategy strategy) {
  switch (strategy) {
    case proto::MULTI_WORKER_MIRRORED:
      return "multi_worker_mirrored";
    case proto::MIRRORED:
      return "mirrored";
    case proto::CENTRAL_STORAGE:
      return "central_storage";
    default:
      return "parameter_server";
  }
}

absl::StatusOr<proto::Strategy> ParseStrategy(const std::string& name) {
  for (proto::Strategy s : {proto::PARAMETER_SERVER, proto::MULTI_WORKER_MIRRORED, proto::MIRRORED,
                            proto::CENTRAL_STORAGE}) {
    if (name == StrategyName(s)) return s;
  }
  if (name == "tpu") {
    return absl::InvalidArgumentError(
        "--strategy=tpu: TPUStrategy is not supported (pscluster trains on CPUs and NVIDIA "
        "GPUs)");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--strategy=", name,
                   ": expected parameter_server, multi_worker_mirrored, mirrored or "
                   "central_storage"));
}

std::string ModeName(proto::TrainingMode mode) {
  switch (mode) {
    case proto::MODE_SYNC:
      return "sync";
    case proto::MODE_ASYNC:
      return "async";
    case proto::MODE_SSP:
      return "ssp";
    default:
      return "unspecified";
  }
}

absl::StatusOr<double> ParseScale(const std::string& text) {
  double value = 0;
  if (const size_t slash = text.find('/'); slash != std::string::npos) {
    double num = 0, den = 0;
    if (absl::SimpleAtod(text.substr(0, slash), &num) &&
        absl::SimpleAtod(text.substr(slash + 1), &den) && den != 0) {
      value = num / den;
    }
  } else if (!absl::SimpleAtod(text, &value)) {
    value = 0;
  }
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rescale=", text, ": expected a factor > 0 such as 1/255 or 0.5"));
  }
  return value;
}

namespace {

// --data=FILE.npz and its array names.
absl::Status NumpyDataFromFlags(const std::string& path, double split, proto::NumpyData* d) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || access(path.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data=", path,
                     ": not a readable file (an .npz archive as np.savez writes; data files: "
                     "tfrecord:... or csv:...)"));
  }
  d->set_path(path);
  d->set_x_train(absl::GetFlag(FLAGS_x_train));
  d->set_y_train(absl::GetFlag(FLAGS_y_train));
  d->set_x_val(absl::GetFlag(FLAGS_x_val));
  d->set_y_val(absl::GetFlag(FLAGS_y_val));
  d->set_x_test(absl::GetFlag(FLAGS_x_test));
  d->set_y_test(absl::GetFlag(FLAGS_y_test));
  d->set_validation_split(split);
  d->set_sample_weight(absl::GetFlag(FLAGS_sample_weight));
  return absl::OkStatus();
}

// --data and its array names, --validation_split, --standardize / --rescale.
absl::Status DataFromFlags(proto::JobSpec* job) {
  const std::string path = absl::GetFlag(FLAGS_data);
  const double split = absl::GetFlag(FLAGS_validation_split);
  const std::string rescale = absl::GetFlag(FLAGS_rescale);
  if (!(split >= 0 && split < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--validation_split=", split, ": must be in [0, 1)"));
  }
  if (path.empty()) {
    if (absl::GetFlag(FLAGS_skip_corrupt_records)) {
      return absl::InvalidArgumentError(
          "--skip_corrupt_records is for data files (--data=tfrecord:... or csv:...)");
    }
    if (!absl::GetFlag(FLAGS_sample_weight).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--sample_weight=", absl::GetFlag(FLAGS_sample_weight),
          " names an array of --data=FILE.npz; the Fashion-MNIST IDX files have none (use "
          "--class_weight, or put the examples and their weights in an .npz)"));
    }
    if (split != 0 || !rescale.empty() || !absl::GetFlag(FLAGS_standardize) ||
        absl::GetFlag(FLAGS_standardize_axis) != "auto") {
      return absl::InvalidArgumentError(
          "--validation_split, --rescale, --nostandardize and --standardize_axis apply to "
          "--data=FILE.npz; the "
          "Fashion-MNIST IDX files are always standardized and validate on their first 5,000 "
          "images");
    }
    return absl::OkStatus();
  }
  const bool skip = absl::GetFlag(FLAGS_skip_corrupt_records);
  const double skipped_fraction = absl::GetFlag(FLAGS_max_skipped_fraction);
  const uint64_t max_record_bytes = absl::GetFlag(FLAGS_max_record_bytes);
  if (IsRecordDataFlag(path)) {
    if (split != 0 || !absl::GetFlag(FLAGS_sample_weight).empty()) {
      return absl::InvalidArgumentError(
          "--validation_split and --sample_weight are for an .npz; with data files give "
          "validation_split=F inside --data and the weight's feature in the spec (\"weight\")");
    }
    if (!(skipped_fraction >= 0 && skipped_fraction <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max_skipped_fraction=", skipped_fraction, ": want a fraction in [0, 1]"));
    }
    if (max_record_bytes == 0 || max_record_bytes > tfrecord::kMaxRecordBytesLimit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max_record_bytes=", max_record_bytes, ": want 1 to ", tfrecord::kMaxRecordBytesLimit));
    }
    proto::RecordData* r = job->mutable_record_data();
    PSC_RETURN_IF_ERROR(RecordDataFromFlag(path, r));
    r->set_skip_corrupt_records(skip);
    r->set_max_skipped_fraction(skipped_fraction);
    r->set_max_record_bytes(max_record_bytes);
  } else {
    if (skip) {
      return absl::InvalidArgumentError(
          "--skip_corrupt_records is for data files (--data=tfrecord:... or csv:...)");
    }
    PSC_RETURN_IF_ERROR(NumpyDataFromFlags(path, split, job->mutable_numpy_data()));
  }
  proto::Preprocessing* p = job->mutable_preprocessing();
  if (!rescale.empty()) {
    PSC_ASSIGN_OR_RETURN(const double scale, ParseScale(rescale));
    p->set_kind(proto::Preprocessing::RESCALE);
    p->set_scale(scale);
  } else {
    p->set_kind(absl::GetFlag(FLAGS_standardize) ? proto::Preprocessing::STANDARDIZE
                                                 : proto::Preprocessing::NONE);
  }
  const std::string axis = absl::GetFlag(FLAGS_standardize_axis);
  if (axis == "last") {
    p->set_axis(proto::Preprocessing::AXIS_LAST);
  } else if (axis == "none") {
    p->set_axis(proto::Preprocessing::AXIS_NONE);
  } else if (axis != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--standardize_axis=", axis, ": expected auto, last or none"));
  }
  return absl::OkStatus();
}

// --loss_scale over what the model says (CompileFromFlags put its
// LossScaleOptimizer's settings in the policy): see the flag's help.
// `float16`: a layer computes in float16. INVALID_ARGUMENT for a bad value,
// or loss scaling with what pushes before the whole gradient is known to be
// finite (--push_overlap) or keeps a residual of it (--topk_ratio).
absl::Status LossScaleFromFlags(bool float16, proto::JobSpec* job) {
  const std::string flag = absl::GetFlag(FLAGS_loss_scale);
  proto::UpdatePolicy* policy = job->mutable_policy();
  const bool from_model = policy->has_loss_scale();
  if (flag == "none") {
    policy->clear_loss_scale();
  } else if (flag.empty()) {
    if (!from_model && float16) *policy->mutable_loss_scale() = optimizer::KerasLossScale();
  } else if (flag == "dynamic") {
    if (!from_model) *policy->mutable_loss_scale() = optimizer::KerasLossScale();
  } else if (absl::StartsWith(flag, "dynamic:")) {
    const std::vector<std::string> parts = absl::StrSplit(flag.substr(8), ':');
    proto::LossScaleConfig c = optimizer::KerasLossScale();
    double initial = 0;
    int64_t growth = 0;
    if (parts.size() > 2 || !absl::SimpleAtod(parts[0], &initial) ||
        (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &growth))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--loss_scale=", flag, ": expected none, dynamic or dynamic:INITIAL[:GROWTH_STEPS]"));
    }
    c.set_initial_scale(initial);
    if (parts.size() == 2) c.set_growth_steps(growth);
    if (absl::Status s = optimizer::CheckLossScaleConfig(c); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--loss_scale=", flag, ": ", s.message()));
    }
    *policy->mutable_loss_scale() = c;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--loss_scale=", flag, ": expected none, dynamic or dynamic:INITIAL[:GROWTH_STEPS]"));
  }
  if (!policy->has_loss_scale()) {
    if (float16) {
      base::Logf(
          "warning: the model computes in float16 without loss scaling (--loss_scale=none): its "
          "small gradients may flush to zero");
    }
    return absl::OkStatus();
  }
  // Every server skips a step alike only if the flag covers the whole
  // gradient before any of it is sent, and an overflowed step leaves no
  // trace on the worker.
  if (job->push().overlap()) {
    return absl::InvalidArgumentError(
        "loss scaling (--loss_scale, or a float16 model's default) with --push_overlap: a "
        "push's parts go out before the whole gradient is known to be finite; drop "
        "--push_overlap");
  }
  if (policy->topk_ratio() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scaling (--loss_scale, or a float16 model's default) with --topk_ratio=",
                     policy->topk_ratio(),
                     ": an overflowed step would leave its residual behind; drop one of them"));
  }
  return absl::OkStatus();
}

// What model.compile() said, with the flags over it: --optimizer and
// --learning_rate over the compile_config's optimizer (a flag given wins,
// even at the value a default would have; an absent one leaves the compiled
// choice; Keras's defaults fill the rest); the loss's options into
// JobSpec.loss, with --class_weight.
absl::Status CompileFromFlags(proto::JobSpec* job) {
  const std::optional<std::string> name = absl::GetFlag(FLAGS_optimizer);
  const std::optional<double> lr = absl::GetFlag(FLAGS_learning_rate);
  if (lr.has_value() && (!std::isfinite(*lr) || *lr <= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--learning_rate=", *lr, ": must be finite and > 0"));
  }
  proto::OptimizerConfig optimizer;
  optimizer.set_kind(proto::OptimizerConfig::SGD);
  job->set_optimizer_source("Keras's default (SGD)");
  PSC_ASSIGN_OR_RETURN(const compute::Model model, ModelForJob(*job));
  if (!job->model_config().empty()) {
    // The loss and the rest of the compile config are checked even when
    // --optimizer replaces its optimizer.
    PSC_ASSIGN_OR_RETURN(const CompileConfig compiled,
                         ReadCompileConfig(job->model_config(), model, job->model()));
    if (compiled.optimizer.has_value() && !name.has_value()) {
      optimizer = *compiled.optimizer;
      job->set_optimizer_source("the model's compile_config");
    }
    // LossScaleFromFlags decides whether it runs.
    if (compiled.loss_scale.has_value()) {
      *job->mutable_policy()->mutable_loss_scale() = *compiled.loss_scale;
    }
    proto::LossSpec* loss = job->mutable_loss();
    loss->set_name(compiled.loss);
    loss->set_label_smoothing(compiled.label_smoothing);
    loss->set_reduction_sum(compiled.reduction_sum);
    loss->set_huber_delta(compiled.huber_delta);
    job->mutable_metrics()->Assign(compiled.metrics.begin(), compiled.metrics.end());
  }
  PSC_RETURN_IF_ERROR(CheckLossFitsModel(job->loss(), model, job->model()));
  PSC_RETURN_IF_ERROR(ParseClassWeight(absl::GetFlag(FLAGS_class_weight),
                                       LabelClasses(job->loss(), model), job->mutable_loss()));
  if (!job->loss().class_weight().empty() && IsRegressionLoss(job->loss())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--class_weight with the regression loss ", job->loss().name(),
                     ": a regression has no classes; weigh its examples with --sample_weight"));
  }
  if (!job->loss().class_weight().empty() && !absl::GetFlag(FLAGS_sample_weight).empty()) {
    return absl::InvalidArgumentError(
        "--class_weight and --sample_weight together: Keras's fit refuses both at once "
        "(\"You cannot `class_weight` and `sample_weight` at the same time\"); fold the class "
        "weights into the sample weights");
  }
  if (name.has_value()) {
    auto kind = optimizer::ParseOptimizerKind(*name);
    if (!kind.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--optimizer=", *name, ": ", kind.status().message()));
    }
    optimizer.Clear();
    optimizer.set_kind(*kind);
    job->set_optimizer_source("--optimizer");
  }
  // 0: the optimizer's Keras default (CompleteOptimizerConfig). A rate
  // given replaces the compiled schedule too.
  if (lr.has_value()) {
    optimizer.set_learning_rate(*lr);
    optimizer.clear_schedule();
  }
  if (absl::GetFlag(FLAGS_lazy_adam)) {
    if (optimizer.kind() != proto::OptimizerConfig::ADAM) {
      return absl::InvalidArgumentError(
          absl::StrCat("--lazy_adam is for Adam (--optimizer=adam, or a compiled Adam); this job's "
                       "optimizer is ",
                       absl::AsciiStrToLower(proto::OptimizerConfig::Kind_Name(optimizer.kind()))));
    }
    optimizer.set_lazy_rows(true);
  }
  absl::StatusOr<proto::OptimizerConfig> complete = optimizer::CompleteOptimizerConfig(optimizer);
  if (!complete.ok() && optimizer.lazy_rows()) {
    return absl::InvalidArgumentError(absl::StrCat("--lazy_adam: ", complete.status().message()));
  }
  PSC_RETURN_IF_ERROR(complete.status());
  *job->mutable_optimizer() = *std::move(complete);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExportOptions> ExportOptionsFromFlags() {
  ExportOptions options{absl::GetFlag(FLAGS_export), absl::GetFlag(FLAGS_export_weights)};
  PSC_RETURN_IF_ERROR(CheckExportOptions(options));
  return options;
}

absl::StatusOr<proto::JobSpec> JobSpecFromFlags() {
  proto::JobSpec job;
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "sync") {
    job.mutable_policy()->set_mode(proto::MODE_SYNC);
  } else if (mode == "async") {
    job.mutable_policy()->set_mode(proto::MODE_ASYNC);
  } else if (mode == "ssp") {
    job.mutable_policy()->set_mode(proto::MODE_SSP);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode=", mode, ": expected sync, async or ssp"));
  }
  const int64_t staleness = absl::GetFlag(FLAGS_staleness);
  if (staleness < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--staleness=", staleness, ": must be >= 0"));
  }
  job.mutable_policy()->set_staleness(staleness);
  const int32_t r = absl::GetFlag(FLAGS_replicas_to_aggregate);
  if (r < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replicas_to_aggregate=", r, ": must be >= 0 (0 = number of workers)"));
  }
  job.mutable_policy()->set_replicas_to_aggregate(r);
  PSC_ASSIGN_OR_RETURN(const proto::Strategy strategy,
                       ParseStrategy(absl::GetFlag(FLAGS_strategy)));
  job.set_strategy(strategy);
  if (strategy != proto::PARAMETER_SERVER && (mode != "sync" || r != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy=", StrategyName(strategy), " trains synchronously with every replica: --mode=",
        mode, " and --replicas_to_aggregate=", r, " belong to --strategy=parameter_server"));
  }
  const std::string wire = absl::GetFlag(FLAGS_wire_dtype);
  job.mutable_policy()->set_wire_dtype(proto::DT_FLOAT32);
  if (!wire.empty()) {
    absl::StatusOr<proto::DataType> dtype = tensor::ParseWireDtype(wire);
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--wire_dtype=", wire, ": ", dtype.status().message()));
    }
    if (*dtype != proto::DT_FLOAT32 && strategy != proto::PARAMETER_SERVER) {
      return absl::InvalidArgumentError(
          absl::StrCat("--wire_dtype=", wire,
                       " is for --strategy=parameter_server (what "
                       "travels between workers and ps tasks); --strategy=",
                       StrategyName(strategy), " has no ps tasks"));
    }
    job.mutable_policy()->set_wire_dtype(*dtype);
  }
  {
    const double topk = absl::GetFlag(FLAGS_topk_ratio);
    PSC_RETURN_IF_ERROR(tensor::CheckTopKRatio(topk));
    if (topk > 0 && strategy != proto::PARAMETER_SERVER) {
      return absl::InvalidArgumentError(
          absl::StrCat("--topk_ratio=", topk,
                       " is for --strategy=parameter_server (what workers push to ps "
                       "tasks); --strategy=",
                       StrategyName(strategy), " has no ps tasks"));
    }
    job.mutable_policy()->set_topk_ratio(topk);
  }
  const int64_t bucket = absl::GetFlag(FLAGS_bucket_bytes);
  if (bucket < 0 || bucket > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bucket_bytes=", bucket, ": must be 0 (the default) to 1 GiB"));
  }
  if (strategy == proto::MULTI_WORKER_MIRRORED) {
    const absl::Duration timeout = absl::GetFlag(FLAGS_collective_timeout);
    if (timeout <= absl::ZeroDuration() || timeout > absl::Hours(1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--collective_timeout=", absl::FormatDuration(timeout), ": must be in (0, 1h]"));
    }
    job.mutable_collective()->set_bucket_bytes(bucket);
    job.mutable_collective()->set_timeout_seconds(absl::ToDoubleSeconds(timeout));
    job.mutable_collective()->set_overlap(absl::GetFlag(FLAGS_overlap));
  } else if (strategy == proto::PARAMETER_SERVER) {
    job.mutable_push()->set_overlap(absl::GetFlag(FLAGS_push_overlap));
    job.mutable_push()->set_bucket_bytes(bucket);
    job.mutable_push()->set_dense_embeddings(absl::GetFlag(FLAGS_dense_embeddings));
  }
  if (absl::GetFlag(FLAGS_push_overlap) && strategy != proto::PARAMETER_SERVER) {
    return absl::InvalidArgumentError(
        absl::StrCat("--push_overlap is for --strategy=parameter_server (pushes to ps tasks); "
                     "--strategy=",
                     StrategyName(strategy), " has no ps tasks to push to"));
  }

  if (const std::string policy = absl::GetFlag(FLAGS_dtype_policy); !policy.empty()) {
    if (absl::Status s = keras::PolicyComputeDtype(policy).status(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--dtype_policy=", policy, ": ", s.message()));
    }
    job.set_dtype_policy(policy);
  }
  keras::InputDataShape data_shapes =
      NumpyInputShapes(absl::GetFlag(FLAGS_data), absl::GetFlag(FLAGS_x_train));
  if (const std::string data = absl::GetFlag(FLAGS_data); IsRecordDataFlag(data)) {
    // The spec's shapes (read here only when the model has a None dimension).
    data_shapes = [data](const std::string& name, bool only) -> absl::StatusOr<compute::Shape> {
      proto::RecordData files;
      PSC_RETURN_IF_ERROR(RecordDataFromFlag(data, &files));
      return RecordInputShapes(files)(name, only);
    };
  }
  PSC_RETURN_IF_ERROR(SetModel(absl::GetFlag(FLAGS_model), &job, data_shapes));
  bool float16 = false;  // a layer computes in float16
  {
    // The wire of a mixed-precision model: bfloat16 by default under
    // bfloat16; never float16 under float16 (unscaled gradients underflow
    // it, scaled ones overflow it).
    PSC_ASSIGN_OR_RETURN(const compute::Model model, ModelForJob(job));
    const std::vector<compute::DType> dtypes = model.ComputeDtypes();
    auto computes = [&](compute::DType d) {
      return std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end();
    };
    if (wire.empty() && strategy == proto::PARAMETER_SERVER &&
        computes(compute::DType::kBFloat16)) {
      job.mutable_policy()->set_wire_dtype(proto::DT_BFLOAT16);
    }
    if (computes(compute::DType::kFloat16) && job.policy().wire_dtype() == proto::DT_FLOAT16) {
      return absl::InvalidArgumentError(
          "--wire_dtype=float16 with a model computing in float16 (mixed_float16): its "
          "gradients would underflow float16 unscaled and overflow it scaled; pass "
          "--wire_dtype=bfloat16 or float32");
    }
    float16 = computes(compute::DType::kFloat16);
  }

  PSC_RETURN_IF_ERROR(CompileFromFlags(&job));
  PSC_RETURN_IF_ERROR(LossScaleFromFlags(float16, &job));
  if (job.push().overlap() && job.optimizer().global_clipnorm() > 0) {
    // The parts go out as the backward pass makes them, before the whole
    // gradient's norm is known.
    return absl::InvalidArgumentError(absl::StrCat(
        "--push_overlap with the optimizer's global_clipnorm ", job.optimizer().global_clipnorm(),
        ": the norm of the whole gradient is needed before any part is sent; drop "
        "--push_overlap"));
  }

  const int64_t batch = absl::GetFlag(FLAGS_batch_size);
  if (batch < 1 || batch > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch_size=", batch, ": must be in [1, 65536]"));
  }
  job.set_batch_size(batch);
  const int64_t epochs = absl::GetFlag(FLAGS_epochs);
  if (epochs < 1)
    return absl::InvalidArgumentError(absl::StrCat("--epochs=", epochs, ": must be >= 1"));
  job.set_epochs(epochs);
  const int64_t steps = absl::GetFlag(FLAGS_steps_per_epoch);
  if (steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--steps_per_epoch=", steps, ": must be >= 0 (0 = a full pass)"));
  }
  job.set_steps_per_epoch(steps);
  const int64_t max_train = absl::GetFlag(FLAGS_max_train_examples);
  if (max_train < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_train_examples=", max_train, ": must be >= 0 (0 = all)"));
  }
  if (max_train > 0 && max_train < batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_train_examples=", max_train, ": fewer than one batch of ", batch));
  }
  job.set_max_train_examples(max_train);

  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  std::error_code ec;
  if (!std::filesystem::is_directory(data_dir, ec) || access(data_dir.c_str(), R_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data_dir=", data_dir,
        ": not a readable directory (install Debian's dataset-fashion-mnist, or point at the "
        "folder with the four IDX files)"));
  }
  job.set_data_dir(data_dir);
  PSC_RETURN_IF_ERROR(DataFromFlags(&job));
  job.set_seed(absl::GetFlag(FLAGS_seed));
  job.set_no_shuffle(!absl::GetFlag(FLAGS_shuffle));
  {
    const std::string conv = absl::GetFlag(FLAGS_conv_algorithm);
    if (absl::Status s = compute::ParseConvAlgorithm(conv).status(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--conv_algorithm=", conv, ": ", s.message()));
    }
    job.set_conv_algorithm(conv);
  }
  {
    proto::Callbacks* c = job.mutable_callbacks();
    c->set_early_stopping_monitor(absl::GetFlag(FLAGS_early_stopping_monitor));
    c->set_early_stopping_patience(absl::GetFlag(FLAGS_early_stopping_patience));
    c->set_early_stopping_min_delta(absl::GetFlag(FLAGS_early_stopping_min_delta));
    c->set_early_stopping_mode(absl::GetFlag(FLAGS_early_stopping_mode));
    if (const std::optional<double> b = absl::GetFlag(FLAGS_early_stopping_baseline)) {
      c->mutable_early_stopping_baseline()->set_value(*b);
    }
    c->set_restore_best_weights(absl::GetFlag(FLAGS_restore_best_weights));
    c->set_early_stopping_start_from_epoch(absl::GetFlag(FLAGS_early_stopping_start_from_epoch));
    c->set_export_best(absl::GetFlag(FLAGS_export_best));
    c->set_export_monitor(absl::GetFlag(FLAGS_export_monitor));
    c->set_export_mode(absl::GetFlag(FLAGS_export_mode));
    c->set_reduce_lr_monitor(absl::GetFlag(FLAGS_reduce_lr_monitor));
    c->set_reduce_lr_factor(absl::GetFlag(FLAGS_reduce_lr_factor));
    c->set_reduce_lr_patience(absl::GetFlag(FLAGS_reduce_lr_patience));
    c->set_reduce_lr_mode(absl::GetFlag(FLAGS_reduce_lr_mode));
    c->set_reduce_lr_min_delta(absl::GetFlag(FLAGS_reduce_lr_min_delta));
    c->set_reduce_lr_cooldown(absl::GetFlag(FLAGS_reduce_lr_cooldown));
    c->set_reduce_lr_min_lr(absl::GetFlag(FLAGS_reduce_lr_min_lr));
    if (!c->reduce_lr_monitor().empty() && job.strategy() != proto::PARAMETER_SERVER) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--reduce_lr_monitor is for --strategy=parameter_server (the servers apply the "
          "learning rate); --strategy=",
          StrategyName(job.strategy()), " does not change it during the job yet"));
    }
    if (!c->reduce_lr_monitor().empty() &&
        job.optimizer().schedule().kind() != proto::LearningRateSchedule::CONSTANT) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--reduce_lr_monitor: the optimizer's learning rate is a schedule (",
          optimizer::ScheduleText(job.optimizer().schedule()),
          "); Keras's ReduceLROnPlateau refuses one too. Drop the flag, or give --learning_rate"));
    }
    PSC_RETURN_IF_ERROR(
        EpochCallbacks::Validate(*c, MetricsOf(job), !IsRegressionLoss(job.loss())));
    if (!c->export_best().empty()) {
      ExportOptions best;
      best.keras = c->export_best();
      if (absl::Status s = CheckExportOptions(best); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--export_best=", c->export_best(),
                         ": must end in .keras, in a directory that exists"));
      }
    }
  }
  const int32_t threads = absl::GetFlag(FLAGS_intra_op_threads);
  if (threads < 0 || threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--intra_op_threads=", threads, ": must be in [0, 1024] (0 = all cores)"));
  }
  job.set_intra_op_threads(threads);
  return job;
}

}  // namespace job
}  // namespace psc
