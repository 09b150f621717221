#include "common/compute/cpu_pooling_kernels.h"

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

absl::Status MaxPoolKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs& a,
                           KernelOutputs out) {
  return PoolKernel(c, pooling::kMaxPool, in, a, out, cpu::MaxPool);
}
absl::Status AvgPoolKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs& a,
                           KernelOutputs out) {
  return PoolKernel(c, pooling::kAvgPool, in, a, out, cpu::AvgPool);
}
absl::Status MaxPoolBackwardKernel(CpuKernelContext& c, KernelInputs in, const OpAttrs& a,
                                   KernelOutputs out) {
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
  static constexpr KernelEntry<CpuKernelContext> kKernels[] = {
      {pooling::kMaxPool, 1, 1, MaxPoolKernel, {}, pooling::AcceptsWindow},
      {pooling::kMaxPoolBackward, 2, 1, MaxPoolBackwardKernel, {}, pooling::AcceptsWindow},
      {pooling::kAvgPool, 1, 1, AvgPoolKernel, {}, pooling::AcceptsWindow},
      {pooling::kAvgPoolBackward, 2, 1, AvgPoolBackwardKernel, {}, pooling::AcceptsWindow},
      {pooling::kGlobalPool, 1, 1, GlobalPoolKernel, {}, pooling::AcceptsImage},
      {pooling::kGlobalPoolBackward, 2, 1, GlobalPoolBackwardKernel, {}, pooling::AcceptsImage},
  };
  return RegisterKernels<CpuKernelContext>(context, kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
