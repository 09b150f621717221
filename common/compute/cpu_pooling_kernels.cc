#include "common/compute/cpu_pooling_kernels.h"

#include <algorithm>

#include "common/base/status_macros.h"
#include "common/compute/cpu_elementwise.h"
#include "common/compute/cpu_pooling.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/pooling_ops.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

// y in x's layout.
template <typename F>
absl::Status PoolKernel(CpuKernelContext& cpu, const char* op, KernelInputs in, const OpAttrs& a,
                        KernelOutputs out, F pool) {
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(op, "x", x));
  cpu.UseThreads();
  PSC_RETURN_IF_ERROR(CheckPoolWindow(op, a.window, x.shape()));
  PSC_RETURN_IF_ERROR(WantShape(op, "y", *y, a.window.Output(x.shape(), x.shape()[3])));
  const Shape phys = Cpu(x).PhysicalNhwc();
  pool(Cpu(x).data(), phys[0], phys[1], phys[2], phys[3], a.window, Cpu(y).data());
  Cpu(y).set_layout(Cpu(x).layout());
  return absl::OkStatus();
}

// dx in x's layout, dy brought to it.
template <typename F>
absl::Status PoolBackwardKernel(CpuKernelContext& cpu, const char* op, KernelInputs in,
                                const OpAttrs& a, KernelOutputs out, F backward) {
  const DeviceTensor &x = *in[0], &dy = *in[1];
  DeviceTensor* dx = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(op, "x", x));
  cpu.UseThreads();
  PSC_RETURN_IF_ERROR(CheckPoolWindow(op, a.window, x.shape()));
  PSC_RETURN_IF_ERROR(WantShape(op, "dy", dy, a.window.Output(x.shape(), x.shape()[3])));
  PSC_RETURN_IF_ERROR(WantShape(op, "dx", *dx, x.shape()));
  const CpuTensor& xt = Cpu(x);
  const float* dyv = Cpu(dy).data();
  if (Cpu(dy).layout() != xt.layout()) {
    PSC_ASSIGN_OR_RETURN(dyv, cpu.InLayoutOf(op, dy, x, ReorderSlot::kFirst));
  }
  const Shape phys = xt.PhysicalNhwc();
  backward(xt.data(), dyv, phys[0], phys[1], phys[2], phys[3], a.window, Cpu(dx).data());
  Cpu(dx).set_layout(xt.layout());
  return absl::OkStatus();
}

// Pooling a blocked tensor's N*C/b images of b channels gives [N, C/b, b],
// i.e. the plain [N, C].
absl::Status GlobalPoolKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs& a,
                              KernelOutputs out) {
  constexpr const char* kOp = pooling::kGlobalPool;
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "x", x));
  cpu.UseThreads();
  PSC_RETURN_IF_ERROR(WantRank(kOp, "x", x, 4));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "y", *y, {x.shape()[0], x.shape()[3]}));
  const Shape phys = Cpu(x).PhysicalNhwc();
  cpu::GlobalPool(a.pooling, Cpu(x).data(), phys[0], phys[1] * phys[2], phys[3], Cpu(y).data());
  Cpu(y).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

absl::Status GlobalPoolBackwardKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs& a,
                                      KernelOutputs out) {
  constexpr const char* kOp = pooling::kGlobalPoolBackward;
  const DeviceTensor &x = *in[0], &dy = *in[1];
  DeviceTensor* dx = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "x", x));
  cpu.UseThreads();
  PSC_RETURN_IF_ERROR(WantRank(kOp, "x", x, 4));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, {x.shape()[0], x.shape()[3]}));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, x.shape()));
  PSC_ASSIGN_OR_RETURN(const float* dyv, cpu.Plain(kOp, dy, ReorderSlot::kFirst));
  const Shape phys = Cpu(x).PhysicalNhwc();
  cpu::GlobalPoolBackward(a.pooling, Cpu(x).data(), dyv, phys[0], phys[1] * phys[2], phys[3],
                          Cpu(dx).data());
  Cpu(dx).set_layout(Cpu(x).layout());
  return absl::OkStatus();
}

// MaxPool and MaxPoolBackward take bfloat16 when every tensor is bfloat16
// and the window is 2x2 with stride 2 (the pooling of most networks); Run
// gives them float32 copies otherwise.
bool TakesBf16Pool2x2(KernelInputs in, const OpAttrs& a, KernelOutputs out) {
  auto bf16 = [](const DeviceTensor* t) { return t != nullptr && t->dtype() == DType::kBFloat16; };
  return a.window == kPool2x2 && std::all_of(in.begin(), in.end(), bf16) &&
         std::all_of(out.begin(), out.end(), bf16);
}

absl::Status MaxPoolKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs& a,
                           KernelOutputs out) {
  if (in[0]->dtype() != DType::kBFloat16) {
    return PoolKernel(c, pooling::kMaxPool, in, a, out, cpu::MaxPool);
  }
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  c.UseThreads();
  PSC_RETURN_IF_ERROR(CheckPoolWindow(pooling::kMaxPool, a.window, x.shape()));
  PSC_RETURN_IF_ERROR(
      WantShape(pooling::kMaxPool, "y", *y, a.window.Output(x.shape(), x.shape()[3])));
  const Shape phys = Cpu(x).PhysicalNhwc();
  cpu::MaxPool2x2Bf16(static_cast<const uint16_t*>(Cpu(x).raw()), phys[0], phys[1], phys[2],
                      phys[3], static_cast<uint16_t*>(Cpu(y).raw()));
  Cpu(y).set_layout(Cpu(x).layout());
  return absl::OkStatus();
}
absl::Status AvgPoolKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs& a,
                           KernelOutputs out) {
  return PoolKernel(c, pooling::kAvgPool, in, a, out, cpu::AvgPool);
}
absl::Status MaxPoolBackwardKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs& a,
                                   KernelOutputs out) {
  if (in[0]->dtype() == DType::kBFloat16) {
    constexpr const char* kOp = pooling::kMaxPoolBackward;
    const DeviceTensor &x = *in[0], &dy = *in[1];
    DeviceTensor* dx = out[0];
    c.UseThreads();
    PSC_RETURN_IF_ERROR(CheckPoolWindow(kOp, a.window, x.shape()));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, a.window.Output(x.shape(), x.shape()[3])));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, x.shape()));
    const void* dyv = Cpu(dy).raw();
    if (Cpu(dy).layout() != Cpu(x).layout()) {
      PSC_RETURN_IF_ERROR(c.RunOneDnn(kOp, [&] {
        dyv = c.Reordered(dy, DescFor(dy.shape(), Cpu(x).layout(), DType::kBFloat16),
                          ReorderSlot::kFirst)
                  .get_data_handle();
      }));
    }
    const Shape phys = Cpu(x).PhysicalNhwc();
    cpu::MaxPool2x2BackwardBf16(static_cast<const uint16_t*>(Cpu(x).raw()),
                                static_cast<const uint16_t*>(dyv), phys[0], phys[1], phys[2],
                                phys[3], static_cast<uint16_t*>(Cpu(dx).raw()));
    Cpu(dx).set_layout(Cpu(x).layout());
    return absl::OkStatus();
  }
  return PoolBackwardKernel(
      c, pooling::kMaxPoolBackward, in, a, out,
      [](const float* x, const float* dy, int64_t images, int64_t h, int64_t w, int64_t ch,
         const Window& win, float* dx) { cpu::MaxPoolBackward(x, dy, images, h, w, ch, win, dx); });
}
absl::Status AvgPoolBackwardKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs& a,
                                   KernelOutputs out) {
  return PoolBackwardKernel(
      c, pooling::kAvgPoolBackward, in, a, out,
      [](const float*, const float* dy, int64_t images, int64_t h, int64_t w, int64_t ch,
         const Window& win, float* dx) { cpu::AvgPoolBackward(dy, images, h, w, ch, win, dx); });
}

}  // namespace

absl::Status RegisterCpuPoolingKernels(CpuKernelContext* context, KernelRegistry* registry) {
  KernelEntry<CpuKernelContext> kKernels[] = {
      {pooling::kMaxPool,
       1,
       1,
       MaxPoolKernel,
       {},
       pooling::AcceptsWindow,
       KernelDtypes::kBFloat16,
       TakesBf16Pool2x2},
      {pooling::kMaxPoolBackward,
       2,
       1,
       MaxPoolBackwardKernel,
       {},
       pooling::AcceptsWindow,
       KernelDtypes::kBFloat16,
       TakesBf16Pool2x2},
      {pooling::kAvgPool, 1, 1, AvgPoolKernel, {}, pooling::AcceptsWindow},
      {pooling::kAvgPoolBackward, 2, 1, AvgPoolBackwardKernel, {}, pooling::AcceptsWindow},
      {pooling::kGlobalPool, 1, 1, GlobalPoolKernel, {}, pooling::AcceptsImage},
      {pooling::kGlobalPoolBackward, 2, 1, GlobalPoolBackwardKernel, {}, pooling::AcceptsImage},
  };
  Bfloat16WhereNative(kKernels);
  return RegisterKernels<CpuKernelContext>(context, kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
