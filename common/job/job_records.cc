#include "common/job/job_records.h"

#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/io/file_system.h"
#include "common/io/glob.h"
#include "common/job/job_loss.h"
#include "common/records/feature_spec.h"
#include "common/records/record_files.h"
#include "common/records/row_layout.h"
#include "common/tfrecord/compression.h"
#include "common/tfrecord/record_reader.h"

namespace psc {
namespace job {
namespace {

absl::Status FlagError(absl::string_view value, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("--data=", value, ": ", what));
}

absl::StatusOr<std::vector<std::string>> Expand(absl::string_view value, absl::string_view key,
                                                const std::string& glob) {
  absl::StatusOr<std::vector<std::string>> files = io::ExpandGlob(glob);
  if (!files.ok()) return FlagError(value, absl::StrCat(key, ": ", files.status().message()));
  // Absolute: every task reads these paths, whatever its working directory.
  for (std::string& f : *files) {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(f, ec);
    if (ec) return FlagError(value, absl::StrCat(key, ": ", f, ": ", ec.message()));
    f = absolute.lexically_normal().string();
  }
  return files;
}

absl::StatusOr<records::FeatureSpec> SpecOf(const proto::RecordData& d) {
  return records::ParseFeatureSpec(d.spec_json(), d.spec_path());
}

}  // namespace

bool IsRecordDataFlag(absl::string_view value) {
  return absl::StartsWith(value, "tfrecord:") || absl::StartsWith(value, "csv:");
}

const char* RecordFormatName(const proto::RecordData& data) {
  return data.format() == proto::RecordData::CSV ? "csv" : "tfrecord";
}

absl::Status RecordDataFromFlag(absl::string_view value, proto::RecordData* out) {
  *out = proto::RecordData();
  absl::string_view rest = value;
  if (absl::ConsumePrefix(&rest, "tfrecord:")) {
    out->set_format(proto::RecordData::TFRECORD);
  } else if (absl::ConsumePrefix(&rest, "csv:")) {
    out->set_format(proto::RecordData::CSV);
  } else {
    return FlagError(value, "want tfrecord:... or csv:...");
  }
  std::map<std::string, std::string> keys;
  for (absl::string_view item : absl::StrSplit(rest, ',')) {
    const std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    static const char* const kKnown[] = {"train", "validation",    "test",
                                         "spec",  "compression",   "validation_split",
                                         "read",  "shuffle_buffer"};
    bool known = false;
    for (const char* k : kKnown) known = known || kv.first == k;
    if (!known || kv.second.empty()) {
      return FlagError(
          value, absl::StrCat("\"", item,
                              "\": want KEY=VALUE, KEY one of train, validation, "
                              "test, spec, compression, validation_split, read, shuffle_buffer"));
    }
    if (!keys.emplace(kv.first, kv.second).second) {
      return FlagError(value, absl::StrCat(kv.first, " is given twice"));
    }
  }
  if (keys.count("train") == 0 || keys.count("spec") == 0) {
    return FlagError(value,
                     "give train=GLOB and spec=FILE (the feature spec: see "
                     "`pscluster data inspect`)");
  }
  out->set_train_glob(keys["train"]);
  PSC_ASSIGN_OR_RETURN(std::vector<std::string> train, Expand(value, "train", keys["train"]));
  for (std::string& f : train) out->add_train(std::move(f));
  if (keys.count("validation") > 0) {
    out->set_validation_glob(keys["validation"]);
    PSC_ASSIGN_OR_RETURN(std::vector<std::string> files,
                         Expand(value, "validation", keys["validation"]));
    for (std::string& f : files) out->add_validation(std::move(f));
  }
  if (keys.count("test") > 0) {
    out->set_test_glob(keys["test"]);
    PSC_ASSIGN_OR_RETURN(std::vector<std::string> files, Expand(value, "test", keys["test"]));
    for (std::string& f : files) out->add_test(std::move(f));
  }
  const std::string compression = keys.count("compression") > 0 ? keys["compression"] : "auto";
  if (absl::Status s = tfrecord::ParseCompression(compression).status(); !s.ok()) {
    return FlagError(value, s.message());
  }
  out->set_compression(compression);
  if (keys.count("validation_split") > 0) {
    double split = 0;
    if (!absl::SimpleAtod(keys["validation_split"], &split) || !(split >= 0 && split < 1)) {
      return FlagError(value, absl::StrCat("validation_split=", keys["validation_split"],
                                           ": want a fraction in [0, 1)"));
    }
    if (out->validation_size() > 0) {
      return FlagError(value, "validation_split with validation files: give one of them");
    }
    out->set_validation_split(split);
  }
  const std::string read = keys.count("read") > 0 ? keys["read"] : "auto";
  if (read == "auto") {
    uint64_t bytes = 0;
    for (const std::string& f : out->train()) {
      absl::StatusOr<uint64_t> size = io::LocalFileSystem()->FileSize(f);
      if (!size.ok()) return FlagError(value, absl::StrCat("train: ", size.status().message()));
      bytes += *size;
    }
    out->set_read(bytes > kStreamAboveBytes ? "stream" : "whole");
  } else if (read == "whole" || read == "stream") {
    out->set_read(read);
  } else {
    return FlagError(value, absl::StrCat("read=", read, ": want auto, whole or stream"));
  }
  if (keys.count("shuffle_buffer") > 0) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(keys["shuffle_buffer"], &n) || n < 1 || n > kMaxShuffleBuffer) {
      return FlagError(value,
                       absl::StrCat("shuffle_buffer=", keys["shuffle_buffer"],
                                    ": want a count of records in [1, ", kMaxShuffleBuffer, "]"));
    }
    if (out->read() != "stream") {
      return FlagError(value, "shuffle_buffer is a streamed reader's: give read=stream");
    }
    out->set_shuffle_buffer(n);
  }
  const std::string spec_path = keys["spec"];
  out->set_spec_path(spec_path);
  absl::StatusOr<uint64_t> size = io::LocalFileSystem()->FileSize(spec_path);
  if (!size.ok()) return FlagError(value, absl::StrCat("spec: ", size.status().message()));
  if (*size > kMaxSpecBytes) {
    return FlagError(value, absl::StrCat("spec: ", spec_path, " is ", *size,
                                         " bytes; a feature spec is at most ", kMaxSpecBytes));
  }
  absl::StatusOr<std::string> text = io::LocalFileSystem()->ReadFile(spec_path);
  if (!text.ok()) return FlagError(value, absl::StrCat("spec: ", text.status().message()));
  if (text->size() > kMaxSpecBytes) {
    return FlagError(value, absl::StrCat("spec: ", spec_path, " grew past ", kMaxSpecBytes,
                                         " bytes while read"));
  }
  out->set_spec_json(*text);
  PSC_ASSIGN_OR_RETURN(const records::FeatureSpec spec, SpecOf(*out));
  (void)spec;
  out->set_max_record_bytes(tfrecord::kDefaultMaxRecordBytes);
  out->set_max_skipped_fraction(kDefaultMaxSkippedFraction);
  return absl::OkStatus();
}

std::string RecordSource(const proto::RecordData& d) {
  std::string out = absl::StrCat(RecordFormatName(d), ":train=", d.train_glob(), " (",
                                 d.train_size(), d.train_size() == 1 ? " file)" : " files)");
  if (d.validation_size() > 0) {
    absl::StrAppend(&out, ", validation=", d.validation_glob(), " (", d.validation_size(),
                    d.validation_size() == 1 ? " file)" : " files)");
  } else if (d.validation_split() > 0) {
    absl::StrAppend(&out, ", validation_split=", d.validation_split());
  }
  if (d.test_size() > 0) {
    absl::StrAppend(&out, ", test=", d.test_glob(), " (", d.test_size(),
                    d.test_size() == 1 ? " file)" : " files)");
  }
  absl::StrAppend(&out, ", spec=", d.spec_path());
  return out;
}

keras::InputDataShape RecordInputShapes(const proto::RecordData& data) {
  return [data](const std::string& name, bool only) -> absl::StatusOr<compute::Shape> {
    PSC_ASSIGN_OR_RETURN(const records::FeatureSpec spec, SpecOf(data));
    for (const records::FeatureColumn& c : spec.inputs) {
      if (c.key != name && !(only && spec.inputs.size() == 1)) continue;
      if (!c.has_shape || c.varlen) {
        return absl::InvalidArgumentError(absl::StrCat(
            data.spec_path(), ": the model's input \"", name,
            "\" has a None dimension, which pscluster fixes from the data: give its entry a "
            "\"shape\""));
      }
      return compute::Shape(c.shape.begin(), c.shape.end());
    }
    return absl::InvalidArgumentError(absl::StrCat(data.spec_path(),
                                                   ": no entry for the model's "
                                                   "input \"",
                                                   name, "\" under \"inputs\""));
  };
}

absl::StatusOr<RecordReading> ReadingFor(const proto::JobSpec& job, const compute::Model& model) {
  const proto::RecordData& d = job.record_data();
  RecordReading out;
  PSC_ASSIGN_OR_RETURN(out.spec, SpecOf(d));
  const records::FeatureSpec& spec = out.spec;
  std::vector<records::InputSlot> inputs;
  for (const compute::ModelInput& in : model.inputs()) {
    inputs.push_back(
        {in.name, std::vector<int64_t>(in.shape.begin(), in.shape.end()), in.id_limit});
  }
  records::LabelSlot label;
  if (IsRegressionLoss(job.loss())) {
    label.target_width = model.classes();
  } else {
    label.classes = LabelClasses(job.loss(), model);
  }
  const compute::Shape& one = model.input_shape();
  PSC_ASSIGN_OR_RETURN(
      out.layout, records::ResolveLayout(spec, inputs, std::vector<int64_t>(one.begin(), one.end()),
                                         label, d.spec_path()));
  records::ReadOptions& options = out.options;
  options.format = d.format() == proto::RecordData::CSV ? records::FileFormat::kCsv
                                                        : records::FileFormat::kTfRecord;
  PSC_ASSIGN_OR_RETURN(
      options.compression,
      tfrecord::ParseCompression(d.compression().empty() ? "auto" : d.compression()));
  options.max_record_bytes =
      d.max_record_bytes() > 0 ? d.max_record_bytes() : tfrecord::kDefaultMaxRecordBytes;
  options.skip_corrupt = d.skip_corrupt_records();
  return out;
}

absl::Status CheckSkipped(const proto::RecordData& d, const char* what, int64_t skipped,
                          int64_t all, const std::vector<records::FileCount>& files) {
  if (skipped == 0 ||
      static_cast<double>(skipped) <= d.max_skipped_fraction() * static_cast<double>(all)) {
    return absl::OkStatus();
  }
  std::string first;
  for (const records::FileCount& f : files) {
    if (first.empty()) first = f.first_skip;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("the ", what, ": ", skipped, " of ", all,
                   " records skipped (--skip_corrupt_records), over --max_skipped_fraction=",
                   d.max_skipped_fraction(), "; the first: ", first));
}

absl::StatusOr<RecordArrays> ReadRecordArrays(const proto::JobSpec& job,
                                              const compute::Model& model, bool training_only) {
  const absl::Time start = absl::Now();
  const proto::RecordData& d = job.record_data();
  PSC_ASSIGN_OR_RETURN(const RecordReading reading, ReadingFor(job, model));
  const records::RowLayout& layout = reading.layout;
  const records::ReadOptions& options = reading.options;
  RecordArrays out;
  out.has_weight = reading.spec.weight.has_value();
  if (out.has_weight) out.weight_feature = reading.spec.weight->features[0];
  const struct {
    const google::protobuf::RepeatedPtrField<std::string>* files;
    const char* split;
    const char* name;
  } splits[] = {{&d.train(), "train", "training"},
                {&d.validation(), "val", "validation"},
                {&d.test(), "test", "test"}};
  for (const auto& s : splits) {
    if (s.files->empty() || (training_only && s.files != &d.train())) continue;
    const std::vector<std::string> files(s.files->begin(), s.files->end());
    PSC_ASSIGN_OR_RETURN(records::SplitRead read, records::ReadSplit(io::LocalFileSystem(), files,
                                                                     layout, options, s.split));
    PSC_RETURN_IF_ERROR(CheckSkipped(d, absl::StrCat(s.name, " files").c_str(), read.skipped,
                                     read.records + read.skipped, read.files));
    for (const records::FileCount& f : read.files) {
      if (f.skipped > 0) out.skipped.emplace_back(f.path, f.skipped);
    }
    for (auto& [name, array] : read.arrays) out.arrays.insert_or_assign(name, std::move(array));
  }
  out.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return out;
}

}  // namespace job
}  // namespace psc
