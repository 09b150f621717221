#include "common/compute/backend.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"

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

absl::Status CheckCopyMany(absl::Span<const DeviceTensor* const> src,
                           absl::Span<const absl::Span<float>> dst) {
  if (src.size() != dst.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyManyToHost: ", src.size(), " tensors into ", dst.size(), " buffers"));
  }
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == nullptr || static_cast<int64_t>(dst[i].size()) != src[i]->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("CopyManyToHost: buffer ", i, " holds ", dst[i].size(), " floats for shape ",
                       src[i] == nullptr ? std::string("(null)") : ShapeText(src[i]->shape())));
    }
  }
  return absl::OkStatus();
}

absl::Status ComputeBackend::CopyManyToHost(absl::Span<const DeviceTensor* const> src,
                                            absl::Span<const absl::Span<float>> dst) {
  PSC_RETURN_IF_ERROR(CheckCopyMany(src, dst));
  for (size_t i = 0; i < src.size(); ++i) {
    PSC_RETURN_IF_ERROR(CopyToHost(*src[i], dst[i]));
  }
  return absl::OkStatus();
}

absl::Status ComputeBackend::Prepare(absl::Span<const OpSpec> specs) { return absl::OkStatus(); }

const char* ActivationName(Activation f) {
  switch (f) {
    case Activation::kRelu:
      return "relu";
    case Activation::kSigmoid:
      return "sigmoid";
    case Activation::kTanh:
      return "tanh";
    case Activation::kLeakyRelu:
      return "leaky_relu";
  }
  return "unknown";
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
    case Op::kActivation:
      return "Activation";
    case Op::kActivationBackward:
      return "ActivationBackward";
    case Op::kGlobalPool:
      return "GlobalPool";
    case Op::kGlobalPoolBackward:
      return "GlobalPoolBackward";
    case Op::kMultiply:
      return "Multiply";
    case Op::kAvgPool2x2:
      return "AvgPool2x2";
    case Op::kAvgPool2x2Backward:
      return "AvgPool2x2Backward";
    case Op::kSoftmaxCrossEntropy:
      return "SoftmaxCrossEntropy";
  }
  return "unknown";
}

}  // namespace compute
}  // namespace psc
