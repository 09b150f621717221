#include "common/records/record_files.h"

#include <charconv>
#include <memory>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "common/base/status_macros.h"
#include "common/records/csv_reader.h"
#include "common/tfrecord/example.h"
#include "common/tfrecord/example_scan.h"
#include "common/tfrecord/record_reader.h"
#include "proto/tf_example.pb.h"

namespace psc::records {
namespace {

// An Example's features as AppendFeatures reads them: from the protobuf
// message (any record), or from the scanner (most records, no allocation).
class ProtoFeatures {
 public:
  ProtoFeatures(const tfexample::Example& example, const RowLayout& layout) {
    const auto& features = example.features().feature();
    for (const Column& col : layout.columns) {
      const auto it = features.find(col.spec.features[0]);
      found_.push_back(it == features.end() ? nullptr : &it->second);
    }
  }
  bool found(int c) const { return found_[c] != nullptr; }
  std::optional<ValueKind> kind(int c) const {
    switch (found_[c]->kind_case()) {
      case tfexample::Feature::kFloatList:
        return ValueKind::kFloat;
      case tfexample::Feature::kInt64List:
        return ValueKind::kInt64;
      case tfexample::Feature::kBytesList:
        return ValueKind::kBytes;
      case tfexample::Feature::KIND_NOT_SET:
        break;
    }
    return std::nullopt;
  }
  bool Floats(int c, absl::Span<const float>* out) {
    const auto& v = found_[c]->float_list().value();
    *out = absl::MakeConstSpan(v.data(), v.size());
    return true;
  }
  bool Int64s(int c, absl::Span<const int64_t>* out) {
    const auto& v = found_[c]->int64_list().value();
    static_assert(sizeof(int64_t) == sizeof(*v.data()));
    *out = absl::MakeConstSpan(reinterpret_cast<const int64_t*>(v.data()), v.size());
    return true;
  }
  bool Bytes(int c, std::vector<absl::string_view>* out) {
    out->assign(found_[c]->bytes_list().value().begin(), found_[c]->bytes_list().value().end());
    return true;
  }

 private:
  std::vector<const tfexample::Feature*> found_;
};

class ScannedFeatures {
 public:
  explicit ScannedFeatures(const tfrecord::ExampleScanner* scanner) : scanner_(scanner) {}
  bool found(int c) const { return scanner_->found(c); }
  std::optional<ValueKind> kind(int c) const {
    switch (scanner_->kind(c)) {
      case tfrecord::ExampleScanner::Kind::kFloat:
        return ValueKind::kFloat;
      case tfrecord::ExampleScanner::Kind::kInt64:
        return ValueKind::kInt64;
      case tfrecord::ExampleScanner::Kind::kBytes:
        return ValueKind::kBytes;
      case tfrecord::ExampleScanner::Kind::kEmpty:
        break;
    }
    return std::nullopt;
  }
  bool Floats(int c, absl::Span<const float>* out) {
    if (!scanner_->Floats(c, &floats_)) return false;
    *out = floats_;
    return true;
  }
  bool Int64s(int c, absl::Span<const int64_t>* out) {
    if (!scanner_->Int64s(c, &ints_)) return false;
    *out = ints_;
    return true;
  }
  bool Bytes(int c, std::vector<absl::string_view>* out) { return scanner_->Bytes(c, out); }

 private:
  const tfrecord::ExampleScanner* scanner_;
  std::vector<float> floats_;
  std::vector<int64_t> ints_;
};

// One Example's features into the row buffer, column by column. *malformed
// (scanned features only) when a list did not decode: the caller then
// reads the record through protobuf.
template <typename Features>
absl::Status AppendFeatures(Features& features, const RowLayout& layout, const Where& where,
                            RowBuffer* rows, std::vector<absl::string_view>* bytes,
                            bool* malformed) {
  *malformed = false;
  for (size_t c = 0; c < layout.columns.size(); ++c) {
    const FeatureColumn& spec = layout.columns[c].spec;
    const int ci = static_cast<int>(c);
    if (!features.found(ci)) {
      if (spec.varlen && spec.default_value.empty()) {  // VarLenFeature's: an empty list
        PSC_RETURN_IF_ERROR(rows->AppendInt64s(ci, {}, where));
        continue;
      }
      PSC_RETURN_IF_ERROR(rows->AppendDefault(
          ci, where, absl::StrCat("the record has no feature \"", spec.features[0], "\"")));
      continue;
    }
    const ValueKind kind = features.kind(ci).value_or(spec.kind);  // an empty Feature: none
    if (kind != spec.kind) {
      return absl::InvalidArgumentError(absl::StrCat(where.Text(), ": feature \"", spec.features[0],
                                                     "\" (", spec.key, ") is ", ValueKindName(kind),
                                                     "; the spec says ", ValueKindName(spec.kind)));
    }
    const bool empty = !features.kind(ci).has_value();
    switch (spec.kind) {
      case ValueKind::kFloat: {
        absl::Span<const float> v;
        if (!empty && !features.Floats(ci, &v)) return *malformed = true, absl::OkStatus();
        PSC_RETURN_IF_ERROR(rows->AppendFloats(ci, v, where));
        break;
      }
      case ValueKind::kInt64: {
        absl::Span<const int64_t> v;
        if (!empty && !features.Int64s(ci, &v)) return *malformed = true, absl::OkStatus();
        PSC_RETURN_IF_ERROR(rows->AppendInt64s(ci, v, where));
        break;
      }
      case ValueKind::kBytes:
        bytes->clear();
        if (!empty && !features.Bytes(ci, bytes)) return *malformed = true, absl::OkStatus();
        if (bytes->size() != 1) {
          return absl::InvalidArgumentError(
              absl::StrCat(where.Text(), ": feature \"", spec.features[0], "\" (", spec.key,
                           ") holds ", bytes->size(), " bytes values; want one (raw ",
                           data::NpyTypeName(*spec.dtype), " values)"));
        }
        PSC_RETURN_IF_ERROR(rows->AppendRaw(ci, (*bytes)[0], where));
        break;
    }
  }
  return absl::OkStatus();
}

// A record read into the rows (`s` OK: committed and counted) or not: then
// abandoned, and skipped and counted under skip_corrupt (never a record over
// the limit), else the error.
absl::Status Finish(const absl::Status& s, const ReadOptions& o, RowBuffer* rows,
                    FileCount* count) {
  if (s.ok()) {
    rows->Commit();
    ++count->records;
    return absl::OkStatus();
  }
  rows->Abandon();
  if (!o.skip_corrupt || absl::IsResourceExhausted(s)) return s;
  ++count->skipped;
  if (count->first_skip.empty()) count->first_skip = std::string(s.message());
  return absl::OkStatus();
}

// A record's outcome under skip_corrupt for a reader's own error (not the
// record's values): NOT_FOUND, PERMISSION_DENIED and RESOURCE_EXHAUSTED
// are never damage (a missing file, a record over --max_record_bytes).
bool Skippable(const absl::Status& s, const ReadOptions& o) {
  return o.skip_corrupt && !absl::IsNotFound(s) && !absl::IsPermissionDenied(s) &&
         !absl::IsResourceExhausted(s);
}

void CountSkip(const absl::Status& s, FileCount* count) {
  ++count->skipped;
  if (count->first_skip.empty()) count->first_skip = std::string(s.message());
}

class TfRecordCursor : public RecordCursor {
 public:
  static absl::StatusOr<std::unique_ptr<RecordCursor>> Open(
      std::unique_ptr<io::RandomAccessFile> file, const RowLayout* layout, const ReadOptions& o) {
    PSC_ASSIGN_OR_RETURN(
        std::unique_ptr<tfrecord::RecordReader> reader,
        tfrecord::RecordReader::Open(std::move(file), o.compression, o.max_record_bytes));
    for (const Column& col : layout->columns) {
      if (col.spec.features.size() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            reader->path(), ": \"", col.spec.key, "\" lists ", col.spec.features.size(),
            " features; a TFRecord entry reads one feature (a list of columns is for CSV)"));
      }
    }
    return std::unique_ptr<RecordCursor>(new TfRecordCursor(std::move(reader), layout, o));
  }

  absl::Status Skip(int64_t n, bool* end) override {
    *end = lost_;
    for (; n > 0 && !*end; --n, ++index_) PSC_RETURN_IF_ERROR(reader_->Skip(end));
    return absl::OkStatus();
  }

  absl::Status Next(RowBuffer* rows, FileCount* count, bool* end) override {
    *end = lost_;
    if (lost_) return absl::OkStatus();
    absl::Status s = reader_->Next(&record_, end);
    if (*end) return absl::OkStatus();
    const int64_t index = index_++;
    if (!s.ok()) {
      if (!Skippable(s, o_)) return s;
      CountSkip(s, count);
      // The framing intact: the next record; else the rest of the file is lost.
      lost_ = !reader_->skippable();
      return absl::OkStatus();
    }
    const Where where(path_, index, reader_->record_offset());
    rows->Begin();
    bool malformed = true;
    if (scanner_.Scan(record_)) {
      s = AppendFeatures(scanned_, *layout_, where, rows, &bytes_, &malformed);
    }
    if (malformed) {  // not plainly shaped: protobuf decides
      rows->Abandon();
      s = tfrecord::ParseExample(record_, "", &example_);
      if (!s.ok()) s = tfrecord::ParseExample(record_, where.Text(), &example_);  // its message
      if (s.ok()) {
        ProtoFeatures features(example_, *layout_);
        s = AppendFeatures(features, *layout_, where, rows, &bytes_, &malformed);
      }
    }
    return Finish(s, o_, rows, count);
  }

 private:
  static std::vector<std::string> Names(const RowLayout& layout) {
    std::vector<std::string> names;
    for (const Column& col : layout.columns) names.push_back(col.spec.features[0]);
    return names;
  }

  TfRecordCursor(std::unique_ptr<tfrecord::RecordReader> reader, const RowLayout* layout,
                 const ReadOptions& o)
      : reader_(std::move(reader)),
        layout_(layout),
        o_(o),
        path_(reader_->path()),
        scanner_(Names(*layout)),
        scanned_(&scanner_) {}

  std::unique_ptr<tfrecord::RecordReader> reader_;
  const RowLayout* layout_;
  const ReadOptions o_;
  const std::string path_;
  tfrecord::ExampleScanner scanner_;
  ScannedFeatures scanned_;
  std::vector<absl::string_view> bytes_;
  std::string record_;
  tfexample::Example example_;
  int64_t index_ = 0;
};

// A CSV cell of `kind`, the whole cell: false when it is not such a number.
bool ParseCell(const std::string& cell, ValueKind kind, double* d, int64_t* i) {
  const char* end = cell.data() + cell.size();
  if (kind == ValueKind::kInt64) {
    const auto r = std::from_chars(cell.data(), end, *i);
    return r.ec == std::errc() && r.ptr == end;
  }
  const auto r = std::from_chars(cell.data(), end, *d);
  return r.ec == std::errc() && r.ptr == end;
}

class CsvCursor : public RecordCursor {
 public:
  static absl::StatusOr<std::unique_ptr<RecordCursor>> Open(
      std::unique_ptr<io::RandomAccessFile> file, const RowLayout* layout, const ReadOptions& o) {
    PSC_ASSIGN_OR_RETURN(std::unique_ptr<CsvReader> reader,
                         CsvReader::Open(std::move(file), o.compression, o.max_record_bytes));
    std::unique_ptr<CsvCursor> cursor(new CsvCursor(std::move(reader), layout, o));
    PSC_RETURN_IF_ERROR(cursor->ReadHeader());
    return std::unique_ptr<RecordCursor>(std::move(cursor));
  }

  absl::Status Skip(int64_t n, bool* end) override {
    *end = lost_;
    for (; n > 0 && !*end; --n) PSC_RETURN_IF_ERROR(reader_->Next(&fields_, end));
    return absl::OkStatus();
  }

  absl::Status Next(RowBuffer* rows, FileCount* count, bool* end) override {
    *end = lost_;
    if (lost_) return absl::OkStatus();
    absl::Status s = reader_->Next(&fields_, end);
    if (*end) return absl::OkStatus();
    if (!s.ok()) {
      if (!Skippable(s, o_)) return s;
      CountSkip(s, count);
      lost_ = true;  // the rest of the file is lost
      return absl::OkStatus();
    }
    const Where where = Where::Line(path_, reader_->line());
    rows->Begin();
    if (fields_.size() != header_.size()) {
      s = absl::InvalidArgumentError(absl::StrCat(where.Text(), ": ", fields_.size(),
                                                  " fields; the header has ", header_.size()));
    }
    for (size_t c = 0; c < layout_->columns.size() && s.ok(); ++c) s = AppendColumn(c, where, rows);
    return Finish(s, o_, rows, count);
  }

 private:
  CsvCursor(std::unique_ptr<CsvReader> reader, const RowLayout* layout, const ReadOptions& o)
      : reader_(std::move(reader)), layout_(layout), o_(o), path_(reader_->path()) {}

  // The header row, and each column's cells in the spec's order.
  absl::Status ReadHeader() {
    bool end = false;
    PSC_RETURN_IF_ERROR(reader_->Next(&header_, &end));
    if (end) return absl::InvalidArgumentError(absl::StrCat(path_, ": empty (no header row)"));
    // A UTF-8 byte order mark (spreadsheets write one) is no part of a name.
    if (!header_.empty() && header_[0].rfind("\xEF\xBB\xBF", 0) == 0) header_[0].erase(0, 3);
    absl::flat_hash_map<std::string, int> index;
    for (size_t i = 0; i < header_.size(); ++i) {
      if (!index.emplace(header_[i], static_cast<int>(i)).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(path_, ": the header names the column \"", header_[i], "\" twice"));
      }
    }
    cells_.resize(layout_->columns.size());
    for (size_t c = 0; c < layout_->columns.size(); ++c) {
      const Column& col = layout_->columns[c];
      if (col.spec.kind == ValueKind::kBytes || col.spec.varlen) {
        return absl::InvalidArgumentError(absl::StrCat(
            path_, ": \"", col.spec.key, "\": a CSV cell holds one number (no bytes or varlen)"));
      }
      if (static_cast<int64_t>(col.spec.features.size()) != col.values) {
        return absl::InvalidArgumentError(absl::StrCat(path_, ": \"", col.spec.key, "\" takes ",
                                                       col.values, " values: list its ", col.values,
                                                       " columns under \"feature\""));
      }
      for (const std::string& name : col.spec.features) {
        const auto it = index.find(name);
        if (it == index.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat(path_, ": the header has no column \"", name, "\" (", col.spec.key,
                           "; it has: ", absl::StrJoin(header_, ", "), ")"));
        }
        cells_[c].push_back(it->second);
      }
    }
    return absl::OkStatus();
  }

  // Column c's cells of the row in fields_, parsed and appended.
  absl::Status AppendColumn(size_t c, const Where& where, RowBuffer* rows) {
    const Column& col = layout_->columns[c];
    doubles_.clear();
    ints_.clear();
    for (size_t k = 0; k < cells_[c].size(); ++k) {
      const int at = cells_[c][k];
      const std::string& cell = fields_[at];
      double d = 0;
      int64_t i = 0;
      if (cell.empty()) {
        const std::vector<double>& def = col.spec.default_value;
        if (def.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(
              where.Text(), ", column ", at + 1, " (\"", header_[at],
              "\"): an empty cell and the spec gives \"", col.spec.key, "\" no \"default\""));
        }
        d = def.size() == 1 ? def[0] : def[k];  // ResolveLayout checked the count
        if (col.spec.kind == ValueKind::kInt64) i = static_cast<int64_t>(d);  // integral, < 2^53
      } else if (!ParseCell(cell, col.spec.kind, &d, &i)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where.Text(), ", column ", at + 1, " (\"", header_[at], "\"): \"",
            absl::CHexEscape(cell.substr(0, 40)), cell.size() > 40 ? "..." : "", "\" is not ",
            col.spec.kind == ValueKind::kInt64 ? "an integer" : "a number"));
      }
      doubles_.push_back(d);
      ints_.push_back(i);
    }
    const int ci = static_cast<int>(c);
    return col.spec.kind == ValueKind::kInt64 ? rows->AppendInt64s(ci, ints_, where)
                                              : rows->AppendDoubles(ci, doubles_, where);
  }

  std::unique_ptr<CsvReader> reader_;
  const RowLayout* layout_;
  const ReadOptions o_;
  const std::string path_;
  std::vector<std::string> header_;
  std::vector<std::vector<int>> cells_;
  std::vector<std::string> fields_;
  std::vector<double> doubles_;
  std::vector<int64_t> ints_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RecordCursor>> RecordCursor::Open(
    std::unique_ptr<io::RandomAccessFile> file, const RowLayout* layout,
    const ReadOptions& options) {
  return options.format == FileFormat::kCsv
             ? CsvCursor::Open(std::move(file), layout, options)
             : TfRecordCursor::Open(std::move(file), layout, options);
}

absl::Status ReadFileInto(std::unique_ptr<io::RandomAccessFile> file, const RowLayout& layout,
                          const ReadOptions& options, RowBuffer* rows, FileCount* count) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<RecordCursor> cursor,
                       RecordCursor::Open(std::move(file), &layout, options));
  for (bool end = false;;) {
    PSC_RETURN_IF_ERROR(cursor->Next(rows, count, &end));
    if (end) return absl::OkStatus();
  }
}

const char* FileFormatName(FileFormat format) {
  return format == FileFormat::kCsv ? "csv" : "tfrecord";
}

absl::StatusOr<SplitRead> ReadSplit(io::FileSystem* fs, const std::vector<std::string>& files,
                                    const RowLayout& layout, const ReadOptions& options,
                                    absl::string_view split) {
  RowBuffer rows(&layout);
  SplitRead out;
  for (const std::string& path : files) {
    FileCount count;
    count.path = path;
    PSC_ASSIGN_OR_RETURN(std::unique_ptr<io::RandomAccessFile> file, fs->OpenForRead(path));
    PSC_RETURN_IF_ERROR(ReadFileInto(std::move(file), layout, options, &rows, &count));
    out.records += count.records;
    out.skipped += count.skipped;
    out.files.push_back(std::move(count));
  }
  PSC_ASSIGN_OR_RETURN(out.arrays, rows.Take(absl::StrCat("x_", split), absl::StrCat("y_", split),
                                             absl::StrCat("w_", split)));
  return out;
}

}  // namespace psc::records
