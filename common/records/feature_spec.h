// The feature spec of a job's data files: which feature of a
// tf.train.Example (or which columns of a CSV row) each model input, the
// label and the example weight read, as a small JSON file:
//
//   {"inputs": {"image": {"feature": "image_raw", "kind": "bytes", "dtype": "uint8"},
//               "dense": {"feature": "f", "kind": "float", "shape": [13]},
//               "tags":  {"feature": "tags", "kind": "int64", "varlen": true}},
//    "label":  {"feature": "label", "kind": "int64"},
//    "weight": {"feature": "w", "kind": "float"}}
//
// An entry's keys: "feature" (the Example's feature name, or the CSV column;
// for CSV a list of columns, one per value; default: the input's name),
// "kind" (the Example's list: "float", "int64" or "bytes"; CSV: "float" or
// "int64"), "shape" (the values' shape; default: the model input's),
// "dtype" (bytes only, required: the raw bytes' element type, as
// tf.io.decode_raw's out_type, little-endian), "varlen" (int64 or float: a
// list of any length up to the shape's, padded with "pad", default 0, as
// an embedding bag's ids before the model pools them), "default" (a number,
// or a list of the shape's values: the record lacks the feature, or the
// CSV cell is empty, as FixedLenFeature's default_value and decode_csv's
// record_defaults). Unknown keys are refused. Pure; thread-safe.
#ifndef PSC_COMMON_RECORDS_FEATURE_SPEC_H_
#define PSC_COMMON_RECORDS_FEATURE_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data/npy.h"

namespace psc::records {

enum class ValueKind { kFloat, kInt64, kBytes };
const char* ValueKindName(ValueKind kind);

struct FeatureColumn {
  std::string key;                    // the input's name; "label" or "weight"
  std::vector<std::string> features;  // one name, or (CSV) one column per value
  ValueKind kind = ValueKind::kFloat;
  std::vector<int64_t> shape;          // empty: the model's (an input's) or [] (a scalar)
  bool has_shape = false;              // "shape" was given ([] included)
  std::optional<data::NpyType> dtype;  // bytes: the raw elements' type
  bool varlen = false;
  double pad = 0;
  std::vector<double> default_value;  // empty: none; one value: every element
};

struct FeatureSpec {
  std::vector<FeatureColumn> inputs;  // in name order
  FeatureColumn label;
  std::optional<FeatureColumn> weight;
};

// The spec in `json`. INVALID_ARGUMENT naming `where` (the file) and the
// entry for: text that is not a JSON object; no "inputs" or no "label";
// an unknown key; a kind or dtype not listed; a shape that is not a list of
// positive integers or holds more than 2^31 values; "dtype" on a kind other
// than bytes, or bytes without it (string features are not read); varlen on
// bytes; a default that is not a number or the shape's count of numbers,
// or a fractional or out-of-range one for int64; a "feature" list of a
// length other than the shape's values (each name one CSV column).
absl::StatusOr<FeatureSpec> ParseFeatureSpec(absl::string_view json, absl::string_view where);

// The spec back as JSON (two-space indents): what ParseFeatureSpec reads.
std::string FeatureSpecJson(const FeatureSpec& spec);

// The values of `shape`: their product (1 for []).
int64_t ShapeValues(const std::vector<int64_t>& shape);

}  // namespace psc::records

#endif  // PSC_COMMON_RECORDS_FEATURE_SPEC_H_
