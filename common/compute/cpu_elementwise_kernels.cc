#include "common/compute/cpu_elementwise_kernels.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_elementwise.h"
#include "common/compute/cpu_onednn_eltwise.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/elementwise_ops.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

// Below this many values a copy runs on one thread.
constexpr int64_t kParallelValues = int64_t{1} << 16;

// dy's elements in y's layout (plain or blocked): its own where it is held
// so, else a reorder.
absl::StatusOr<const float*> InLayoutOfY(CpuKernelContext& cpu, const char* op,
                                         const DeviceTensor& dy, const DeviceTensor& y) {
  if (Cpu(dy).layout() == Cpu(y).layout()) return Cpu(dy).data();
  return cpu.InLayoutOf(op, dy, y, ReorderSlot::kFirst);
}

// Elementwise on the raw data, in the input's layout; softmax over the
// logical last axis, on plain rows.
// Activate and ActivateBackward's state: the backend, and oneDNN's
// primitives for the functions it vectorizes (gelu, sigmoid, tanh,
// softmax), which our loops compute a value at a time through libm.
struct ActivationState {
  explicit ActivationState(CpuKernelContext* c) : cpu(c), onednn(c) {}
  CpuKernelContext* cpu;
  OneDnnEltwise onednn;
};

// The 16-bit paths run relu with `in` and `out` of one dtype (TakesRelu16
// lets no other through ComputeBackend::Run).
absl::Status Relu16Only(const char* op, const OpAttrs& a, const DeviceTensor& in,
                        const DeviceTensor& out) {
  if (a.activation != Activation::kRelu || in.dtype() != out.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": 16-bit tensors only for relu with one dtype (", DTypeName(in.dtype()),
                     " and ", DTypeName(out.dtype()), ")"));
  }
  return absl::OkStatus();
}

absl::Status ActivateKernel(ActivationState& s, KernelInputs in, const OpAttrs& a,
                            KernelOutputs out) {
  CpuKernelContext& cpu = *s.cpu;
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(elementwise::kActivate, "x", x));
  cpu.UseThreads();
  PSC_RETURN_IF_ERROR(WantShape(elementwise::kActivate, "y", *y, x.shape()));
  if (IsLowPrecision(x.dtype())) {  // relu, on the bits (TakesRelu16)
    PSC_RETURN_IF_ERROR(Relu16Only(elementwise::kActivate, a, x, *y));
    cpu::Relu16(static_cast<const uint16_t*>(Cpu(x).raw()), static_cast<uint16_t*>(Cpu(y).raw()),
                x.size());
    Cpu(y).set_layout(Cpu(x).layout());
    return absl::OkStatus();
  }
  if (a.activation == Activation::kSoftmax) {
    PSC_ASSIGN_OR_RETURN(const float* xv,
                         cpu.Plain(elementwise::kActivate, x, ReorderSlot::kFirst));
    const int64_t cols = x.shape().empty() ? 1 : x.shape().back();
    if (x.size() > 0) {
      PSC_RETURN_IF_ERROR(
          s.onednn.Softmax(elementwise::kActivate, xv, Data(y), x.size() / cols, cols));
    }
    Cpu(y).set_layout(Layout::kPlain);
    return absl::OkStatus();
  }
  if (OneDnnEltwise::Covers(a.activation)) {
    PSC_RETURN_IF_ERROR(
        s.onednn.Forward(elementwise::kActivate, a.activation, Cpu(x).data(), Data(y), x.size()));
  } else {
    cpu::Activate(a.activation, a.alpha, Cpu(x).data(), Data(y), x.size());
  }
  Cpu(y).set_layout(Cpu(x).layout());
  return absl::OkStatus();
}

// In y's layout (dy brought to it), as Activate left it.
absl::Status ActivateBackwardKernel(ActivationState& s, KernelInputs in, const OpAttrs& a,
                                    KernelOutputs out) {
  CpuKernelContext& cpu = *s.cpu;
  constexpr const char* kOp = elementwise::kActivateBackward;
  const DeviceTensor &y = *in[0], &dy = *in[1];
  DeviceTensor* dx = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "y", y));
  cpu.UseThreads();
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, y.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, y.shape()));
  if (IsLowPrecision(dx->dtype())) {  // relu, on the bits (TakesRelu16)
    PSC_RETURN_IF_ERROR(Relu16Only(kOp, a, y, *dx));
    const CpuTensor& yt = Cpu(y);
    return cpu.RunOneDnn(kOp, [&] {
      const void* dyv =
          cpu.Reordered(dy, DescFor(y.shape(), yt.layout(), dx->dtype()), ReorderSlot::kSecond)
              .get_data_handle();
      cpu::ReluBackward16(dx->dtype() == DType::kBFloat16, static_cast<const uint16_t*>(yt.raw()),
                          static_cast<const uint16_t*>(dyv), static_cast<uint16_t*>(Cpu(dx).raw()),
                          y.size());
      Cpu(dx).set_layout(yt.layout());
    });
  }
  if (a.activation == Activation::kSoftmax) {
    PSC_ASSIGN_OR_RETURN(const float* yv, cpu.Plain(kOp, y, ReorderSlot::kFirst));
    PSC_ASSIGN_OR_RETURN(const float* dyv, cpu.Plain(kOp, dy, ReorderSlot::kSecond));
    const int64_t cols = y.shape().empty() ? 1 : y.shape().back();
    if (y.size() > 0) {
      PSC_RETURN_IF_ERROR(s.onednn.SoftmaxBackward(kOp, yv, dyv, Data(dx), y.size() / cols, cols));
    }
    Cpu(dx).set_layout(Layout::kPlain);
    return absl::OkStatus();
  }
  const CpuTensor& yt = Cpu(y);
  PSC_ASSIGN_OR_RETURN(const float* dyv, InLayoutOfY(cpu, kOp, dy, y));
  if (a.activation == Activation::kGelu) {  // y is gelu's input x
    PSC_RETURN_IF_ERROR(s.onednn.GeluBackward(kOp, yt.data(), dyv, Data(dx), y.size()));
  } else {
    cpu::ActivateBackward(a.activation, a.alpha, yt.data(), dyv, Data(dx), y.size());
  }
  Cpu(dx).set_layout(yt.layout());
  return absl::OkStatus();
}

// In y's layout (dy brought to it), as the Conv2D or Dense before it left
// y; in place (dx == dy) reads one stream fewer.
absl::Status ReluBackwardKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs&,
                                KernelOutputs out) {
  constexpr const char* kOp = elementwise::kReluBackward;
  const DeviceTensor &y = *in[0], &dy = *in[1];
  DeviceTensor* dx = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "y", y));
  cpu.UseThreads();
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, y.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, y.shape()));
  const CpuTensor& yt = Cpu(y);
  if (y.dtype() == DType::kFloat32 && dy.dtype() == DType::kFloat32 &&
      dx->dtype() == DType::kFloat32) {
    PSC_ASSIGN_OR_RETURN(const float* dyv, InLayoutOfY(cpu, kOp, dy, y));
    cpu::ReluBackward(yt.data(), dyv, Data(dx), y.size());  // blocked layouts hold no padding
    Cpu(dx).set_layout(yt.layout());
    return absl::OkStatus();
  }
  // In dx's dtype: y and dy converted to it (and to y's layout) where they
  // are not held so.
  return cpu.RunOneDnn(kOp, [&] {
    const dnnl::memory::desc want = DescFor(y.shape(), yt.layout(), dx->dtype());
    const void* yv = cpu.Reordered(y, want, ReorderSlot::kFirst).get_data_handle();
    const void* dyv = cpu.Reordered(dy, want, ReorderSlot::kSecond).get_data_handle();
    if (dx->dtype() == DType::kFloat32) {
      cpu::ReluBackward(static_cast<const float*>(yv), static_cast<const float*>(dyv), Data(dx),
                        y.size());
    } else {
      cpu::ReluBackward16(dx->dtype() == DType::kBFloat16, static_cast<const uint16_t*>(yv),
                          static_cast<const uint16_t*>(dyv), static_cast<uint16_t*>(Cpu(dx).raw()),
                          y.size());
    }
    Cpu(dx).set_layout(yt.layout());
  });
}

// On the plain layout: y_in made plain into y first where y is not it or
// is blocked, then each row's block copied.
absl::Status CopyBlockKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs& a,
                             KernelOutputs out) {
  constexpr const char* kOp = elementwise::kCopyBlock;
  const DeviceTensor &x = *in[0], &y_in = *in[1];
  DeviceTensor* y = out[0];
  const OpAttrs::Block& k = a.block;
  cpu.UseThreads();
  PSC_RETURN_IF_ERROR(
      CheckCopyBlock(x, k.x_cols, k.x_first, *y, k.y_cols, k.y_first, k.rows, k.cols));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "y_in", y_in, y->shape()));
  // Bytes, in any one dtype (TakesOneDtype): Plain keeps a tensor's dtype.
  const size_t e = DTypeSize(y->dtype());
  PSC_ASSIGN_OR_RETURN(const float* xp, cpu.Plain(kOp, x, ReorderSlot::kFirst));
  const char* xv = reinterpret_cast<const char*>(xp);
  char* yv = static_cast<char*>(Cpu(y).raw());
  if (&y_in != y || Cpu(*y).layout() != Layout::kPlain) {
    PSC_ASSIGN_OR_RETURN(const float* rest, cpu.Plain(kOp, y_in, ReorderSlot::kSecond));
    if (static_cast<const void*>(rest) != yv) {
      std::memcpy(yv, rest, static_cast<size_t>(y->size()) * e);
    }
  }
  // A recurrent layer's step copies a few thousand values: threads cost
  // more than they save there.
#pragma omp parallel for schedule(static) if (k.rows * k.cols >= kParallelValues)
  for (int64_t r = 0; r < k.rows; ++r) {
    std::memcpy(yv + (r * k.y_cols + k.y_first) * e, xv + (r * k.x_cols + k.x_first) * e,
                static_cast<size_t>(k.cols) * e);
  }
  Cpu(y).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

// The ops of two operands of one shape run on the plain layout: a product
// of a mask made on the host, a sum with a gradient of any layout.
template <typename F>
absl::Status Binary(CpuKernelContext& cpu, const char* op, KernelInputs in, KernelOutputs out,
                    F loop) {
  const DeviceTensor &a = *in[0], &b = *in[1];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(op, "a", a));
  cpu.UseThreads();
  PSC_RETURN_IF_ERROR(WantShape(op, "b", b, a.shape()));
  PSC_RETURN_IF_ERROR(WantShape(op, "y", *y, a.shape()));
  PSC_ASSIGN_OR_RETURN(const float* av, cpu.Plain(op, a, ReorderSlot::kFirst));
  PSC_ASSIGN_OR_RETURN(const float* bv, cpu.Plain(op, b, ReorderSlot::kSecond));
  loop(av, bv, Data(y), a.size());
  Cpu(y).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

absl::Status ScaleKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs& a,
                         KernelOutputs out) {
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(elementwise::kScale, "x", x));
  cpu.UseThreads();
  PSC_RETURN_IF_ERROR(WantShape(elementwise::kScale, "y", *y, x.shape()));
  PSC_ASSIGN_OR_RETURN(const float* xv, cpu.Plain(elementwise::kScale, x, ReorderSlot::kFirst));
  cpu::Scale(xv, a.scalar, Data(y), x.size());
  Cpu(y).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

absl::Status CopyKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs&, KernelOutputs out) {
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(elementwise::kCopy, "x", x));
  PSC_RETURN_IF_ERROR(WantShape(elementwise::kCopy, "y", *y, x.shape()));
  if (&x == y) return absl::InvalidArgumentError("Copy: y is x");
  // Bytes, in any one dtype (TakesOneDtype): Plain keeps a tensor's dtype.
  PSC_ASSIGN_OR_RETURN(const float* xv, cpu.Plain(elementwise::kCopy, x, ReorderSlot::kFirst));
  std::memcpy(Cpu(y).raw(), xv, static_cast<size_t>(x.size()) * DTypeSize(x.dtype()));
  Cpu(y).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

// Copy and CopyBlock move bytes: they take bfloat16 and float16 when all of
// their tensors are of one dtype (Run gives them float32 copies otherwise).
bool TakesOneDtype(KernelInputs in, const OpAttrs&, KernelOutputs out) {
  const DType d = out[0]->dtype();
  return std::all_of(in.begin(), in.end(), [d](const DeviceTensor* t) { return t->dtype() == d; });
}

// Activate and ActivateBackward run relu on 16-bit tensors of one dtype as
// they are (the others, through float32 copies).
bool TakesRelu16(KernelInputs in, const OpAttrs& a, KernelOutputs out) {
  return a.activation == Activation::kRelu && TakesOneDtype(in, a, out);
}
// Add adds bfloat16 tensors (all three) in float32, rounding once.
bool TakesAddBf16(KernelInputs in, const OpAttrs& a, KernelOutputs out) {
  return out[0]->dtype() == DType::kBFloat16 && TakesOneDtype(in, a, out);
}

// A oneDNN reorder between the dtypes: y keeps x's layout when it has x's
// shape, else both are plain (a reshape).
absl::Status CastKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs&, KernelOutputs out) {
  constexpr const char* kOp = elementwise::kCast;
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(elementwise::CheckCast(x, *y));
  cpu.UseThreads();
  // Blocked: y in x's layout; plain (any rank): one row of elements.
  const bool blocked = x.shape() == y->shape() && Cpu(x).layout() != Layout::kPlain;
  const Layout layout = blocked ? Cpu(x).layout() : Layout::kPlain;
  const Shape shape = blocked ? y->shape() : Shape{y->size()};
  return cpu.RunOneDnn(kOp, [&] {
    const void* src = Cpu(x).raw();
    if (!blocked && Cpu(x).layout() != Layout::kPlain) {
      src = cpu.Reordered(x, DescFor(x.shape(), Layout::kPlain, x.dtype()), ReorderSlot::kFirst)
                .get_data_handle();
    }
    cpu.Reorder(DescFor(shape, layout, x.dtype()), src, DescFor(shape, layout, y->dtype()),
                Cpu(y).raw());
    Cpu(y).set_layout(layout);
  });
}

absl::Status ExtremumGradientKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs& attrs,
                                    KernelOutputs out) {
  constexpr const char* kOp = elementwise::kExtremumGradient;
  const DeviceTensor &a = *in[0], &b = *in[1], &dy = *in[2];
  DeviceTensor* da = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "a", a));
  cpu.UseThreads();
  PSC_RETURN_IF_ERROR(WantShape(kOp, "b", b, a.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, a.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "da", *da, a.shape()));
  // Three operands, two reorder slots: dy made plain in da's place first
  // when it is not, then a and b plain.
  const float* dyv = Cpu(dy).data();
  if (Cpu(dy).layout() != Layout::kPlain) {
    PSC_ASSIGN_OR_RETURN(const float* plain, cpu.Plain(kOp, dy, ReorderSlot::kFirst));
    std::memcpy(Data(da), plain, static_cast<size_t>(dy.size()) * sizeof(float));
    Cpu(da).set_layout(Layout::kPlain);
    dyv = Data(da);
  }
  PSC_ASSIGN_OR_RETURN(const float* av, cpu.Plain(kOp, a, ReorderSlot::kFirst));
  PSC_ASSIGN_OR_RETURN(const float* bv, cpu.Plain(kOp, b, ReorderSlot::kSecond));
  cpu::ExtremumGradient(attrs.max, av, bv, dyv, Data(da), a.size());
  Cpu(da).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

absl::Status AddKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs&, KernelOutputs out) {
  if (out[0]->dtype() == DType::kBFloat16) {  // TakesAddBf16: every tensor bfloat16
    if (in[0]->dtype() != DType::kBFloat16 || in[1]->dtype() != DType::kBFloat16) {
      return absl::InvalidArgumentError("Add: a bfloat16 y takes bfloat16 a and b");
    }
    return Binary(
        c, elementwise::kAdd, in, out, [](const float* a, const float* b, float* y, int64_t n) {
          cpu::AddBf16(reinterpret_cast<const uint16_t*>(a), reinterpret_cast<const uint16_t*>(b),
                       reinterpret_cast<uint16_t*>(y), n);
        });
  }
  return Binary(c, elementwise::kAdd, in, out, cpu::Add);
}
absl::Status MultiplyKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs&,
                            KernelOutputs out) {
  return Binary(c, elementwise::kMultiply, in, out, cpu::Multiply);
}
absl::Status ExtremumKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs& a,
                            KernelOutputs out) {
  return Binary(c, elementwise::kExtremum, in, out,
                [max = a.max](const float* x, const float* y, float* z, int64_t n) {
                  cpu::Extremum(max, x, y, z, n);
                });
}

// On plain data (x reordered first where blocked): one pass over y, each
// element fetched from where the plan puts it.
absl::Status TransposeKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs& a,
                             KernelOutputs out) {
  constexpr const char* kOp = elementwise::kTranspose;
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  elementwise::TransposePlan plan;
  PSC_RETURN_IF_ERROR(elementwise::CheckTranspose(x, a.perm, *y, &plan));
  cpu.UseThreads();
  PSC_ASSIGN_OR_RETURN(const float* xv, cpu.Plain(kOp, x, ReorderSlot::kFirst));
  float* yv = Data(y);
  const int64_t inner = plan.out_dims[plan.rank - 1];
  if (plan.rank > 1 && plan.from_stride[plan.rank - 1] == 1 && inner > 1) {
    // The last axis stays the last: whole rows copied (attention's heads).
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < plan.total / inner; ++r) {
      std::memcpy(yv + r * inner, xv + elementwise::TransposeSource(plan, r * inner),
                  static_cast<size_t>(inner) * sizeof(float));
    }
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < plan.total; ++o) yv[o] = xv[elementwise::TransposeSource(plan, o)];
  }
  Cpu(y).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCpuElementwiseKernels(CpuKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CpuKernelContext> kKernels[] = {
      {elementwise::kAdd, 2, 1, AddKernel, {}, nullptr, KernelDtypes::kBFloat16, TakesAddBf16},
      {elementwise::kMultiply, 2, 1, MultiplyKernel},
      {elementwise::kExtremum, 2, 1, ExtremumKernel},
      {elementwise::kExtremumGradient, 3, 1, ExtremumGradientKernel},
      {elementwise::kScale, 1, 1, ScaleKernel},
      {elementwise::kCopy, 1, 1, CopyKernel, {}, nullptr, KernelDtypes::kAny, TakesOneDtype},
      {elementwise::kReluBackward, 2, 1, ReluBackwardKernel, {}, nullptr, KernelDtypes::kAny},
      {elementwise::kCopyBlock,
       2,
       1,
       CopyBlockKernel,
       {},
       nullptr,
       KernelDtypes::kAny,
       TakesOneDtype},
      {elementwise::kTranspose, 1, 1, TransposeKernel},
      {elementwise::kCast, 1, 1, CastKernel, {}, nullptr, KernelDtypes::kAny},
  };
  PSC_RETURN_IF_ERROR(RegisterKernels<CpuKernelContext>(context, kKernels, registry));
  static constexpr KernelEntry<ActivationState> kActivations[] = {
      {elementwise::kActivate, 1, 1, ActivateKernel, {}, nullptr, KernelDtypes::kAny, TakesRelu16},
      {elementwise::kActivateBackward,
       2,
       1,
       ActivateBackwardKernel,
       {},
       nullptr,
       KernelDtypes::kAny,
       TakesRelu16},
  };
  return RegisterKernels<ActivationState>(std::make_shared<ActivationState>(context), kActivations,
                                          registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
