#include "common/job/job_data.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/data/numpy_dataset.h"
#include "common/data/numpy_labels.h"
#include "common/job/compile_config.h"
#include "common/job/input_preprocessing.h"
#include "common/job/job_loss.h"
#include "common/job/job_model.h"
#include "common/job/job_records.h"
#include "common/job/record_stream.h"
#include "common/optimizer/optimizer.h"
#include "common/records/piece_reader.h"
#include "common/records/record_counts.h"

namespace psc {
namespace job {
namespace {

data::Preprocessing::Kind KindOf(const proto::Preprocessing& p) {
  switch (p.kind()) {
    case proto::Preprocessing::RESCALE:
      return data::Preprocessing::Kind::kRescale;
    case proto::Preprocessing::NONE:
      return data::Preprocessing::Kind::kNone;
    default:
      return data::Preprocessing::Kind::kStandardize;
  }
}

}  // namespace

absl::StatusOr<data::NumpyDatasetOptions> LoaderOptions(const proto::JobSpec& job,
                                                        const compute::Model& model,
                                                        const std::string& path,
                                                        double validation_split) {
  data::NumpyDatasetOptions o;
  o.path = path;
  o.validation_split = validation_split;
  o.max_train_examples = job.max_train_examples();
  const bool own = model.input_transform().kind != compute::InputTransform::Kind::kNone;
  if (own && job.preprocessing().kind() == proto::Preprocessing::RESCALE) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rescale: the model ", job.model(), " preprocesses its inputs itself (its layer \"",
        model.input_transform().layer, "\"); drop --rescale"));
  }
  // The model's own layer: the examples are read through it alone.
  o.preprocessing = own ? data::Preprocessing::Kind::kNone : KindOf(job.preprocessing());
  o.rescale = job.preprocessing().scale() > 0 ? job.preprocessing().scale() : 1.0;
  o.example_shape = model.input_shape();
  for (const compute::ModelInput& in : model.inputs()) {
    o.inputs.push_back({in.name, in.shape, in.offset, in.id_limit, in.table, in.mask});
  }
  if (!o.inputs.empty() && o.preprocessing != data::Preprocessing::Kind::kNone) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model ", job.model(), " has ",
                     o.inputs.size() == 1 ? std::string("an input of ids")
                                          : absl::StrCat(o.inputs.size(), " inputs"),
                     ", read as they are: give --nostandardize (and no --rescale); "
                     "preprocess them beforehand or in the model"));
  }
  o.classes = LabelClasses(job.loss(), model);
  o.binary_labels = job.loss().name() == "binary_crossentropy";
  o.target_width = IsRegressionLoss(job.loss()) ? model.classes() : 0;
  switch (job.preprocessing().axis()) {
    case proto::Preprocessing::AXIS_LAST:
      o.standardize_per_feature = true;
      break;
    case proto::Preprocessing::AXIS_NONE:
      o.standardize_per_feature = false;
      break;
    default:  // (N, features) data per feature; images with one pair
      o.standardize_per_feature = model.input_shape().size() == 1;
      break;
  }
  return o;
}

namespace {

// The model's own preprocessing layer, on every split.
void ThroughTheModelsLayer(const compute::Model& model, data::FashionMnist* splits) {
  if (model.input_transform().kind == compute::InputTransform::Kind::kNone) return;
  const data::Preprocessing p = PreprocessingOf(model.input_transform());
  for (data::Split* split : {&splits->train, &splits->validation, &splits->test}) {
    split->preprocessing = p;
  }
}

absl::StatusOr<data::FashionMnist> LoadNumpy(const proto::JobSpec& job,
                                             const compute::Model& model) {
  const proto::NumpyData& d = job.numpy_data();
  PSC_ASSIGN_OR_RETURN(data::NumpyDatasetOptions o,
                       LoaderOptions(job, model, d.path(), d.validation_split()));
  o.x_train = d.x_train();
  o.y_train = d.y_train();
  o.x_val = d.x_val();
  o.y_val = d.y_val();
  o.x_test = d.x_test();
  o.y_test = d.y_test();
  o.sample_weight = d.sample_weight();
  PSC_ASSIGN_OR_RETURN(data::FashionMnist splits, data::LoadNumpyDataset(o));
  ThroughTheModelsLayer(model, &splits);
  if (splits.validation.count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(d.path(), " has no validation arrays ('", d.x_val(), "', '", d.y_val(),
                     "') and --validation_split is ", d.validation_split(),
                     ": give --validation_split (e.g. 0.1, taken from the end of ", d.x_train(),
                     ") or add the arrays"));
  }
  return splits;
}

// The streamed training files' part of the splits: their records counted
// (or the chief's counts, on a worker), a validation_split's tail taken
// off, standardization fitted on the first kStandardizeRecords; the
// validation and test files read whole (unless training_only). The
// training split holds no example, only the count.
absl::StatusOr<data::FashionMnist> StreamRecords(const proto::JobSpec& job,
                                                 const compute::Model& model,
                                                 data::NumpyDatasetOptions o, DataRecord* record,
                                                 std::vector<int64_t>* train_records,
                                                 bool training_only) {
  const absl::Time start = absl::Now();
  const proto::RecordData& d = job.record_data();
  PSC_ASSIGN_OR_RETURN(const RecordReading reading, ReadingFor(job, model));
  io::FileSystem* fs = io::LocalFileSystem();
  const std::vector<std::string> files(d.train().begin(), d.train().end());
  std::vector<int64_t> counts;
  std::vector<records::Piece> tail;  // validation_split's
  if (training_only && d.train_records_size() == d.train_size()) {
    counts.assign(d.train_records().begin(), d.train_records().end());
  } else {
    PSC_ASSIGN_OR_RETURN(
        const records::RecordCounts counted,
        records::CountRecords(fs, files, reading.options, absl::StrCat(d.spec_path(), ".counts")));
    record->count_seconds = counted.seconds;
    record->files_counted = counted.counted;
    counts = counted.records;
    // Damage that lost a file's rest ended its count (skip_corrupt): one
    // record skipped, as a whole read counts it.
    for (const auto& [path, damage] : counted.damaged) {
      base::Logf("chief: %s (--skip_corrupt_records: the rest of the file is not read)", damage);
      record->records_skipped.emplace_back(path, 1);
    }
    int64_t total = 0;
    for (int64_t n : counts) total += n;
    // Keras's: the last N - floor(N * (1 - split)) validate.
    const int64_t keep =
        d.validation_split() > 0
            ? static_cast<int64_t>(static_cast<double>(total) * (1 - d.validation_split()))
            : total;
    int64_t train_left =
        job.max_train_examples() > 0 ? std::min(keep, job.max_train_examples()) : keep;
    int64_t at = 0;
    for (size_t f = 0; f < counts.size(); ++f) {
      const int64_t n = counts[f];
      if (at + n > keep) {  // the tail's part of this file
        const int64_t first = std::max<int64_t>(0, keep - at);
        tail.push_back({static_cast<int>(f), first, n - first});
      }
      counts[f] = std::clamp<int64_t>(train_left, 0, n);
      train_left -= counts[f];
      at += n;
    }
  }
  int64_t train_total = 0;
  for (int64_t n : counts) train_total += n;
  if (train_total == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data=", RecordFormatName(d), ":... has no training record"));
  }
  // The first records, in the files' order: the fit's (without one, the
  // first record shows the arrays' shapes).
  std::vector<records::Piece> first;
  int64_t want = std::min(train_total, o.preprocessing == data::Preprocessing::Kind::kStandardize
                                           ? kStandardizeRecords
                                           : 1);
  for (size_t f = 0; f < counts.size() && want > 0; ++f) {
    const int64_t n = std::min(want, counts[f]);
    if (n > 0) first.push_back({static_cast<int>(f), 0, n});
    want -= n;
  }
  std::map<std::string, data::NumpyArray> arrays;
  std::vector<std::pair<std::string, int64_t>>& skipped = record->records_skipped;
  // `count_skips`: not for the first records, which the workers read
  // again and count.
  const auto read_pieces = [&](std::vector<records::Piece> pieces, const char* split,
                               const char* what, bool count_skips) -> absl::Status {
    records::RowBuffer rows(&reading.layout);
    records::PieceReader reader(fs, files, std::move(pieces), &reading.layout, reading.options);
    PSC_RETURN_IF_ERROR(reader.Read(std::numeric_limits<int64_t>::max(), &rows).status());
    PSC_RETURN_IF_ERROR(
        CheckSkipped(d, what, reader.skipped(), rows.rows() + reader.skipped(), reader.files()));
    for (const records::FileCount& f : reader.files()) {
      if (f.skipped > 0 && count_skips) skipped.emplace_back(f.path, f.skipped);
    }
    PSC_ASSIGN_OR_RETURN(auto read, rows.Take(absl::StrCat("x_", split), absl::StrCat("y_", split),
                                              absl::StrCat("w_", split)));
    for (auto& [name, array] : read) arrays.insert_or_assign(name, std::move(array));
    return absl::OkStatus();
  };
  PSC_RETURN_IF_ERROR(
      read_pieces(std::move(first), "train", "training files' first records", false));
  std::optional<data::NumpyArray> tail_weights;  // fit's: the split-off rows keep their weights
  if (!training_only && !tail.empty()) {
    PSC_RETURN_IF_ERROR(read_pieces(std::move(tail), "val", "validation tail", true));
    if (const auto w = arrays.find("w_val"); w != arrays.end()) tail_weights = w->second;
  }
  if (!training_only) {
    const struct {
      const google::protobuf::RepeatedPtrField<std::string>* files;
      const char* split;
      const char* what;
    } whole[] = {{&d.validation(), "val", "validation files"}, {&d.test(), "test", "test files"}};
    for (const auto& w : whole) {
      if (w.files->empty()) continue;
      PSC_ASSIGN_OR_RETURN(
          records::SplitRead read,
          records::ReadSplit(fs, std::vector<std::string>(w.files->begin(), w.files->end()),
                             reading.layout, reading.options, w.split));
      PSC_RETURN_IF_ERROR(
          CheckSkipped(d, w.what, read.skipped, read.records + read.skipped, read.files));
      for (const records::FileCount& f : read.files) {
        if (f.skipped > 0) skipped.emplace_back(f.path, f.skipped);
      }
      for (auto& [name, array] : read.arrays) arrays.insert_or_assign(name, std::move(array));
    }
  }
  o.validation_split = 0;
  o.max_train_examples = 0;
  o.sample_weight = reading.spec.weight.has_value() ? "w_train" : "";
  PSC_ASSIGN_OR_RETURN(data::FashionMnist splits, data::DatasetFromArrays(std::move(arrays), o));
  // A slot's buffer holds at most its epoch's share (a step's at least).
  const int64_t slot_rows = std::min<int64_t>(
      d.shuffle_buffer() > 0 ? d.shuffle_buffer() : kDefaultShuffleBuffer, train_total);
  PSC_RETURN_IF_ERROR(
      CheckShuffleBuffer(job.no_shuffle() ? 1 : slot_rows, splits.train.pixels_per_example()));
  if (tail_weights.has_value()) {
    PSC_ASSIGN_OR_RETURN(splits.validation.weights,
                         data::WeightsFromArray(*tail_weights, "the validation tail's weights"));
  }
  // Only the count: the slots stream the examples (record_stream.h).
  splits.train.DropExamples();
  splits.train.labels.clear();
  splits.train.weights.clear();
  splits.train.targets.clear();
  splits.train.count = train_total;
  if (reading.spec.weight.has_value()) record->sample_weight = reading.spec.weight->features[0];
  record->read_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  record->streamed = true;
  *train_records = std::move(counts);
  return splits;
}

absl::StatusOr<data::FashionMnist> LoadRecords(const proto::JobSpec& job,
                                               const compute::Model& model, DataRecord* record,
                                               std::vector<int64_t>* train_records,
                                               bool training_only) {
  const proto::RecordData& d = job.record_data();
  if (StreamsRecords(job)) {
    PSC_ASSIGN_OR_RETURN(
        data::NumpyDatasetOptions o,
        LoaderOptions(job, model, absl::StrCat("the ", RecordFormatName(d), " files"), 0));
    PSC_ASSIGN_OR_RETURN(data::FashionMnist splits,
                         StreamRecords(job, model, o, record, train_records, training_only));
    ThroughTheModelsLayer(model, &splits);
    if (splits.validation.count == 0 && !training_only) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data=", RecordFormatName(d), ":... has no validation files and validation_split is ",
          d.validation_split(),
          ": give validation=GLOB or validation_split=F (e.g. 0.1, the last tenth of the "
          "training records)"));
    }
    return splits;
  }
  PSC_ASSIGN_OR_RETURN(
      data::NumpyDatasetOptions o,
      LoaderOptions(job, model, absl::StrCat("the ", RecordFormatName(d), " files"),
                    d.validation_split()));
  // Without the validation files the training split is the same: with
  // them there is no validation_split to take from it.
  const bool skip = training_only && d.validation_size() > 0;
  PSC_ASSIGN_OR_RETURN(RecordArrays read, ReadRecordArrays(job, model, skip));
  o.sample_weight = read.has_weight ? "w_train" : "";
  PSC_ASSIGN_OR_RETURN(data::FashionMnist splits,
                       data::DatasetFromArrays(std::move(read.arrays), o));
  ThroughTheModelsLayer(model, &splits);
  if (splits.validation.count == 0 && !skip) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data=", RecordFormatName(d),
                     ":... has no validation files and validation_split is ", d.validation_split(),
                     ": give validation=GLOB or validation_split=F (e.g. 0.1, the last "
                     "tenth of the training records)"));
  }
  record->records_skipped = std::move(read.skipped);
  record->sample_weight = read.weight_feature;
  record->read_seconds = read.seconds;
  return splits;
}

absl::StatusOr<JobData> Load(const proto::JobSpec& job, const compute::Model& model,
                             bool training_only) {
  JobData out;
  if (job.numpy_data().path().empty() && !job.has_record_data()) {
    if (IsRegressionLoss(job.loss())) {
      return absl::InvalidArgumentError(
          absl::StrCat("the loss ", job.loss().name(),
                       " is a regression and Fashion-MNIST has class labels: give "
                       "--data=FILE.npz with float targets in y_train"));
    }
    const compute::Shape& in = model.input_shape();
    if (!(in == compute::Shape{28, 28, 1} || in == compute::Shape{28, 28} ||
          in == compute::Shape{784}) ||
        model.classes() < 10) {
      return absl::InvalidArgumentError(
          absl::StrCat("the Fashion-MNIST IDX files hold 28x28x1 images of 10 classes; ",
                       job.model(), " takes ", compute::ShapeText(in), " and has ", model.classes(),
                       " classes: give --data=FILE.npz with its examples"));
    }
    data::DatasetOptions o;
    o.data_dir = job.data_dir();
    o.max_train_examples = job.max_train_examples();
    PSC_ASSIGN_OR_RETURN(out.splits, data::LoadFashionMnist(o));
    out.record.source = absl::StrCat("fashion-mnist:", job.data_dir());
    out.preprocessing.kind = data::Preprocessing::Kind::kStandardize;
    out.preprocessing.mean = out.splits.mean;
    out.preprocessing.std = out.splits.std;
    if (model.input_transform().kind != compute::InputTransform::Kind::kNone) {
      // The raw pixels through the model's own layer instead.
      out.preprocessing = PreprocessingOf(model.input_transform());
      std::array<float, 256> table;
      for (int v = 0; v < 256; ++v) {
        table[v] = data::Preprocess(out.preprocessing, static_cast<float>(v));
      }
      for (data::Split* split : {&out.splits.train, &out.splits.validation, &out.splits.test}) {
        split->table = table;
      }
    }
  } else if (job.has_record_data()) {
    PSC_ASSIGN_OR_RETURN(out.splits,
                         LoadRecords(job, model, &out.record, &out.train_records, training_only));
    out.record.source = RecordSource(job.record_data());
    out.preprocessing = out.splits.train.preprocessing;
  } else {
    PSC_ASSIGN_OR_RETURN(out.splits, LoadNumpy(job, model));
    out.record.source = absl::StrCat("npz:", job.numpy_data().path());
    out.preprocessing = out.splits.train.preprocessing;
  }
  {
    const data::Preprocessing& p = out.preprocessing;
    switch (p.kind) {
      case data::Preprocessing::Kind::kStandardize:
        out.record.preprocessing = "standardize";
        break;
      case data::Preprocessing::Kind::kRescale:
        out.record.preprocessing = "rescale";
        out.record.scale = p.scale;
        break;
      case data::Preprocessing::Kind::kNone:
        out.record.preprocessing = "none";
        break;
    }
  }
  out.record.mean = out.preprocessing.mean;
  out.record.std = out.preprocessing.std;
  out.record.feature_mean = out.preprocessing.feature_mean;
  out.record.feature_std = out.preprocessing.feature_std;
  out.record.offset = out.preprocessing.offset;
  if (model.input_transform().kind != compute::InputTransform::Kind::kNone) {
    out.record.preprocessing_layer = model.input_transform().layer;
  }
  // fit's class_weight: the training examples only, as Keras.
  out.splits.train.weights =
      ExampleWeights(out.splits.train.labels, out.splits.train.weights, job.loss());
  if (!job.has_record_data()) out.record.sample_weight = job.numpy_data().sample_weight();
  out.record.train_examples = out.splits.train.count;
  out.record.validation_examples = out.splits.validation.count;
  out.record.test_examples = out.splits.test.count;
  return out;
}

}  // namespace

absl::StatusOr<JobData> LoadJobData(const proto::JobSpec& job, const compute::Model& model) {
  return Load(job, model, /*training_only=*/false);
}

absl::StatusOr<JobData> LoadTrainingData(const proto::JobSpec& job, const compute::Model& model) {
  return Load(job, model, /*training_only=*/true);
}

data::Preprocessing RecordedPreprocessing(const DataRecord& record) {
  data::Preprocessing p;
  if (record.preprocessing == "standardize") {
    p.kind = data::Preprocessing::Kind::kStandardize;
    p.mean = record.mean;
    p.std = record.std;
    p.feature_mean = record.feature_mean;
    p.feature_std = record.feature_std;
  } else if (record.preprocessing == "rescale") {
    p.kind = data::Preprocessing::Kind::kRescale;
    p.scale = record.scale;
    p.offset = record.offset;
  }
  return p;
}

std::string MetricNames(const proto::JobSpec& job) {
  std::vector<std::string> names;
  if (!IsRegressionLoss(job.loss())) names.push_back("accuracy");
  for (const proto::CompiledMetric& m : job.metrics()) names.push_back(m.name());
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

absl::StatusOr<std::string> CheckJob(const proto::JobSpec& job) {
  PSC_ASSIGN_OR_RETURN(const compute::Model model, ModelForJob(job));
  absl::StatusOr<JobData> loaded = LoadJobData(job, model);
  if (!loaded.ok()) {  // a missing or corrupt file is bad input, as a bad flag is
    return absl::InvalidArgumentError(loaded.status().message());
  }
  const JobData& data = *loaded;
  const DataRecord& r = data.record;
  // What the batch plan would refuse, in the flags' words.
  if (job.batch_size() > r.train_examples) {
    return absl::InvalidArgumentError(absl::StrCat("--batch_size=", job.batch_size(),
                                                   " is more than the ", r.train_examples,
                                                   " training examples"));
  }
  if (job.steps_per_epoch() > r.train_examples / job.batch_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--steps_per_epoch=", job.steps_per_epoch(), ": an epoch of ",
                     r.train_examples, " examples holds at most ",
                     r.train_examples / job.batch_size(), " batches of ", job.batch_size()));
  }
  PSC_RETURN_IF_ERROR(CheckRowTableOptions(job, model));
  if (!job.model_config().empty()) {  // checked when the flags were read; a JobSpec from elsewhere
    PSC_RETURN_IF_ERROR(ReadCompileConfig(job.model_config(), model, job.model()).status());
  }
  const std::string loss = JobLoss(job).Text();
  const std::string scaled =
      job.policy().has_loss_scale()
          ? absl::StrCat(", scaled dynamically (initial scale ",
                         job.policy().loss_scale().initial_scale(), ", doubled after ",
                         job.policy().loss_scale().growth_steps(), " finite steps)")
          : "";
  return absl::StrCat(
      "job ok: ", job.model(), " (", model.num_parameters(), " parameters, computing in ",
      model.ComputeDtypesText(), "); optimizer ", optimizer::OptimizerText(job.optimizer()),
      " from ", job.optimizer_source().empty() ? "the job" : job.optimizer_source(), "; loss ",
      loss, scaled, "; metrics ", MetricNames(job), "; data ", r.source, ": ", r.train_examples,
      " train, ", r.validation_examples, " validation, ", r.test_examples, " test examples",
      r.sample_weight.empty() ? "" : absl::StrCat(", weighted by ", r.sample_weight), ", ",
      data.preprocessing.Text(),
      r.preprocessing_layer.empty()
          ? ""
          : absl::StrCat(" (the model's layer \"", r.preprocessing_layer, "\")"),
      "; initial weights: ",
      job.initial_weights().empty() ? absl::StrCat("the config's initializers, seed ", job.seed())
                                    : absl::StrCat(job.initial_weights(), " (model.weights.h5)"));
}

}  // namespace job
}  // namespace psc
