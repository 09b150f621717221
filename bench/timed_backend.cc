#include "bench/timed_backend.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/compute/conv_ops.h"

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
absl::Status TimedBackend::Run(absl::string_view op, absl::Span<const DeviceTensor* const> in,
                               const compute::OpAttrs& attrs, absl::Span<DeviceTensor* const> out) {
  Shape main = in.empty() || in[0] == nullptr ? Shape{} : in[0]->shape();
  Shape kernel;
  // A pooling window other than 2x2/2 valid is named, as MaxPool 3x3/2
  // same, and a convolution's other than 3x3/1 same; a convolution is keyed
  // by its x and its kernel.
  const bool pool = absl::StartsWith(op, "MaxPool") || absl::StartsWith(op, "AvgPool");
  const bool conv = absl::StartsWith(op, "Conv2D");
  std::string name(op);
  if (pool) name = WithWindow(name.c_str(), attrs.window, compute::kPool2x2);
  if (conv) {
    name = WithWindow(name.c_str(), attrs.window, compute::kConv3x3Same);
    if (op == compute::conv::kConv2D) {
      kernel = in[1]->shape();
    } else if (op == compute::conv::kConv2DBackwardData) {
      main = out[0]->shape();
      kernel = in[1]->shape();
    } else {
      kernel = out[0]->shape();
    }
  }
  return Time(name, main, kernel, [&] { return Base::Run(op, in, attrs, out); });
}
}  // namespace bench
}  // namespace psc
