#include "bench/timed_backend.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace psc {
namespace bench {

using compute::DeviceTensor;
using compute::Shape;

template <typename F>
absl::Status TimedBackend::Time(const char* name, const Shape& main, const Shape& kernel, F&& op) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = op();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::string key = absl::StrCat(name, " ", compute::ShapeText(main));
  if (!kernel.empty()) absl::StrAppend(&key, " k", compute::ShapeText(kernel));
  seconds_[key] += took.count();
  return s;
}

absl::Status TimedBackend::CopyFromHost(absl::Span<const float> src, DeviceTensor* dst) {
  return Time("CopyFromHost", dst->shape(), {}, [&] { return inner_->CopyFromHost(src, dst); });
}
absl::Status TimedBackend::CopyToHost(const DeviceTensor& src, absl::Span<float> dst) {
  return Time("CopyToHost", src.shape(), {}, [&] { return inner_->CopyToHost(src, dst); });
}
absl::Status TimedBackend::Conv2D(const DeviceTensor& x, const DeviceTensor& w,
                                  const DeviceTensor& b, bool relu, DeviceTensor* y) {
  return Time("Conv2D", x.shape(), w.shape(), [&] { return inner_->Conv2D(x, w, b, relu, y); });
}
absl::Status TimedBackend::Conv2DBackwardData(const DeviceTensor& dy, const DeviceTensor& w,
                                              DeviceTensor* dx) {
  return Time("Conv2DBackwardData", dx->shape(), w.shape(),
              [&] { return inner_->Conv2DBackwardData(dy, w, dx); });
}
absl::Status TimedBackend::Conv2DBackwardWeights(const DeviceTensor& x, const DeviceTensor& dy,
                                                 DeviceTensor* dw, DeviceTensor* db) {
  return Time("Conv2DBackwardWeights", x.shape(), dw->shape(),
              [&] { return inner_->Conv2DBackwardWeights(x, dy, dw, db); });
}
absl::Status TimedBackend::ReluBackward(const DeviceTensor& y, const DeviceTensor& dy,
                                        DeviceTensor* dx) {
  return Time("ReluBackward", y.shape(), {}, [&] { return inner_->ReluBackward(y, dy, dx); });
}
absl::Status TimedBackend::Activate(compute::Activation f, float alpha, const DeviceTensor& x,
                                    DeviceTensor* y) {
  return Time("Activation", x.shape(), {}, [&] { return inner_->Activate(f, alpha, x, y); });
}
absl::Status TimedBackend::ActivateBackward(compute::Activation f, float alpha,
                                            const DeviceTensor& y, const DeviceTensor& dy,
                                            DeviceTensor* dx) {
  return Time("ActivationBackward", y.shape(), {},
              [&] { return inner_->ActivateBackward(f, alpha, y, dy, dx); });
}
absl::Status TimedBackend::GlobalPool(compute::GlobalPooling kind, const DeviceTensor& x,
                                      DeviceTensor* y) {
  return Time("GlobalPool", x.shape(), {}, [&] { return inner_->GlobalPool(kind, x, y); });
}
absl::Status TimedBackend::GlobalPoolBackward(compute::GlobalPooling kind, const DeviceTensor& x,
                                              const DeviceTensor& dy, DeviceTensor* dx) {
  return Time("GlobalPoolBackward", x.shape(), {},
              [&] { return inner_->GlobalPoolBackward(kind, x, dy, dx); });
}
absl::Status TimedBackend::Multiply(const DeviceTensor& a, const DeviceTensor& b, DeviceTensor* y) {
  return Time("Multiply", a.shape(), {}, [&] { return inner_->Multiply(a, b, y); });
}
absl::Status TimedBackend::AvgPool2x2(const DeviceTensor& x, DeviceTensor* y) {
  return Time("AvgPool2x2", x.shape(), {}, [&] { return inner_->AvgPool2x2(x, y); });
}
absl::Status TimedBackend::AvgPool2x2Backward(const DeviceTensor& x, const DeviceTensor& dy,
                                              DeviceTensor* dx) {
  return Time("AvgPool2x2Backward", x.shape(), {},
              [&] { return inner_->AvgPool2x2Backward(x, dy, dx); });
}
absl::Status TimedBackend::MaxPool2x2(const DeviceTensor& x, DeviceTensor* y) {
  return Time("MaxPool2x2", x.shape(), {}, [&] { return inner_->MaxPool2x2(x, y); });
}
absl::Status TimedBackend::MaxPool2x2Backward(const DeviceTensor& x, const DeviceTensor& dy,
                                              DeviceTensor* dx) {
  return Time("MaxPool2x2Backward", x.shape(), {},
              [&] { return inner_->MaxPool2x2Backward(x, dy, dx); });
}
absl::Status TimedBackend::Dense(const DeviceTensor& x, const DeviceTensor& w,
                                 const DeviceTensor& b, bool relu, DeviceTensor* y) {
  return Time("Dense", x.shape(), w.shape(), [&] { return inner_->Dense(x, w, b, relu, y); });
}
absl::Status TimedBackend::DenseBackwardData(const DeviceTensor& dy, const DeviceTensor& w,
                                             DeviceTensor* dx) {
  return Time("DenseBackwardData", dx->shape(), w.shape(),
              [&] { return inner_->DenseBackwardData(dy, w, dx); });
}
absl::Status TimedBackend::DenseBackwardWeights(const DeviceTensor& x, const DeviceTensor& dy,
                                                DeviceTensor* dw, DeviceTensor* db) {
  return Time("DenseBackwardWeights", x.shape(), dw->shape(),
              [&] { return inner_->DenseBackwardWeights(x, dy, dw, db); });
}
absl::Status TimedBackend::SoftmaxCrossEntropy(const DeviceTensor& logits,
                                               absl::Span<const int32_t> labels, float grad_scale,
                                               DeviceTensor* dlogits, double* loss_sum,
                                               int64_t* correct) {
  return Time("SoftmaxCrossEntropy", logits.shape(), {}, [&] {
    return inner_->SoftmaxCrossEntropy(logits, labels, grad_scale, dlogits, loss_sum, correct);
  });
}

}  // namespace bench
}  // namespace psc
