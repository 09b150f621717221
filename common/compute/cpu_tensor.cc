#include "common/compute/cpu_tensor.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

int Block(Layout layout) {
  switch (layout) {
    case Layout::kBlocked8:
      return 8;
    case Layout::kBlocked16:
      return 16;
    case Layout::kPlain:
      break;
  }
  return 1;
}

}  // namespace

dt OneDnnType(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return dt::bf16;
    case DType::kFloat16:
      return dt::f16;
    default:
      return dt::f32;
  }
}

memory::desc DescFor(const Shape& shape, Layout layout, DType dtype) {
  const dt type = OneDnnType(dtype);
  if (shape.size() == 4) {
    const memory::dims nchw = {shape[0], shape[3], shape[1], shape[2]};
    const tag t = layout == Layout::kBlocked16  ? tag::nChw16c
                  : layout == Layout::kBlocked8 ? tag::nChw8c
                                                : tag::nhwc;
    return memory::desc(nchw, type, t);
  }
  static constexpr tag kRowMajor[] = {tag::a, tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde};
  const memory::dims dims(shape.begin(), shape.end());
  return memory::desc(dims, type, kRowMajor[std::min<size_t>(shape.size(), 5)]);
}

std::optional<Layout> LayoutOf(const Shape& shape, const memory::desc& desc) {
  const DType dtype = desc.data_type() == dt::bf16  ? DType::kBFloat16
                      : desc.data_type() == dt::f16 ? DType::kFloat16
                                                    : DType::kFloat32;
  for (Layout l : {Layout::kPlain, Layout::kBlocked16, Layout::kBlocked8}) {
    if (l != Layout::kPlain && (shape.size() != 4 || shape[3] % Block(l) != 0)) continue;
    if (desc == DescFor(shape, l, dtype)) return l;
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<CpuTensor>> CpuTensor::Create(const Shape& shape, DType dtype) {
  const int64_t elements = ShapeSize(shape);
  if (elements < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Allocate: bad shape ", ShapeText(shape)));
  }
  // Room for the widest blocked layout: C rounded up to 16.
  int64_t room = std::max<int64_t>(elements, 1);
  bool overflow = false;
  if (IsActivationFloat(dtype) && shape.size() == 4 && shape[3] > 0) {
    int64_t padded_c = 0;  // C rounded up to 16, checked: Create is public
    overflow = __builtin_mul_overflow(shape[3] / 16 + (shape[3] % 16 != 0 ? 1 : 0), int64_t{16},
                                      &padded_c) ||
               __builtin_mul_overflow(room / shape[3], padded_c, &room);
  }
  size_t bytes = 0;
  if (overflow || __builtin_mul_overflow(static_cast<size_t>(room), DTypeSize(dtype), &bytes) ||
      bytes > SIZE_MAX - 63) {
    return absl::InvalidArgumentError(
        absl::StrCat("Allocate: shape ", ShapeText(shape), " is too large"));
  }
  bytes = (bytes + 63) / 64 * 64;
  void* data = std::aligned_alloc(64, bytes);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("Allocate: out of host memory for ", ShapeText(shape)));
  }
  std::memset(data, 0, bytes);
  return std::unique_ptr<CpuTensor>(new CpuTensor(shape, dtype, data));
}

CpuTensor::CpuTensor(Shape shape, DType dtype, void* data)
    : DeviceTensor(std::move(shape), dtype), data_(data) {}

CpuTensor::~CpuTensor() { std::free(data_); }

const memory::desc& CpuTensor::desc() const {
  for (const auto& [layout, desc] : descs_) {
    if (layout == layout_) return desc;
  }
  descs_.emplace_back(layout_, DescFor(shape(), layout_, dtype()));
  return descs_.back().second;
}

Shape CpuTensor::PhysicalNhwc() const {
  const Shape& s = shape();
  if (layout_ == Layout::kPlain) return s;
  const int b = Block(layout_);
  return {s[0] * (s[3] / b), s[1], s[2], b};
}

memory Reorderer::As(const CpuTensor& t, const memory::desc& want, dnnl::stream& stream, int slot) {
  if (t.desc() == want) return memory(want, engine_, const_cast<float*>(t.data()));
  memory* s = nullptr;
  for (Scratch& sc : scratch_) {
    if (sc.slot == slot && sc.memory.get_desc() == want) s = &sc.memory;
  }
  if (s == nullptr) {
    scratch_.push_back({slot, memory(want, engine_)});
    s = &scratch_.back().memory;
  }
  Run(t.desc(), t.data(), want, s->get_data_handle(), stream);
  return *s;
}

const float* Reorderer::Plain(const CpuTensor& t, dnnl::stream& stream, int slot) {
  if (t.layout() == Layout::kPlain) return t.data();
  return static_cast<const float*>(
      As(t, DescFor(t.shape(), Layout::kPlain, t.dtype()), stream, slot).get_data_handle());
}

void Reorderer::Run(const memory::desc& from, const void* src, const memory::desc& to, void* dst,
                    dnnl::stream& stream) {
  Cached* c = nullptr;
  for (Cached& r : reorders_) {
    if (r.from == from && r.to == to) c = &r;
  }
  if (c == nullptr) {
    reorders_.push_back({from, to, dnnl::reorder(memory(from, engine_), memory(to, engine_))});
    c = &reorders_.back();
  }
  memory a(from, engine_, const_cast<void*>(src)), b(to, engine_, dst);
  c->prim.execute(stream, a, b);
}

absl::StatusOr<ChannelLayout> ChannelLayoutOf(const char* op, const DeviceTensor& x) {
  const Shape& s = x.shape();
  if (s.size() == 2) return ChannelLayout{s[0], 1, 1, s[1]};
  if (s.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x has shape ", ShapeText(s), ", want [N,H,W,C] or [N,C]"));
  }
  const Shape phys = Cpu(x).PhysicalNhwc();  // [N*C/b, H, W, b]
  return ChannelLayout{s[0], s[3] / phys[3], s[1] * s[2], phys[3]};
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
