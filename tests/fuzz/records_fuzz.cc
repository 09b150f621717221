// Data files as a job reads them through its feature spec: the input is a
// TFRecord file (or, when its first byte is odd, a CSV file) read through
// a spec of every kind of column (float values, int64 ids in a table of 50
// padded from a varlen list, raw uint8 and raw float32 bytes, a class id
// below 10, a weight with a default), with --skip_corrupt_records when the
// second byte is odd. Each record's values are checked and converted, and
// a record that fails leaves the arrays as they were.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/io/string_file.h"
#include "common/records/record_files.h"

namespace {

const psc::records::RowLayout& Layout(bool csv) {
  static const psc::records::RowLayout* layouts[2] = {nullptr, nullptr};
  if (layouts[csv] == nullptr) {
    const char* json =
        csv ? R"({"inputs": {"f": {"feature": ["a", "b"], "kind": "float", "default": 0},
                            "ids": {"feature": ["i", "j", "k"], "kind": "int64"}},
                 "label": {"feature": "y", "kind": "int64", "default": 1},
                 "weight": {"feature": "w", "kind": "float", "default": 1}})"
            : R"({"inputs": {"f": {"kind": "float"},
                            "ids": {"kind": "int64", "varlen": true},
                            "px": {"kind": "bytes", "dtype": "uint8"},
                            "raw": {"kind": "bytes", "dtype": "float32"}},
                 "label": {"feature": "y", "kind": "int64"},
                 "weight": {"feature": "w", "kind": "float", "default": 1}})";
    auto spec = psc::records::ParseFeatureSpec(json, "fuzz.json");
    std::vector<psc::records::InputSlot> inputs = {{"f", {2}, 0}, {"ids", {3}, 50}};
    if (!csv) {
      inputs.push_back({"px", {2, 2}, 0});
      inputs.push_back({"raw", {2}, 0});
    }
    auto layout = psc::records::ResolveLayout(*spec, inputs, {}, {10, 0}, "fuzz.json");
    if (!layout.ok()) __builtin_trap();
    layouts[csv] = new psc::records::RowLayout(*std::move(layout));
  }
  return *layouts[csv];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool csv = data[0] & 1;
  psc::records::ReadOptions options;
  options.format = csv ? psc::records::FileFormat::kCsv : psc::records::FileFormat::kTfRecord;
  options.max_record_bytes = 1 << 20;
  options.skip_corrupt = data[1] & 1;
  const psc::records::RowLayout& layout = Layout(csv);
  psc::records::RowBuffer rows(&layout);
  psc::records::FileCount count;
  (void)psc::records::ReadFileInto(
      psc::io::NewStringFile("fuzz.data",
                             std::string(reinterpret_cast<const char*>(data + 2), size - 2)),
      layout, options, &rows, &count);
  if (rows.rows() != count.records) __builtin_trap();
  (void)rows.Take("x_train", "y_train", "w_train");
  return 0;
}
