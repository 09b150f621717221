#include "common/tfrecord/example.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psc {
namespace tfrecord {
namespace {

// What a bytes value holds, where its first bytes say so.
std::string BytesKind(const std::string& v) {
  if (v.size() >= 8 && v.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0) return " (PNG)";
  if (v.size() >= 3 && v.compare(0, 3, "\xff\xd8\xff", 3) == 0) return " (JPEG)";
  return "";
}

template <typename List>
std::string Values(const List& list, int max_values) {
  std::string out;
  const int n = std::min(list.value_size(), max_values);
  for (int i = 0; i < n; ++i) absl::StrAppend(&out, i == 0 ? "" : " ", list.value(i));
  if (list.value_size() > n) absl::StrAppend(&out, " ...");
  return out;
}

}  // namespace

absl::Status ParseExample(absl::string_view record, absl::string_view where,
                          tfexample::Example* example) {
  if (record.size() > static_cast<size_t>(INT32_MAX) ||
      !example->ParseFromArray(record.data(), static_cast<int>(record.size()))) {
    return absl::DataLossError(
        absl::StrCat(where, ": the record is not a tf.train.Example (", record.size(), " bytes)"));
  }
  return absl::OkStatus();
}

const char* FeatureKind(const tfexample::Feature& f) {
  switch (f.kind_case()) {
    case tfexample::Feature::kBytesList:
      return "bytes";
    case tfexample::Feature::kFloatList:
      return "float";
    case tfexample::Feature::kInt64List:
      return "int64";
    case tfexample::Feature::KIND_NOT_SET:
      break;
  }
  return "empty";
}

int64_t FeatureLength(const tfexample::Feature& f) {
  switch (f.kind_case()) {
    case tfexample::Feature::kBytesList:
      return f.bytes_list().value_size();
    case tfexample::Feature::kFloatList:
      return f.float_list().value_size();
    case tfexample::Feature::kInt64List:
      return f.int64_list().value_size();
    case tfexample::Feature::KIND_NOT_SET:
      break;
  }
  return 0;
}

std::string DescribeExample(const tfexample::Example& example, int max_values) {
  // protobuf's map iterates in no fixed order: sorted by name here.
  std::map<std::string, const tfexample::Feature*> sorted;
  for (const auto& [name, feature] : example.features().feature()) sorted[name] = &feature;
  size_t width = 0;
  for (const auto& [name, f] : sorted) width = std::max(width, name.size());
  std::string out;
  for (const auto& [name, f] : sorted) {
    std::string values;
    switch (f->kind_case()) {
      case tfexample::Feature::kBytesList: {
        const auto& list = f->bytes_list();
        const int n = std::min(list.value_size(), max_values);
        for (int i = 0; i < n; ++i) {
          absl::StrAppend(&values, i == 0 ? "" : ", ", list.value(i).size(), " bytes",
                          BytesKind(list.value(i)));
        }
        if (list.value_size() > n) absl::StrAppend(&values, ", ...");
        break;
      }
      case tfexample::Feature::kFloatList:
        values = Values(f->float_list(), max_values);
        break;
      case tfexample::Feature::kInt64List:
        values = Values(f->int64_list(), max_values);
        break;
      case tfexample::Feature::KIND_NOT_SET:
        break;
    }
    absl::StrAppendFormat(&out, "  %-*s  %s[%d]  %s\n", static_cast<int>(width), name,
                          FeatureKind(*f), FeatureLength(*f), values);
  }
  return out;
}

}  // namespace tfrecord
}  // namespace psc
