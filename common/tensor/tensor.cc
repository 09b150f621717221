#include "common/tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/checked_size.h"

namespace psc {
namespace tensor {

int64_t NumElements(absl::Span<const int64_t> shape) {
  absl::StatusOr<int64_t> n =
      base::ElementCount(shape, std::numeric_limits<int64_t>::max(), "shape");
  return n.ok() ? *n : -1;
}

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::Status ValidateFloatTensor(const proto::Tensor& tensor, absl::string_view what) {
  if (tensor.dtype() != proto::DT_FLOAT32) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": dtype ", proto::DataType_Name(tensor.dtype()), ", want DT_FLOAT32"));
  }
  absl::StatusOr<uint64_t> want =
      base::ByteSize(tensor.shape(), sizeof(float), base::kMaxTensorBytes,
                     absl::StrCat(what, ": shape ", ShapeString(tensor.shape())));
  if (!want.ok()) return want.status();
  if (static_cast<uint64_t>(tensor.data().size()) != *want) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", tensor.data().size(),
                                                   " bytes of data for shape ",
                                                   ShapeString(tensor.shape()), ", want ", *want));
  }
  return absl::OkStatus();
}

void SetFloatTensor(absl::Span<const int64_t> shape, absl::Span<const float> values,
                    proto::Tensor* out) {
  out->set_dtype(proto::DT_FLOAT32);
  out->mutable_shape()->Assign(shape.begin(), shape.end());
  out->set_data(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

std::vector<float> FloatValues(const proto::Tensor& tensor) {
  std::vector<float> out(tensor.data().size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), tensor.data().data(), out.size() * sizeof(float));
  return out;
}

int64_t FirstNonFinite(absl::string_view bytes) {
  // A float is NaN or infinite iff its exponent bits are all ones. Per block,
  // two floats per 64-bit word: adding 0x00800000 to a lane's masked
  // exponent carries into the lane's top bit exactly when they are all ones
  // (and never out of the lane). No early exit, so the loop vectorizes; only
  // a block that has one is scanned for its index.
  constexpr size_t kBlock = 2048;  // floats
  const size_t n = bytes.size() / sizeof(float);
  const char* p = bytes.data();
  for (size_t start = 0; start < n; start += kBlock) {
    const size_t end = std::min(n, start + kBlock);
    size_t i = start;
    uint64_t any = 0;
    for (; i + 2 <= end; i += 2) {
      uint64_t two;
      std::memcpy(&two, p + i * sizeof(float), sizeof(two));
      any |= ((two & 0x7f8000007f800000ull) + 0x0080000000800000ull) & 0x8000000080000000ull;
    }
    if (i < end) {
      uint32_t one;
      std::memcpy(&one, p + i * sizeof(float), sizeof(one));
      any |= ((one & 0x7f800000u) + 0x00800000u) & 0x80000000u;
    }
    if (any == 0) continue;
    for (size_t k = start; k < end; ++k) {
      uint32_t bits;
      std::memcpy(&bits, p + k * sizeof(float), sizeof(bits));
      if ((bits & 0x7f800000u) == 0x7f800000u) return static_cast<int64_t>(k);
    }
  }
  return -1;
}

FloatView::FloatView(absl::string_view bytes) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
    data_ = reinterpret_cast<const float*>(bytes.data());
  } else {
    copy_.resize(bytes.size() / sizeof(float));
    if (!copy_.empty()) std::memcpy(copy_.data(), bytes.data(), copy_.size() * sizeof(float));
    data_ = copy_.data();
  }
}

}  // namespace tensor
}  // namespace psc
