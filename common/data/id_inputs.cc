#include "common/data/id_inputs.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/data/numpy_images.h"

namespace psc::data {
namespace {

// Element i of an integer array (C order, little-endian as the header
// requires), widened. uint64 above int64's range reads as -1: not an id.
int64_t LoadId(const char* bytes, NpyType type, int64_t i) {
  auto load = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, bytes + i * static_cast<int64_t>(sizeof(v)), sizeof(v));
    return v;
  };
  switch (type) {
    case NpyType::kBool:
    case NpyType::kUint8:
      return load(uint8_t{0});
    case NpyType::kInt8:
      return load(int8_t{0});
    case NpyType::kInt16:
      return load(int16_t{0});
    case NpyType::kUint16:
      return load(uint16_t{0});
    case NpyType::kInt32:
      return load(int32_t{0});
    case NpyType::kUint32:
      return load(uint32_t{0});
    case NpyType::kInt64:
      return load(int64_t{0});
    case NpyType::kUint64: {
      const uint64_t v = load(uint64_t{0});
      return v > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v);
    }
    case NpyType::kFloat32:
    case NpyType::kFloat64:
      break;
  }
  return -1;
}

// "(3,)" or "(1, 4)": element `e` of an example of `shape`, as an index.
std::string Position(const std::vector<int64_t>& shape, int64_t e) {
  std::vector<int64_t> index(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    index[k] = e % shape[k];
    e /= shape[k];
  }
  return index.size() == 1 ? absl::StrCat("(", index[0], ",)")
                           : absl::StrCat("(", absl::StrJoin(index, ", "), ")");
}

}  // namespace

absl::Status CheckIds(const NumpyArray& x, const std::vector<int64_t>& example, int64_t limit,
                      const std::string& table, absl::string_view what) {
  const NpyHeader& h = x.header();
  if (!NpyTypeIsInteger(h.type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " holds ", NpyTypeName(h.type), "; the Embedding \"", table,
        "\" takes integer ids: save them as int32 or int64 (e.g. x.astype(\"int32\"))"));
  }
  const std::vector<int64_t> got(h.shape.begin() + (h.shape.empty() ? 0 : 1), h.shape.end());
  if (h.shape.empty() || got != example) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": examples of shape (", absl::StrJoin(got, ", "),
                     ") for a model input of shape (", absl::StrJoin(example, ", "), ")"));
  }
  const int64_t per = ExampleElements(x);
  const char* bytes = static_cast<const char*>(x.data());
  for (int64_t i = 0; i < h.count; ++i) {
    const int64_t id = LoadId(bytes, h.type, i);
    if (id < 0 || id >= limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " row ", i / per, ", element ", Position(example, i % per), ": id ",
          h.type == NpyType::kUint64 && id < 0 ? std::string("above 2^63") : absl::StrCat(id),
          " is not a row of the Embedding \"", table, "\" (input_dim ", limit, ")"));
    }
  }
  return absl::OkStatus();
}

void ReadIds(const NumpyArray& x, int64_t first, int64_t n, float* out) {
  const int64_t per = ExampleElements(x);
  const char* bytes = static_cast<const char*>(x.data());
  for (int64_t i = first * per; i < (first + n) * per; ++i) {
    *out++ = static_cast<float>(LoadId(bytes, x.header().type, i));
  }
}

}  // namespace psc::data
