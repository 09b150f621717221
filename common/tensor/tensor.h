// float32 tensors as they travel in proto::Tensor: dtype, shape and the
// elements as raw little-endian bytes (never a repeated field).
#ifndef PSC_COMMON_TENSOR_TENSOR_H_
#define PSC_COMMON_TENSOR_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/common.pb.h"

namespace psc {
namespace tensor {

// Raw bytes are the host's floats: pscluster runs on little-endian hosts.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "pscluster needs a little-endian host");

// A model variable's name and shape (float32 elements; a scalar has an empty
// shape), as models declare them and placement splits them over shards.
struct VariableShape {
  std::string name;  // e.g. "conv2d/kernel"
  std::vector<int64_t> shape;
};

// The number of elements of `shape`, or -1 if a dimension is negative or
// the product overflows. A scalar (empty shape) has one element.
int64_t NumElements(absl::Span<const int64_t> shape);

// "[3,3,1,32]".
std::string ShapeString(absl::Span<const int64_t> shape);

// Checks dtype float32, non-negative dimensions, and data holding exactly
// product(shape) floats. INVALID_ARGUMENT naming `what` otherwise.
absl::Status ValidateFloatTensor(const proto::Tensor& tensor, absl::string_view what);

// Fills `out` with `values` and `shape`.
void SetFloatTensor(absl::Span<const int64_t> shape, absl::Span<const float> values,
                    proto::Tensor* out);

// The elements of a valid float tensor.
std::vector<float> FloatValues(const proto::Tensor& tensor);

// The index of the first NaN or infinity in `bytes` (read as floats), or -1.
int64_t FirstNonFinite(absl::string_view bytes);

// Tensor bytes read as floats: the bytes themselves when they are aligned
// (protobuf keeps large strings in malloc'ed, aligned memory), else a copy.
// The bytes must outlive the view.
class FloatView {
 public:
  explicit FloatView(absl::string_view bytes);
  const float* data() const { return data_; }

 private:
  const float* data_ = nullptr;
  std::vector<float> copy_;
};

}  // namespace tensor
}  // namespace psc

#endif  // PSC_COMMON_TENSOR_TENSOR_H_
