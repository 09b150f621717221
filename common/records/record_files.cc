#include "common/records/record_files.h"

#include <charconv>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "common/base/status_macros.h"
#include "common/records/csv_reader.h"
#include "common/tfrecord/example.h"
#include "common/tfrecord/record_reader.h"
#include "proto/tf_example.pb.h"

namespace psc::records {
namespace {

// One Example's features into the row buffer, column by column.
absl::Status AppendExample(const tfexample::Example& example, const RowLayout& layout,
                           absl::string_view where, RowBuffer* rows) {
  const auto& features = example.features().feature();
  for (size_t c = 0; c < layout.columns.size(); ++c) {
    const FeatureColumn& spec = layout.columns[c].spec;
    const int ci = static_cast<int>(c);
    const auto it = features.find(spec.features[0]);
    if (it == features.end()) {
      PSC_RETURN_IF_ERROR(rows->AppendDefault(
          ci, where, absl::StrCat("the record has no feature \"", spec.features[0], "\"")));
      continue;
    }
    const tfexample::Feature& f = it->second;
    const ValueKind kind = f.kind_case() == tfexample::Feature::kFloatList   ? ValueKind::kFloat
                           : f.kind_case() == tfexample::Feature::kInt64List ? ValueKind::kInt64
                           : f.kind_case() == tfexample::Feature::kBytesList ? ValueKind::kBytes
                                                                             : spec.kind;
    if (kind != spec.kind) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": feature \"", spec.features[0],
                                                     "\" (", spec.key, ") is ", ValueKindName(kind),
                                                     "; the spec says ", ValueKindName(spec.kind)));
    }
    switch (spec.kind) {
      case ValueKind::kFloat:
        PSC_RETURN_IF_ERROR(rows->AppendFloats(
            ci, absl::MakeConstSpan(f.float_list().value().data(), f.float_list().value_size()),
            where));
        break;
      case ValueKind::kInt64: {
        static_assert(sizeof(int64_t) == sizeof(f.int64_list().value(0)));
        PSC_RETURN_IF_ERROR(rows->AppendInt64s(
            ci,
            absl::MakeConstSpan(reinterpret_cast<const int64_t*>(f.int64_list().value().data()),
                                f.int64_list().value_size()),
            where));
        break;
      }
      case ValueKind::kBytes:
        if (f.bytes_list().value_size() != 1) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": feature \"", spec.features[0], "\" (", spec.key, ") holds ",
                           f.bytes_list().value_size(), " bytes values; want one (raw ",
                           data::NpyTypeName(*spec.dtype), " values)"));
        }
        PSC_RETURN_IF_ERROR(rows->AppendRaw(ci, f.bytes_list().value(0), where));
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status ReadTfRecordFile(std::unique_ptr<io::RandomAccessFile> file, const RowLayout& layout,
                              const ReadOptions& o, RowBuffer* rows, FileCount* count) {
  PSC_ASSIGN_OR_RETURN(
      std::unique_ptr<tfrecord::RecordReader> reader,
      tfrecord::RecordReader::Open(std::move(file), o.compression, o.max_record_bytes));
  const std::string path = reader->path();
  std::string record;
  tfexample::Example example;
  for (int64_t index = 0;; ++index) {
    bool end = false;
    absl::Status s = reader->Next(&record, &end);
    if (end) return absl::OkStatus();
    if (!s.ok()) {
      if (!o.skip_corrupt || absl::IsNotFound(s) || absl::IsPermissionDenied(s)) return s;
      ++count->skipped;
      if (reader->skippable()) continue;  // the framing is intact: the next record
      return absl::OkStatus();            // the rest of the file is lost
    }
    const std::string where =
        absl::StrCat(path, ": record ", index, " at offset ", reader->record_offset());
    rows->Begin();
    s = tfrecord::ParseExample(record, where, &example);
    if (s.ok()) s = AppendExample(example, layout, where, rows);
    if (!s.ok()) {
      rows->Abandon();
      if (!o.skip_corrupt) return s;
      ++count->skipped;
      continue;
    }
    rows->Commit();
    ++count->records;
  }
}

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

absl::Status ReadCsvFile(std::unique_ptr<io::RandomAccessFile> file, const RowLayout& layout,
                         const ReadOptions& o, RowBuffer* rows, FileCount* count) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<CsvReader> reader,
                       CsvReader::Open(std::move(file), o.compression, o.max_record_bytes));
  const std::string path = reader->path();
  std::vector<std::string> header;
  bool end = false;
  PSC_RETURN_IF_ERROR(reader->Next(&header, &end));
  if (end) return absl::InvalidArgumentError(absl::StrCat(path, ": empty (no header row)"));
  absl::flat_hash_map<std::string, int> index;
  for (size_t i = 0; i < header.size(); ++i) {
    if (!index.emplace(header[i], static_cast<int>(i)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": the header names the column \"", header[i], "\" twice"));
    }
  }
  // Each column's cells, in the spec's order.
  std::vector<std::vector<int>> cells(layout.columns.size());
  for (size_t c = 0; c < layout.columns.size(); ++c) {
    const Column& col = layout.columns[c];
    if (col.spec.kind == ValueKind::kBytes || col.spec.varlen) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": \"", col.spec.key, "\": a CSV cell holds one number (no bytes or varlen)"));
    }
    if (static_cast<int64_t>(col.spec.features.size()) != col.values) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": \"", col.spec.key, "\" takes ",
                                                     col.values, " values: list its ", col.values,
                                                     " columns under \"feature\""));
    }
    for (const std::string& name : col.spec.features) {
      const auto it = index.find(name);
      if (it == index.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": the header has no column \"", name, "\" (", col.spec.key,
                         "; it has: ", absl::StrJoin(header, ", "), ")"));
      }
      cells[c].push_back(it->second);
    }
  }
  std::vector<std::string> fields;
  std::vector<double> doubles;
  std::vector<int64_t> ints;
  while (true) {
    absl::Status s = reader->Next(&fields, &end);
    if (end) return absl::OkStatus();
    if (!s.ok()) {
      if (!o.skip_corrupt || absl::IsNotFound(s)) return s;
      ++count->skipped;  // the rest of the file is lost
      return absl::OkStatus();
    }
    const std::string where = absl::StrCat(path, ": line ", reader->line());
    rows->Begin();
    if (fields.size() != header.size()) {
      s = absl::InvalidArgumentError(
          absl::StrCat(where, ": ", fields.size(), " fields; the header has ", header.size()));
    }
    for (size_t c = 0; c < layout.columns.size() && s.ok(); ++c) {
      const Column& col = layout.columns[c];
      doubles.clear();
      ints.clear();
      for (size_t k = 0; k < cells[c].size() && s.ok(); ++k) {
        const int at = cells[c][k];
        const std::string& cell = fields[at];
        double d = 0;
        int64_t i = 0;
        if (cell.empty()) {
          const std::vector<double>& def = col.spec.default_value;
          if (def.empty()) {
            s = absl::InvalidArgumentError(absl::StrCat(
                where, ", column ", at + 1, " (\"", header[at],
                "\"): an empty cell and the spec gives \"", col.spec.key, "\" no \"default\""));
            break;
          }
          d = def.size() == 1 ? def[0] : def[k];
          i = static_cast<int64_t>(d);
        } else if (!ParseCell(cell, col.spec.kind, &d, &i)) {
          s = absl::InvalidArgumentError(absl::StrCat(
              where, ", column ", at + 1, " (\"", header[at], "\"): \"",
              absl::CHexEscape(cell.substr(0, 40)), cell.size() > 40 ? "..." : "", "\" is not ",
              col.spec.kind == ValueKind::kInt64 ? "an integer" : "a number"));
          break;
        }
        doubles.push_back(d);
        ints.push_back(i);
      }
      if (!s.ok()) break;
      s = col.spec.kind == ValueKind::kInt64
              ? rows->AppendInt64s(static_cast<int>(c), ints, where)
              : rows->AppendDoubles(static_cast<int>(c), doubles, where);
    }
    if (!s.ok()) {
      rows->Abandon();
      if (!o.skip_corrupt) return s;
      ++count->skipped;
      continue;
    }
    rows->Commit();
    ++count->records;
  }
}

}  // namespace

absl::Status ReadFileInto(std::unique_ptr<io::RandomAccessFile> file, const RowLayout& layout,
                          const ReadOptions& options, RowBuffer* rows, FileCount* count) {
  return options.format == FileFormat::kCsv
             ? ReadCsvFile(std::move(file), layout, options, rows, count)
             : ReadTfRecordFile(std::move(file), layout, options, rows, count);
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
