#include "common/compute/backend.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psc {
namespace compute {

int64_t ShapeSize(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

std::string ShapeText(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::Status WantShape(const char* op, const char* what, const DeviceTensor& t, const Shape& want) {
  if (t.shape() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " has shape ",
                                                 ShapeText(t.shape()), ", want ", ShapeText(want)));
}

absl::Status WantRank(const char* op, const char* what, const DeviceTensor& t, size_t rank) {
  if (t.shape().size() == rank) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", what, " has shape ", ShapeText(t.shape()), ", want rank ", rank));
}

const char* OpName(Op op) {
  switch (op) {
    case Op::kConv2D:
      return "Conv2D";
    case Op::kConv2DBackwardData:
      return "Conv2DBackwardData";
    case Op::kConv2DBackwardWeights:
      return "Conv2DBackwardWeights";
    case Op::kReluBackward:
      return "ReluBackward";
    case Op::kMaxPool2x2:
      return "MaxPool2x2";
    case Op::kMaxPool2x2Backward:
      return "MaxPool2x2Backward";
    case Op::kDense:
      return "Dense";
    case Op::kDenseBackwardData:
      return "DenseBackwardData";
    case Op::kDenseBackwardWeights:
      return "DenseBackwardWeights";
    case Op::kSoftmaxCrossEntropy:
      return "SoftmaxCrossEntropy";
  }
  return "unknown";
}

}  // namespace compute
}  // namespace psc
