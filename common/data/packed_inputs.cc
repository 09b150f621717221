#include "common/data/packed_inputs.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/data/id_inputs.h"
#include "common/data/numpy_images.h"

namespace psc::data {
namespace {

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // the model's shapes, checked when it was built
  return n;
}

// An attention mask's values: each 0 or 1, as the executor's mask takes
// them (Keras would read any nonzero value as 1). x's examples were checked
// to be `shape`.
absl::Status CheckMask(const NumpyArray& x, const std::vector<int64_t>& shape,
                       absl::string_view what) {
  const int64_t per = Elements(shape);
  std::vector<float> values(static_cast<size_t>(per));
  const Preprocessing none;
  for (int64_t i = 0; i < x.header().shape[0]; ++i) {
    ReadExamples(x, none, i, 1, values.data());
    for (int64_t j = 0; j < per; ++j) {
      if (values[j] != 0.0f && values[j] != 1.0f) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " row ", i, ", element ", j, ": ", values[j],
                         " in an attention mask, which holds 1 (attend) or 0 (do not)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string PackedArrayNames(const std::string& prefix, const std::vector<PackedInput>& inputs) {
  std::vector<std::string> names;
  for (const PackedInput& in : inputs) names.push_back(absl::StrCat(prefix, "/", in.name));
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<NumpyArray> PackInputs(const std::map<std::string, NumpyArray>& arrays,
                                      const std::string& prefix,
                                      const std::vector<PackedInput>& inputs,
                                      absl::string_view what) {
  std::vector<const NumpyArray*> found;
  std::vector<std::string> found_names;  // the arrays' own names
  std::vector<std::string> missing;
  int64_t total = 0;
  for (const PackedInput& in : inputs) {
    const std::string name = absl::StrCat(prefix, "/", in.name);
    auto it = arrays.find(name);
    // A model of one input may take the plain array.
    if (it == arrays.end() && inputs.size() == 1) it = arrays.find(prefix);
    found.push_back(it == arrays.end() ? nullptr : &it->second);
    found_names.push_back(it == arrays.end() ? name : it->first);
    if (it == arrays.end()) missing.push_back(name);
    total = std::max(total, in.offset + Elements(in.shape));
  }
  if (missing.size() == inputs.size()) {
    if (arrays.count(prefix) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": the model has ", inputs.size(), " inputs; give one array for each, ",
          PackedArrayNames(prefix, inputs), ", instead of '", prefix, "'"));
    }
    return absl::NotFoundError(
        absl::StrCat(what, " has none of ", PackedArrayNames(prefix, inputs)));
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has no array '", absl::StrJoin(missing, "', '"), "' (the model's ",
                     inputs.size(), " inputs need ", PackedArrayNames(prefix, inputs), ")"));
  }
  int64_t n = -1;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string name = absl::StrCat(what, ": ", found_names[k]);
    if (inputs[k].id_limit > 0) {
      PSC_RETURN_IF_ERROR(
          CheckIds(*found[k], inputs[k].shape, inputs[k].id_limit, inputs[k].table, name));
    } else {
      PSC_RETURN_IF_ERROR(CheckExamples(*found[k], inputs[k].shape, name));
      PSC_RETURN_IF_ERROR(CheckFinite(*found[k], name));
      if (inputs[k].mask) PSC_RETURN_IF_ERROR(CheckMask(*found[k], inputs[k].shape, name));
    }
    const int64_t count = found[k]->header().shape[0];
    if (n >= 0 && count != n) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", found_names[k], " has ", count,
                                                     " examples, ", found_names[0], " ", n));
    }
    n = count;
  }
  // Checked before the packed array's bytes are allocated: at most an
  // array's limit (numpy_file.h).
  if (total > 0 && static_cast<uint64_t>(n) > kMaxNumpyArrayBytes / sizeof(float) / total) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", n, " examples of ", total,
                                                   " values are over ", kMaxNumpyArrayBytes >> 30,
                                                   " GiB as float32: too many to pack"));
  }
  std::string bytes(static_cast<size_t>(n * total) * sizeof(float), '\0');
  float* out = reinterpret_cast<float*>(bytes.data());
  const Preprocessing none;
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      float* at = out + i * total + inputs[k].offset;
      if (inputs[k].id_limit > 0) {
        ReadIds(*found[k], i, 1, at);
      } else {
        ReadExamples(*found[k], none, i, 1, at);
      }
    }
  }
  return NumpyArray::FromElements(NpyType::kFloat32, {n, total}, std::move(bytes));
}

}  // namespace psc::data
