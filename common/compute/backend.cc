#include "common/compute/backend.h"

#include <algorithm>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/float_formats.h"
#include "common/base/status_macros.h"
#include "common/compute/elementwise_ops.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {

int64_t ShapeSize(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

std::string ShapeText(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

const char* PaddingName(Padding padding) { return padding == Padding::kSame ? "same" : "valid"; }

WindowExtent WindowAlong(int64_t in, int64_t size, int64_t stride, Padding padding) {
  WindowExtent e;
  if (in < 1 || size < 1 || stride < 1) return e;
  if (padding == Padding::kValid) {
    e.out = in < size ? 0 : (in - size) / stride + 1;
    return e;
  }
  e.out = (in - 1) / stride + 1;  // ceil(in / stride), without overflow
  // (out - 1) * stride <= in - 1, so the total is at most size - 1.
  const int64_t total = std::max<int64_t>((e.out - 1) * stride - in + size, 0);
  e.before = total / 2;
  e.after = total - e.before;
  return e;
}

Shape Window::Output(const Shape& x, int64_t k) const {
  if (x.size() != 4) return {};
  return {x[0], Rows(x[1]).out, Cols(x[2]).out, k};
}

std::string Window::Text() const {
  auto pair = [](int64_t a, int64_t b) {
    return a == b ? absl::StrCat(a) : absl::StrCat(a, "x", b);
  };
  std::string text =
      absl::StrCat(height, "x", width, "/", pair(stride_h, stride_w), " ", PaddingName(padding));
  if (dilation_h != 1 || dilation_w != 1) {
    absl::StrAppend(&text, " dilation ", pair(dilation_h, dilation_w));
  }
  if (groups != 1) absl::StrAppend(&text, " groups ", groups);
  return text;
}

bool Window::operator<(const Window& o) const {
  return std::tie(height, width, stride_h, stride_w, padding, dilation_h, dilation_w, groups) <
         std::tie(o.height, o.width, o.stride_h, o.stride_w, o.padding, o.dilation_h, o.dilation_w,
                  o.groups);
}

absl::Status CheckWindow(const char* op, const Window& window, const Shape& x) {
  if (window.height < 1 || window.width < 1 || window.stride_h < 1 || window.stride_w < 1 ||
      window.dilation_h < 1 || window.dilation_w < 1 || window.groups < 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": window ", window.Text(),
                                                   " has a size, stride, dilation or groups < 1"));
  }
  // Bounded so that a span ((size - 1) * dilation + 1) cannot overflow.
  constexpr int64_t kMax = int64_t{1} << 31;
  for (int64_t v : {window.height, window.width, window.stride_h, window.stride_w,
                    window.dilation_h, window.dilation_w, window.groups}) {
    if (v > kMax) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": window ", window.Text(), " has a size, stride, dilation or groups over 2^31"));
    }
  }
  if (x.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x has shape ", ShapeText(x), ", want rank 4"));
  }
  if (window.Rows(x[1]).out < 1 || window.Cols(x[2]).out < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": window ", window.Text(), " leaves no output of x ", ShapeText(x)));
  }
  return absl::OkStatus();
}

absl::Status CheckPoolWindow(const char* op, const Window& window, const Shape& x) {
  if (window.dilation_h != 1 || window.dilation_w != 1 || window.groups != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": window ", window.Text(), " has a dilation or groups, which pooling does not"));
  }
  return CheckWindow(op, window, x);
}

absl::Status CheckConvKernel(const char* op, const char* what, const Window& window, int64_t c,
                             int64_t k, const Shape& kernel) {
  if (window.groups < 1 || c % window.groups != 0 || k % window.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", c, " input and ", k,
                                                   " output channels do not split into ",
                                                   window.groups, " groups"));
  }
  const Shape want = window.Kernel(c, k);
  if (kernel == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", what, " has shape ", ShapeText(kernel), ", want ", ShapeText(want)));
}

absl::Status WantFloat(const char* op, const char* what, const DeviceTensor& t) {
  if (IsActivationFloat(t.dtype())) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " is ", DTypeName(t.dtype()),
                                                 ", want float32, bfloat16 or float16"));
}

absl::Status WantVariable(const char* op, const char* what, const DeviceTensor* t) {
  if (t == nullptr || t->dtype() == DType::kFloat32) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", what, " is ", DTypeName(t->dtype()), ", want float32"));
}

absl::Status WantTensor(const char* op, const char* what, const DeviceTensor& t, DType dtype,
                        const Shape& want) {
  if (t.dtype() != dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", what, " is ", DTypeName(t.dtype()), ", want ", DTypeName(dtype)));
  }
  if (t.shape() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " has shape ",
                                                 ShapeText(t.shape()), ", want ", ShapeText(want)));
}

absl::Status WantShape(const char* op, const char* what, const DeviceTensor& t, const Shape& want) {
  PSC_RETURN_IF_ERROR(WantFloat(op, what, t));
  if (t.shape() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " has shape ",
                                                 ShapeText(t.shape()), ", want ", ShapeText(want)));
}

absl::Status WantRank(const char* op, const char* what, const DeviceTensor& t, size_t rank) {
  PSC_RETURN_IF_ERROR(WantFloat(op, what, t));
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
    if (src[i] != nullptr && src[i]->dtype() != DType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("CopyManyToHost: tensor ", i, " is ",
                                                     DTypeName(src[i]->dtype()), ", want float32"));
    }
    if (src[i] == nullptr || static_cast<int64_t>(dst[i].size()) != src[i]->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("CopyManyToHost: buffer ", i, " holds ", dst[i].size(), " floats for shape ",
                       src[i] == nullptr ? std::string("(null)") : ShapeText(src[i]->shape())));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceTensor>> ComputeBackend::Allocate(const Shape& shape,
                                                                       DType dtype) {
  const int64_t elements = ShapeSize(shape);
  size_t bytes = 0;
  if (elements < 0 ||
      __builtin_mul_overflow(static_cast<size_t>(elements), DTypeSize(dtype), &bytes) ||
      bytes > (size_t{1} << 62)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Allocate: bad shape ", ShapeText(shape), " of ", DTypeName(dtype)));
  }
  return AllocateTensor(shape, dtype);
}

namespace {

// Whether a host copy of `elements` values of `dtype` fits `t` (floats
// fit a low-precision tensor, converted).
absl::Status CheckHostCopy(const char* op, const DeviceTensor& t, DType dtype, size_t elements) {
  if (t.dtype() != dtype && !(dtype == DType::kFloat32 && IsLowPrecision(t.dtype()))) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", DTypeName(dtype), " values for a ",
                                                   DTypeName(t.dtype()), " tensor"));
  }
  if (static_cast<int64_t>(elements) != t.size()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", elements, " ", DTypeName(dtype),
                                                   " values for shape ", ShapeText(t.shape())));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status CopyIn(ComputeBackend* be, absl::Span<const T> src, DeviceTensor* dst) {
  PSC_RETURN_IF_ERROR(CheckHostCopy("CopyFromHost", *dst, DTypeOf<T>::value, src.size()));
  if (src.empty()) return absl::OkStatus();  // its data() may be null
  if constexpr (std::is_same_v<T, float>) {
    if (IsLowPrecision(dst->dtype())) {
      std::vector<uint16_t> bits(src.size());
      const bool bf16 = dst->dtype() == DType::kBFloat16;
      for (size_t i = 0; i < src.size(); ++i) {
        bits[i] = bf16 ? FloatToBfloat16(src[i]) : FloatToFloat16(src[i]);
      }
      return be->CopyBytesFromHost(bits.data(), bits.size() * 2, dst);
    }
  }
  return be->CopyBytesFromHost(src.data(), src.size() * sizeof(T), dst);
}

template <typename T>
absl::Status CopyOut(ComputeBackend* be, const DeviceTensor& src, absl::Span<T> dst) {
  PSC_RETURN_IF_ERROR(CheckHostCopy("CopyToHost", src, DTypeOf<T>::value, dst.size()));
  if (dst.empty()) return absl::OkStatus();
  if constexpr (std::is_same_v<T, float>) {
    if (IsLowPrecision(src.dtype())) {
      std::vector<uint16_t> bits(dst.size());
      PSC_RETURN_IF_ERROR(be->CopyBytesToHost(src, bits.data(), bits.size() * 2));
      const bool bf16 = src.dtype() == DType::kBFloat16;
      for (size_t i = 0; i < dst.size(); ++i) {
        dst[i] = bf16 ? Bfloat16ToFloat(bits[i]) : Float16ToFloat(bits[i]);
      }
      return absl::OkStatus();
    }
  }
  return be->CopyBytesToHost(src, dst.data(), dst.size() * sizeof(T));
}

}  // namespace

absl::Status ComputeBackend::CopyFromHost(absl::Span<const float> src, DeviceTensor* dst) {
  return CopyIn(this, src, dst);
}
absl::Status ComputeBackend::CopyFromHost(absl::Span<const int32_t> src, DeviceTensor* dst) {
  return CopyIn(this, src, dst);
}
absl::Status ComputeBackend::CopyFromHost(absl::Span<const int64_t> src, DeviceTensor* dst) {
  return CopyIn(this, src, dst);
}
absl::Status ComputeBackend::CopyFromHost(absl::Span<const double> src, DeviceTensor* dst) {
  return CopyIn(this, src, dst);
}
absl::Status ComputeBackend::CopyToHost(const DeviceTensor& src, absl::Span<float> dst) {
  return CopyOut(this, src, dst);
}
absl::Status ComputeBackend::CopyToHost(const DeviceTensor& src, absl::Span<int32_t> dst) {
  return CopyOut(this, src, dst);
}
absl::Status ComputeBackend::CopyToHost(const DeviceTensor& src, absl::Span<int64_t> dst) {
  return CopyOut(this, src, dst);
}
absl::Status ComputeBackend::CopyToHost(const DeviceTensor& src, absl::Span<double> dst) {
  return CopyOut(this, src, dst);
}

absl::Status ComputeBackend::CopyManyToHost(absl::Span<const DeviceTensor* const> src,
                                            absl::Span<const absl::Span<float>> dst) {
  PSC_RETURN_IF_ERROR(CheckCopyMany(src, dst));
  for (size_t i = 0; i < src.size(); ++i) {
    PSC_RETURN_IF_ERROR(CopyToHost(*src[i], dst[i]));
  }
  return absl::OkStatus();
}

absl::Status CheckDense(const char* op, const DeviceTensor& x, const DeviceTensor& w,
                        const DeviceTensor& y, int64_t* n, int64_t* k, int64_t* m) {
  PSC_RETURN_IF_ERROR(WantFloat(op, "x", x));
  PSC_RETURN_IF_ERROR(WantFloat(op, "y", y));
  PSC_RETURN_IF_ERROR(WantRank(op, "w", w, 2));
  *k = w.shape()[0];
  *m = w.shape()[1];
  const bool batched = x.shape().size() >= 2 && y.shape().size() >= 2 &&
                       x.shape()[0] == y.shape()[0] && *k >= 1 && *m >= 1;
  const int64_t rows = batched ? y.size() / *m : 0;
  // x.size() = rows x K, checked by division (no product to overflow).
  const bool rows_fit = rows == 0 ? x.size() == 0 : x.size() % rows == 0 && x.size() / rows == *k;
  if (!batched || y.size() % *m != 0 || !rows_fit) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": x ", ShapeText(x.shape()), ", kernel ", ShapeText(w.shape()), " and ",
        ShapeText(y.shape()), " are not rows of K inputs, [K,M] and the same rows of M outputs"));
  }
  *n = rows;
  return absl::OkStatus();
}

absl::Status ComputeBackend::Prepare(absl::Span<const OpSpec> specs) { return absl::OkStatus(); }

absl::Status ComputeBackend::Run(absl::string_view op, absl::Span<const DeviceTensor* const> in,
                                 const OpAttrs& attrs, absl::Span<DeviceTensor* const> out) {
  const RegisteredKernel* kernel = kernels().Find(op);
  if (kernel == nullptr) {
    return absl::UnimplementedError(absl::StrCat(name(), " has no kernel for ", op));
  }
  if (in.size() != static_cast<size_t>(kernel->inputs) ||
      out.size() != static_cast<size_t>(kernel->outputs)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", in.size(), " inputs and ", out.size(),
                                                   " outputs, want ", kernel->inputs, " and ",
                                                   kernel->outputs));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == nullptr && ((kernel->optional.inputs >> i) & 1) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": input ", i, " is null"));
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == nullptr && ((kernel->optional.outputs >> i) & 1) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": output ", i, " is null"));
    }
  }
  if (kernel->dtypes != KernelDtypes::kAny || kernel->takes != nullptr) {
    auto refused = [&](const DeviceTensor* t) {
      return t != nullptr && !KernelTakes(kernel->dtypes, t->dtype());
    };
    auto low = [](const DeviceTensor* t) { return t != nullptr && IsLowPrecision(t->dtype()); };
    const bool any_low =
        std::any_of(in.begin(), in.end(), low) || std::any_of(out.begin(), out.end(), low);
    if (std::any_of(in.begin(), in.end(), refused) ||
        std::any_of(out.begin(), out.end(), refused) ||
        (any_low && kernel->takes != nullptr && !kernel->takes(in, attrs, out))) {
      return RunInFloat32(op, *kernel, in, attrs, out);
    }
  }
  return kernel->run(in, attrs, out);
}

absl::StatusOr<ComputeBackend::CastCopy*> ComputeBackend::Float32Copy(const Shape& shape) {
  for (const std::unique_ptr<CastCopy>& c : cast_copies_) {
    if (!c->busy && c->tensor->shape() == shape) {
      c->busy = true;
      return c.get();
    }
  }
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTensor> t, Allocate(shape, DType::kFloat32));
  cast_copies_.push_back(std::make_unique<CastCopy>());
  cast_copies_.back()->tensor = std::move(t);
  cast_copies_.back()->busy = true;
  return cast_copies_.back().get();
}

absl::Status ComputeBackend::RunInFloat32(absl::string_view op, const RegisteredKernel& kernel,
                                          absl::Span<const DeviceTensor* const> in,
                                          const OpAttrs& attrs,
                                          absl::Span<DeviceTensor* const> out) {
  const RegisteredKernel* cast = kernels().Find(elementwise::kCast);
  if (cast == nullptr) {
    return absl::UnimplementedError(absl::StrCat(name(), " has no kernel for ", op, " on ",
                                                 "bfloat16 or float16 tensors, and no Cast"));
  }
  std::vector<CastCopy*> used;
  absl::Status status = [&]() -> absl::Status {
    auto cast_into = [&](const DeviceTensor& x, DeviceTensor* y) {
      OpAttrs a;
      a.dtype = y->dtype();
      const DeviceTensor* cin[] = {&x};
      DeviceTensor* cout[] = {y};
      return cast->run(cin, a, cout);
    };
    std::vector<const DeviceTensor*> in32(in.begin(), in.end());
    std::vector<DeviceTensor*> out32(out.begin(), out.end());
    for (const DeviceTensor*& t : in32) {
      if (t == nullptr || !IsLowPrecision(t->dtype())) continue;
      PSC_ASSIGN_OR_RETURN(CastCopy * c, Float32Copy(t->shape()));
      used.push_back(c);
      PSC_RETURN_IF_ERROR(cast_into(*t, c->tensor.get()));
      t = c->tensor.get();
    }
    for (DeviceTensor*& t : out32) {
      if (t == nullptr || !IsLowPrecision(t->dtype())) continue;
      PSC_ASSIGN_OR_RETURN(CastCopy * c, Float32Copy(t->shape()));
      used.push_back(c);
      t = c->tensor.get();
    }
    PSC_RETURN_IF_ERROR(kernel.run(in32, attrs, out32));
    for (size_t i = 0; i < out.size(); ++i) {
      if (out32[i] != out[i]) PSC_RETURN_IF_ERROR(cast_into(*out32[i], out[i]));
    }
    return absl::OkStatus();
  }();
  for (CastCopy* c : used) c->busy = false;
  return status;
}

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
    case Activation::kElu:
      return "elu";
    case Activation::kSelu:
      return "selu";
    case Activation::kSoftplus:
      return "softplus";
    case Activation::kSoftsign:
      return "softsign";
    case Activation::kHardSigmoid:
      return "hard_sigmoid";
    case Activation::kHardSigmoidKeras2:
      return "hard_sigmoid (Keras 2)";
    case Activation::kClippedRelu:
      return "relu (clipped)";
    case Activation::kExponential:
      return "exponential";
    case Activation::kGelu:
      return "gelu";
    case Activation::kSilu:
      return "silu";
    case Activation::kSoftmax:
      return "softmax";
  }
  return "unknown";
}

bool ComputeBackend::ShapesFit(const OpSpec& spec) const {
  const auto positive = [](const Shape& shape) {
    return std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d >= 1; });
  };
  return positive(spec.input) && positive(spec.kernel);
}

bool ComputeBackend::Supports(const OpSpec& spec) const {
  if (!ShapesFit(spec)) return false;
  const RegisteredKernel* kernel = kernels().Find(spec.op);
  if (kernel == nullptr) return false;
  return kernel->accepts != nullptr ? kernel->accepts(spec) : !spec.input.empty();
}

absl::Status CheckCopyBlock(const DeviceTensor& x, int64_t x_cols, int64_t x_first,
                            const DeviceTensor& y, int64_t y_cols, int64_t y_first, int64_t rows,
                            int64_t cols) {
  if (&x == &y) return absl::InvalidArgumentError("CopyBlock: y is x");
  PSC_RETURN_IF_ERROR(WantFloat("CopyBlock", "x", x));
  PSC_RETURN_IF_ERROR(WantFloat("CopyBlock", "y", y));
  if (rows < 0 || cols < 0 || x_cols < 0 || y_cols < 0 || x_first < 0 || y_first < 0 ||
      x_first > x_cols - cols || y_first > y_cols - cols) {
    return absl::InvalidArgumentError(absl::StrCat("CopyBlock: columns [", x_first, ", +", cols,
                                                   ") of ", x_cols, " to [", y_first, ", +", cols,
                                                   ") of ", y_cols, " over ", rows, " rows"));
  }
  // rows * cols within each tensor's size: no overflow, as both are sizes.
  if (x_cols != 0 && x.size() != rows * x_cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyBlock: x ", ShapeText(x.shape()), " is not ", rows, " x ", x_cols));
  }
  if (y_cols != 0 && y.size() != rows * y_cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyBlock: y ", ShapeText(y.shape()), " is not ", rows, " x ", y_cols));
  }
  return absl::OkStatus();
}

}  // namespace compute
}  // namespace psc
