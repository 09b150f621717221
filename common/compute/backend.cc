#include "common/compute/backend.h"

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
