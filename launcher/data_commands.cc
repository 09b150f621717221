#include "launcher/data_commands.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/data/npy.h"
#include "common/data/numpy_file.h"
#include "common/io/file_system.h"
#include "common/io/glob.h"
#include "common/records/feature_spec.h"
#include "common/records/record_files.h"
#include "common/tfrecord/example.h"
#include "common/tfrecord/record_reader.h"
#include "common/tfrecord/record_writer.h"

namespace psc {
namespace launcher {

namespace {

// What the inspected records showed of one feature.
struct Seen {
  std::string kind;  // tfrecord::FeatureKind's
  int64_t min_length = INT64_MAX, max_length = 0;
  size_t bytes = 0;             // a bytes feature's first value's size
  const char* image = nullptr;  // "PNG" or "JPEG": encoded images
  int records = 0;
};

void Note(const tfexample::Example& example, std::map<std::string, Seen>* seen) {
  for (const auto& [name, f] : example.features().feature()) {
    Seen& s = (*seen)[name];
    s.kind = tfrecord::FeatureKind(f);
    const int64_t n = tfrecord::FeatureLength(f);
    s.min_length = std::min(s.min_length, n);
    s.max_length = std::max(s.max_length, n);
    ++s.records;
    if (f.kind_case() == tfexample::Feature::kBytesList && f.bytes_list().value_size() > 0) {
      const std::string& v = f.bytes_list().value(0);
      s.bytes = v.size();
      if (v.size() >= 8 && v.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0) s.image = "PNG";
      if (v.size() >= 3 && v.compare(0, 3, "\xff\xd8\xff", 3) == 0) s.image = "JPEG";
    }
  }
}

// A feature spec from what the records showed: the label is the feature
// named label, labels, y, target or class (else the first int64 of one
// value); every other feature an input of its own name.
std::string SuggestSpec(const std::map<std::string, Seen>& seen) {
  std::string notes;
  std::string label;
  for (const char* name : {"label", "labels", "y", "target", "class"}) {
    const auto it = seen.find(name);
    if (label.empty() && it != seen.end() &&
        (it->second.kind == "int64" || it->second.kind == "float") &&
        it->second.min_length == it->second.max_length) {
      label = name;
    }
  }
  for (const auto& [name, s] : seen) {
    if (label.empty() && s.kind == "int64" && s.min_length == 1 && s.max_length == 1) label = name;
  }
  records::FeatureSpec spec;
  for (const auto& [name, s] : seen) {
    records::FeatureColumn c;
    c.key = name == label ? "label" : name;
    c.features = {name};
    if (s.kind == "empty" || s.max_length == 0 || (s.kind == "bytes" && s.bytes == 0)) {
      absl::StrAppend(&notes, "  \"", name, "\": empty in the records seen; left out\n");
      continue;
    }
    if (s.image != nullptr) {
      absl::StrAppend(&notes, "  \"", name, "\": ", s.image,
                      " images; pscluster reads raw values: decode them to raw bytes first; "
                      "left out\n");
      continue;
    }
    if (s.kind == "bytes") {
      if (s.max_length != 1) {
        absl::StrAppend(&notes, "  \"", name, "\": lists of ", s.max_length,
                        " strings; pscluster reads no strings; left out\n");
        continue;
      }
      c.kind = records::ValueKind::kBytes;
      c.dtype = data::NpyType::kUint8;
      c.shape = {static_cast<int64_t>(s.bytes)};
      c.has_shape = true;
      absl::StrAppend(&notes, "  \"", name, "\": ", s.bytes,
                      " bytes, read as uint8: set \"dtype\" to what they hold and \"shape\" to "
                      "the model input's\n");
    } else {
      c.kind = s.kind == "int64" ? records::ValueKind::kInt64 : records::ValueKind::kFloat;
      c.varlen = s.min_length != s.max_length;
      if (name != label || s.max_length > 1) {
        c.shape = {s.max_length};
        c.has_shape = true;
      }
      if (c.varlen) {
        absl::StrAppend(&notes, "  \"", name, "\": ", s.min_length, " to ", s.max_length,
                        " values: varlen, padded to \"shape\" (set it to the model input's)\n");
      }
    }
    if (name == label) {
      spec.label = c;
    } else {
      spec.inputs.push_back(c);
    }
  }
  if (label.empty()) {
    spec.label.key = "label";
    spec.label.features = {"label"};
    spec.label.kind = records::ValueKind::kInt64;
    absl::StrAppend(&notes, "  no feature looks like the label: name it under \"label\"\n");
  }
  return absl::StrCat(
      "a feature spec to start from (each input under the name of the model's input it feeds):\n",
      notes, records::FeatureSpecJson(spec));
}

}  // namespace

absl::StatusOr<std::string> InspectRecords(const std::string& glob, int records,
                                           std::optional<tfrecord::Compression> compression,
                                           uint64_t max_record_bytes) {
  if (records < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--records=", records, ": want at least 1"));
  }
  PSC_ASSIGN_OR_RETURN(const std::vector<std::string> files, io::ExpandGlob(glob));
  io::FileSystem* fs = io::LocalFileSystem();
  uint64_t bytes = 0;
  for (const std::string& f : files) {
    PSC_ASSIGN_OR_RETURN(const uint64_t size, fs->FileSize(f));
    bytes += size;
  }
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<tfrecord::RecordReader> reader,
                       tfrecord::RecordReader::Open(fs, files[0], compression, max_record_bytes));
  std::string out = absl::StrFormat("%d file%s, %d bytes; the first, %s, is %s\n", files.size(),
                                    files.size() == 1 ? "" : "s", bytes, files[0],
                                    reader->compression() == tfrecord::Compression::kNone
                                        ? "uncompressed"
                                        : tfrecord::CompressionName(reader->compression()));
  std::string record;
  std::map<std::string, Seen> seen;
  for (int i = 0; i < records; ++i) {
    bool end = false;
    PSC_RETURN_IF_ERROR(reader->Next(&record, &end));
    if (end) {
      absl::StrAppend(&out, i == 0 ? "it holds no record\n" : "");
      break;
    }
    const std::string where =
        absl::StrCat(files[0], ": the record at offset ", reader->record_offset());
    tfexample::Example example;
    PSC_RETURN_IF_ERROR(tfrecord::ParseExample(record, where, &example));
    absl::StrAppendFormat(&out, "record %d (offset %d, %d bytes): %d features\n", i,
                          reader->record_offset(), record.size(),
                          example.features().feature_size());
    absl::StrAppend(&out, tfrecord::DescribeExample(example, 5));
    Note(example, &seen);
  }
  if (!seen.empty()) absl::StrAppend(&out, SuggestSpec(seen));
  return out;
}

namespace {

// Element i of `a` (C order) as a double, or as an int64.
double ElementAsDouble(const data::NumpyArray& a, int64_t i) {
  const char* p = static_cast<const char*>(a.data()) + i * data::NpyTypeSize(a.header().type);
  const auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return static_cast<double>(v);
  };
  switch (a.header().type) {
    case data::NpyType::kBool:
    case data::NpyType::kUint8:
      return load(uint8_t{});
    case data::NpyType::kInt8:
      return load(int8_t{});
    case data::NpyType::kInt16:
      return load(int16_t{});
    case data::NpyType::kUint16:
      return load(uint16_t{});
    case data::NpyType::kInt32:
      return load(int32_t{});
    case data::NpyType::kUint32:
      return load(uint32_t{});
    case data::NpyType::kInt64:
      return load(int64_t{});
    case data::NpyType::kUint64:
      return load(uint64_t{});
    case data::NpyType::kFloat32:
      return load(float{});
    case data::NpyType::kFloat64:
      return load(double{});
  }
  return 0;
}

int64_t ElementAsInt(const data::NumpyArray& a, int64_t i) {
  const char* p = static_cast<const char*>(a.data()) + i * data::NpyTypeSize(a.header().type);
  if (a.header().type == data::NpyType::kInt64 || a.header().type == data::NpyType::kUint64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  return static_cast<int64_t>(ElementAsDouble(a, i));
}

// One array of a split: its feature (column prefix) and spec entry.
struct Feature {
  std::string name;  // the Example's feature; CSV: the columns' prefix
  const data::NumpyArray* array = nullptr;
  int64_t values = 1;  // per example
  records::FeatureColumn column;
};

Feature FeatureOf(const std::string& key, const std::string& name, const data::NumpyArray& a,
                  bool csv) {
  Feature f;
  f.name = name;
  f.array = &a;
  std::vector<int64_t> shape(a.header().shape.begin() + 1, a.header().shape.end());
  f.values = records::ShapeValues(shape);
  records::FeatureColumn& c = f.column;
  c.key = key;
  const data::NpyType t = a.header().type;
  c.kind = !data::NpyTypeIsInteger(t)           ? records::ValueKind::kFloat
           : t == data::NpyType::kUint8 && !csv ? records::ValueKind::kBytes
                                                : records::ValueKind::kInt64;
  if (c.kind == records::ValueKind::kBytes) c.dtype = data::NpyType::kUint8;
  if (!shape.empty()) {
    c.shape = shape;
    c.has_shape = true;
  }
  if (csv && f.values > 1) {
    for (int64_t i = 0; i < f.values; ++i) c.features.push_back(absl::StrCat(name, "_", i));
  } else {
    c.features = {name};
  }
  return f;
}

std::string CsvNumber(const Feature& f, int64_t i) {
  if (f.column.kind == records::ValueKind::kInt64) return absl::StrCat(ElementAsInt(*f.array, i));
  return absl::StrFormat("%.9g", ElementAsDouble(*f.array, i));  // float32 exactly
}

}  // namespace

absl::StatusOr<std::string> ConvertNpz(const std::string& npz, const std::string& out_dir,
                                       int shards, tfrecord::Compression compression, bool csv) {
  if (shards < 1 || shards > 100000) {
    return absl::InvalidArgumentError(absl::StrCat("--shards=", shards, ": want 1 to 100000"));
  }
  if (csv && compression != tfrecord::Compression::kNone) {
    return absl::InvalidArgumentError("--format=csv writes plain files: drop --compression");
  }
  PSC_ASSIGN_OR_RETURN(const auto arrays, data::ReadNpzFile(npz));
  io::FileSystem* fs = io::LocalFileSystem();
  PSC_RETURN_IF_ERROR(fs->MakeDirs(out_dir));
  records::FeatureSpec spec;
  std::string out;
  const struct {
    const char* x;
    const char* y;
    const char* file;
  } splits[] = {{"x_train", "y_train", "train"},
                {"x_val", "y_val", "validation"},
                {"x_test", "y_test", "test"}};
  for (const auto& split : splits) {
    std::vector<Feature> features;
    for (const auto& [name, array] : arrays) {
      if (name == split.x) {
        features.push_back(FeatureOf("x", "x", array, csv));
      } else if (name.rfind(absl::StrCat(split.x, "/"), 0) == 0) {
        const std::string input = name.substr(std::strlen(split.x) + 1);
        features.push_back(FeatureOf(input, input, array, csv));
      }
    }
    const auto y = arrays.find(split.y);
    if (features.empty() && y == arrays.end() && split.file != std::string("train")) continue;
    if (features.empty() || y == arrays.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(npz, ": no ", features.empty() ? split.x : split.y, " array beside ",
                       features.empty() ? split.y : split.x));
    }
    Feature label = FeatureOf("label", "y", y->second, csv);
    if (label.column.kind == records::ValueKind::kBytes) {
      label.column.kind = records::ValueKind::kInt64;
      label.column.dtype.reset();
    }
    const int64_t n = y->second.header().shape.empty() ? 0 : y->second.header().shape[0];
    for (const Feature& f : features) {
      if (f.name == "y") {
        return absl::InvalidArgumentError(absl::StrCat(
            npz, ": an input named \"y\" would be the label's feature; rename the array"));
      }
    }
    features.push_back(label);
    for (const Feature& f : features) {  // every value fits its feature's list
      const data::NpyType t = f.array->header().type;
      const int64_t count = f.array->header().count;
      for (int64_t i = 0; i < count; ++i) {
        if (t == data::NpyType::kUint64 &&
            ElementAsDouble(*f.array, i) > static_cast<double>(INT64_MAX)) {
          return absl::InvalidArgumentError(
              absl::StrCat(npz, ": ", f.name, " element ", i, " is over 2^63 - 1 (an int64 list)"));
        }
        if (t == data::NpyType::kFloat64 &&
            std::abs(ElementAsDouble(*f.array, i)) > std::numeric_limits<float>::max()) {
          return absl::InvalidArgumentError(
              absl::StrCat(npz, ": ", f.name, " element ", i, " is beyond float32's range"));
        }
      }
    }
    features.pop_back();
    for (const Feature& f : features) {
      if (f.array->header().shape.empty() || f.array->header().shape[0] != n) {
        return absl::InvalidArgumentError(
            absl::StrCat(npz, ": ", split.x, " arrays and ", split.y, " hold different counts"));
      }
    }
    if (spec.inputs.empty()) {
      for (const Feature& f : features) spec.inputs.push_back(f.column);
      spec.label = label.column;
    }
    features.push_back(label);
    const char* suffix = csv                                           ? ".csv"
                         : compression == tfrecord::Compression::kGzip ? ".tfrecord.gz"
                         : compression == tfrecord::Compression::kZlib ? ".tfrecord.zz"
                                                                       : ".tfrecord";
    for (int s = 0; s < shards; ++s) {
      const std::string path =
          absl::StrFormat("%s/%s-%05d-of-%05d%s", out_dir, split.file, s, shards, suffix);
      const int64_t begin = n * s / shards, end = n * (s + 1) / shards;
      if (csv) {
        PSC_ASSIGN_OR_RETURN(std::unique_ptr<io::WritableFile> file,
                             fs->OpenForWrite(path, io::OpenMode::kCreateNew));
        std::vector<std::string> header;
        for (const Feature& f : features) {
          for (const std::string& c : f.column.features) header.push_back(c);
        }
        std::string line = absl::StrJoin(header, ",") + "\n";
        PSC_RETURN_IF_ERROR(file->Append(line));
        for (int64_t e = begin; e < end; ++e) {
          line.clear();
          for (const Feature& f : features) {
            for (int64_t v = 0; v < f.values; ++v) {
              absl::StrAppend(&line, line.empty() ? "" : ",", CsvNumber(f, e * f.values + v));
            }
          }
          line.push_back('\n');
          PSC_RETURN_IF_ERROR(file->Append(line));
        }
        PSC_RETURN_IF_ERROR(file->Close());
        continue;
      }
      PSC_ASSIGN_OR_RETURN(std::unique_ptr<tfrecord::RecordWriter> writer,
                           tfrecord::RecordWriter::Create(fs, path, compression));
      tfexample::Example example;
      std::string record;
      for (int64_t e = begin; e < end; ++e) {
        example.Clear();
        auto& map = *example.mutable_features()->mutable_feature();
        for (const Feature& f : features) {
          tfexample::Feature& feature = map[f.name];
          const int64_t first = e * f.values;
          switch (f.column.kind) {
            case records::ValueKind::kBytes:
              feature.mutable_bytes_list()->add_value(
                  static_cast<const char*>(f.array->data()) + first, f.values);
              break;
            case records::ValueKind::kInt64:
              for (int64_t v = 0; v < f.values; ++v) {
                feature.mutable_int64_list()->add_value(ElementAsInt(*f.array, first + v));
              }
              break;
            case records::ValueKind::kFloat:
              for (int64_t v = 0; v < f.values; ++v) {
                feature.mutable_float_list()->add_value(
                    static_cast<float>(ElementAsDouble(*f.array, first + v)));
              }
              break;
          }
        }
        example.SerializeToString(&record);
        PSC_RETURN_IF_ERROR(writer->Write(record));
      }
      PSC_RETURN_IF_ERROR(writer->Close());
    }
    absl::StrAppendFormat(&out, "%s: %d examples in %d file%s (%s/%s-*-of-%05d%s)\n", split.file, n,
                          shards, shards == 1 ? "" : "s", out_dir, split.file, shards, suffix);
  }
  const std::string spec_path = absl::StrCat(out_dir, "/spec.json");
  PSC_RETURN_IF_ERROR(fs->WriteFileAtomically(spec_path, records::FeatureSpecJson(spec)));
  absl::StrAppend(&out, "the feature spec: ", spec_path, "\n");
  return out;
}

absl::StatusOr<std::string> DumpRecords(const std::string& glob, const std::string& spec_path,
                                        const std::string& out_dir, bool csv,
                                        std::optional<tfrecord::Compression> compression,
                                        bool skip_corrupt, uint64_t max_record_bytes) {
  io::FileSystem* fs = io::LocalFileSystem();
  PSC_ASSIGN_OR_RETURN(const std::vector<std::string> files, io::ExpandGlob(glob));
  PSC_ASSIGN_OR_RETURN(const uint64_t spec_bytes, fs->FileSize(spec_path));
  if (spec_bytes > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec_path, " is ", spec_bytes, " bytes; a feature spec is at most 1 MiB"));
  }
  PSC_ASSIGN_OR_RETURN(const std::string json, fs->ReadFile(spec_path));
  PSC_ASSIGN_OR_RETURN(const records::FeatureSpec spec, records::ParseFeatureSpec(json, spec_path));
  std::vector<records::InputSlot> inputs;
  for (const records::FeatureColumn& c : spec.inputs) {
    if (!c.has_shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec_path, ": \"", c.key, "\" has no \"shape\" (without a model, each input needs one)"));
    }
    const bool plain_name =
        !c.key.empty() && c.key[0] != '.' &&
        c.key.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
            std::string::npos;
    if (!plain_name) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec_path, ": the input \"", c.key, "\" cannot name a file (letters, digits, _ . -)"));
    }
    if (c.key == "label" || c.key == "weight") {
      return absl::InvalidArgumentError(absl::StrCat(spec_path, ": an input named \"", c.key,
                                                     "\" would overwrite ", c.key, ".npy"));
    }
    records::InputSlot slot;
    slot.name = c.key;
    slot.shape = c.shape;
    slot.integers = true;
    inputs.push_back(slot);
  }
  PSC_ASSIGN_OR_RETURN(const records::RowLayout layout,
                       records::ResolveLayout(spec, inputs, {}, {}, spec_path));
  records::ReadOptions options;
  options.format = csv ? records::FileFormat::kCsv : records::FileFormat::kTfRecord;
  options.compression = compression;
  options.skip_corrupt = skip_corrupt;
  options.max_record_bytes = max_record_bytes;
  PSC_ASSIGN_OR_RETURN(records::SplitRead read,
                       records::ReadSplit(fs, files, layout, options, "dump"));
  PSC_RETURN_IF_ERROR(fs->MakeDirs(out_dir));
  for (const auto& [name, array] : read.arrays) {
    const std::string file = name == "y_dump"   ? "label"
                             : name == "w_dump" ? "weight"
                                                : name.substr(std::strlen("x_dump/"));
    const data::NpyHeader& h = array.header();
    std::string bytes = data::MakeNpyHeader(h.type, h.shape);
    bytes.append(static_cast<const char*>(array.data()), h.data_bytes);
    PSC_RETURN_IF_ERROR(fs->WriteFileAtomically(absl::StrCat(out_dir, "/", file, ".npy"), bytes));
  }
  std::string out =
      absl::StrFormat("%d records from %d file%s into %s (%d skipped)\n", read.records,
                      files.size(), files.size() == 1 ? "" : "s", out_dir, read.skipped);
  for (const records::FileCount& f : read.files) {
    if (f.skipped > 0) absl::StrAppendFormat(&out, "  %s: %d skipped\n", f.path, f.skipped);
  }
  return out;
}

}  // namespace launcher
}  // namespace psc
