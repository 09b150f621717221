#include "common/data/numpy_labels.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psc::data {
namespace {

// Element i as an integer (integer types) or a double (float types). Through
// memcpy: a stored .npz member's elements may sit at any address.
template <typename T>
T Load(const NumpyArray& a, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(a.data()) + i * sizeof(T), sizeof(T));
  return v;
}

// Integer element i; false if it does not fit int64 (a huge uint64).
bool IntegerAt(const NumpyArray& a, int64_t i, int64_t* out) {
  switch (a.header().type) {
    case NpyType::kBool:
    case NpyType::kUint8:
      *out = Load<uint8_t>(a, i);
      return true;
    case NpyType::kInt8:
      *out = Load<int8_t>(a, i);
      return true;
    case NpyType::kInt16:
      *out = Load<int16_t>(a, i);
      return true;
    case NpyType::kUint16:
      *out = Load<uint16_t>(a, i);
      return true;
    case NpyType::kInt32:
      *out = Load<int32_t>(a, i);
      return true;
    case NpyType::kUint32:
      *out = Load<uint32_t>(a, i);
      return true;
    case NpyType::kInt64:
      *out = Load<int64_t>(a, i);
      return true;
    case NpyType::kUint64: {
      const uint64_t v = Load<uint64_t>(a, i);
      if (v > static_cast<uint64_t>(INT64_MAX)) return false;
      *out = static_cast<int64_t>(v);
      return true;
    }
    case NpyType::kFloat32:
    case NpyType::kFloat64:
      return false;
  }
  return false;
}

double NumberAt(const NumpyArray& a, int64_t i) {
  if (a.header().type == NpyType::kFloat32) return Load<float>(a, i);
  if (a.header().type == NpyType::kFloat64) return Load<double>(a, i);
  int64_t v = 0;
  return IntegerAt(a, i, &v) ? static_cast<double>(v) : -1.0;
}

// The first `count` elements as finite floats (any numeric type).
// INVALID_ARGUMENT "<what>: the <noun> of <row> N is <v> (<plural> must be
// finite)", N being element i / per_row, for a NaN, an infinity, a value
// beyond float's range or an integer over 2^63.
absl::StatusOr<std::vector<float>> FiniteFloats(const NumpyArray& a, int64_t count, int64_t per_row,
                                                absl::string_view what, absl::string_view noun,
                                                absl::string_view row, absl::string_view plural) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    double v = 0;
    int64_t k = 0;
    const bool integer = NpyTypeIsInteger(a.header().type);
    const bool over = integer && !IntegerAt(a, i, &k);
    v = integer ? static_cast<double>(k) : NumberAt(a, i);
    if (over || !std::isfinite(v) || std::abs(v) > std::numeric_limits<float>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the ", noun, " of ", row, " ", i / per_row, " is ",
                       over ? std::string("over 2^63") : absl::StrCat(v),
                       over ? "" : absl::StrCat(" (", plural, " must be finite)")));
    }
    out.push_back(static_cast<float>(v));
  }
  return out;
}

absl::Status OutOfRange(absl::string_view what, int64_t example, const std::string& value,
                        int64_t classes) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": label ", value, " of example ", example,
                                                 " is outside [0, ", classes,
                                                 "), the model's classes"));
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> LabelsFromArray(const NumpyArray& array, int64_t classes,
                                                     absl::string_view what) {
  if (classes < 1 || classes > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", classes, " classes"));
  }
  const NpyHeader& h = array.header();
  const std::vector<int64_t>& s = h.shape;
  const bool ids = s.size() == 1 || (s.size() == 2 && s[1] == 1);
  const bool rows = s.size() == 2 && s[1] > 1;
  if (!ids && !rows) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": labels of shape ", h.Text(),
                                                   "; want (N,) or (N, 1) class ids, or (N, ",
                                                   classes, ") one-hot rows"));
  }
  const int64_t n = s[0];
  std::vector<int32_t> labels;
  labels.reserve(static_cast<size_t>(n));
  if (ids) {
    if (!NpyTypeIsInteger(h.type)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", NpyTypeName(h.type),
                       " class ids; want integers (or one-hot rows of (N, ", classes, "))"));
    }
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = 0;
      if (!IntegerAt(array, i, &v)) return OutOfRange(what, i, "over 2^63", classes);
      if (v < 0 || v >= classes) return OutOfRange(what, i, std::to_string(v), classes);
      labels.push_back(static_cast<int32_t>(v));
    }
    return labels;
  }
  if (s[1] != classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": one-hot rows of ", s[1], " columns for a model of ", classes, " classes"));
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t hot = -1;
    for (int64_t c = 0; c < classes; ++c) {
      const double v = NumberAt(array, i * classes + c);
      if (v == 0.0) continue;
      if (v != 1.0 || hot >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": row ", i, " is not one-hot (", v == 1.0 ? "two 1s" : "a value ",
                         v == 1.0 ? "" : absl::StrCat(v), " at column ", c, ")"));
      }
      hot = c;
    }
    if (hot < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": row ", i, " is all zeros, not one-hot"));
    }
    labels.push_back(static_cast<int32_t>(hot));
  }
  return labels;
}

absl::StatusOr<std::vector<int32_t>> BinaryLabelsFromArray(const NumpyArray& array,
                                                           absl::string_view what) {
  const NpyHeader& h = array.header();
  const std::vector<int64_t>& s = h.shape;
  if (!(s.size() == 1 || (s.size() == 2 && s[1] == 1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": labels of shape ", h.Text(), "; binary_crossentropy wants (N,) or (N, 1) of 0/1"));
  }
  std::vector<int32_t> labels;
  labels.reserve(static_cast<size_t>(s[0]));
  for (int64_t i = 0; i < s[0]; ++i) {
    const double v = NumberAt(array, i);
    if (v != 0.0 && v != 1.0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": label ", v, " of example ", i,
                       " is not 0 or 1 (binary_crossentropy; soft targets are not supported)"));
    }
    labels.push_back(v == 1.0 ? 1 : 0);
  }
  return labels;
}

absl::StatusOr<std::vector<float>> TargetsFromArray(const NumpyArray& array, int64_t units,
                                                    absl::string_view what) {
  const NpyHeader& h = array.header();
  const std::vector<int64_t>& s = h.shape;
  const bool fits =
      units >= 1 && ((s.size() == 2 && s[1] == units) || (s.size() == 1 && units == 1));
  if (!fits) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": targets of shape ", h.Text(), "; the model outputs ", units,
                     " unit(s), so a regression wants (N, ", units, ")",
                     units == 1 ? " or (N,)" : "", " of numbers"));
  }
  // The header's element count is the file's, checked when it was read.
  return FiniteFloats(array, s[0] * units, units, what, "target", "example", "targets");
}

absl::StatusOr<std::vector<float>> WeightsFromArray(const NumpyArray& array,
                                                    absl::string_view what) {
  const NpyHeader& h = array.header();
  const std::vector<int64_t>& s = h.shape;
  if (!(s.size() == 1 || (s.size() == 2 && s[1] == 1))) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": sample weights of shape ", h.Text(),
                                                   "; want (N,) or (N, 1), one per example"));
  }
  return FiniteFloats(array, s[0], 1, what, "weight", "row", "weights");
}

}  // namespace psc::data
