#include "bench/timed_backend.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psc {
namespace bench {

using compute::Shape;
using Base = compute::ForwardingBackend;

template <typename F>
absl::Status TimedBackend::Time(const std::string& name, const Shape& main, const Shape& kernel,
                                F&& op) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = op();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::string key = absl::StrCat(name, " ", compute::ShapeText(main));
  if (!kernel.empty()) absl::StrAppend(&key, " k", compute::ShapeText(kernel));
  seconds_[key] += took.count();
  return s;
}

namespace {
// "MaxPool 3x3/2 same": a window other than the op's usual one is named.
std::string WithWindow(const char* op, const compute::Window& w, const compute::Window& usual) {
  return w == usual ? std::string(op) : absl::StrCat(op, " ", w.Text());
}
}  // namespace

absl::Status TimedBackend::CopyBytesFromHost(const void* src, size_t bytes, DeviceTensor* dst) {
  return Time("CopyFromHost", dst->shape(), {},
              [&] { return Base::CopyBytesFromHost(src, bytes, dst); });
}
absl::Status TimedBackend::CopyBytesToHost(const DeviceTensor& src, void* dst, size_t bytes) {
  return Time("CopyToHost", src.shape(), {},
              [&] { return Base::CopyBytesToHost(src, dst, bytes); });
}
absl::Status TimedBackend::Conv2D(const DeviceTensor& x, const DeviceTensor& w,
                                  const DeviceTensor* b, const Window& window, bool relu,
                                  DeviceTensor* y) {
  return Time(WithWindow("Conv2D", window, compute::kConv3x3Same), x.shape(), w.shape(),
              [&] { return Base::Conv2D(x, w, b, window, relu, y); });
}
absl::Status TimedBackend::Conv2DBackwardData(const DeviceTensor& dy, const DeviceTensor& w,
                                              const Window& window, DeviceTensor* dx) {
  return Time(WithWindow("Conv2DBackwardData", window, compute::kConv3x3Same), dx->shape(),
              w.shape(), [&] { return Base::Conv2DBackwardData(dy, w, window, dx); });
}
absl::Status TimedBackend::Conv2DBackwardWeights(const DeviceTensor& x, const DeviceTensor& dy,
                                                 const Window& window, DeviceTensor* dw,
                                                 DeviceTensor* db) {
  return Time(WithWindow("Conv2DBackwardWeights", window, compute::kConv3x3Same), x.shape(),
              dw->shape(), [&] { return Base::Conv2DBackwardWeights(x, dy, window, dw, db); });
}
absl::Status TimedBackend::ReluBackward(const DeviceTensor& y, const DeviceTensor& dy,
                                        DeviceTensor* dx) {
  return Time("ReluBackward", y.shape(), {}, [&] { return Base::ReluBackward(y, dy, dx); });
}
absl::Status TimedBackend::Run(absl::string_view op, absl::Span<const DeviceTensor* const> in,
                               const compute::OpAttrs& attrs, absl::Span<DeviceTensor* const> out) {
  const Shape& main = in.empty() || in[0] == nullptr ? Shape{} : in[0]->shape();
  // A pooling window other than 2x2/2 valid is named, as MaxPool 3x3/2 same.
  const bool windowed = absl::StartsWith(op, "MaxPool") || absl::StartsWith(op, "AvgPool");
  const std::string name =
      windowed ? WithWindow(std::string(op).c_str(), attrs.window, compute::kPool2x2)
               : std::string(op);
  return Time(name, main, {}, [&] { return Base::Run(op, in, attrs, out); });
}
absl::Status TimedBackend::SoftmaxCrossEntropy(const DeviceTensor& logits,
                                               absl::Span<const int32_t> labels,
                                               const compute::LossOptions& options,
                                               DeviceTensor* dlogits, double* loss_sum,
                                               int64_t* correct) {
  return Time("SoftmaxCrossEntropy", logits.shape(), {}, [&] {
    return Base::SoftmaxCrossEntropy(logits, labels, options, dlogits, loss_sum, correct);
  });
}

}  // namespace bench
}  // namespace psc
