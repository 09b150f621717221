#include "common/keras/weights_source.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace psc {
namespace keras {

int64_t RowsOf(const compute::Shape& shape) { return shape.empty() ? 1 : shape[0]; }

int64_t RowElements(const compute::Shape& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

absl::Status WholeWeights::Copy(const std::vector<float>& from, int v, int64_t first, int64_t count,
                                float* out) const {
  const compute::Shape& shape = model_->variables()[v].shape;
  const int64_t width = RowElements(shape);
  if (first < 0 || count < 0 || first + count > RowsOf(shape) ||
      static_cast<int64_t>(from.size()) != compute::ShapeSize(shape)) {
    return absl::InvalidArgumentError(absl::StrCat(model_->variables()[v].name, ": rows [", first,
                                                   ", ", first + count, ") of ", from.size(),
                                                   " values for ", compute::ShapeText(shape)));
  }
  if (count > 0) {
    std::memcpy(out, from.data() + first * width,
                static_cast<size_t>(count * width) * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status WholeWeights::Variable(int v, int64_t first, int64_t count, float* out) {
  if (v < 0 || static_cast<size_t>(v) >= params_->size()) {
    return absl::InvalidArgumentError(absl::StrCat("no values for variable ", v));
  }
  return Copy((*params_)[v], v, first, count, out);
}

absl::Status WholeWeights::Slot(int v, int slot, int64_t first, int64_t count, float* out) {
  if (slots_ == nullptr || v < 0 || static_cast<size_t>(v) >= slots_->size() || slot < 0 ||
      static_cast<size_t>(slot) >= (*slots_)[v].size()) {
    return absl::InvalidArgumentError(absl::StrCat("no slot ", slot, " of variable ", v));
  }
  return Copy((*slots_)[v][slot], v, first, count, out);
}

}  // namespace keras
}  // namespace psc
