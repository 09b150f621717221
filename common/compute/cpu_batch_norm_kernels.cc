#include "common/compute/cpu_batch_norm_kernels.h"

#include <utility>

#include "common/base/status_macros.h"
#include "common/compute/batch_norm_ops.h"
#include "common/compute/cpu_batch_norm.h"
#include "common/compute/cpu_tensor.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

// Each of the per-channel tensors named in `what` of shape [C].
absl::Status WantChannels(const char* op, const ChannelLayout& l,
                          std::initializer_list<std::pair<const char*, const DeviceTensor*>> what) {
  const Shape c = {l.channels()};
  for (const auto& [name, t] : what) PSC_RETURN_IF_ERROR(WantShape(op, name, *t, c));
  return absl::OkStatus();
}

// y in x's layout; the statistics plain.
absl::Status BatchNormKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs& a,
                             KernelOutputs out) {
  constexpr const char* kOp = batch_norm::kBatchNorm;
  const DeviceTensor &x = *in[0], &gamma = *in[1], &beta = *in[2];
  DeviceTensor *y = out[0], *mean = out[1], *variance = out[2];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "x", x));
  cpu.UseThreads();
  PSC_ASSIGN_OR_RETURN(const ChannelLayout l, ChannelLayoutOf(kOp, x));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "y", *y, x.shape()));
  PSC_RETURN_IF_ERROR(WantChannels(
      kOp, l, {{"gamma", &gamma}, {"beta", &beta}, {"mean", mean}, {"variance", variance}}));
  if (y == &x) return absl::InvalidArgumentError("BatchNorm: y may not be x");
  cpu::BatchNorm(l, Data(x), Data(gamma), Data(beta), a.epsilon, Data(y), Data(mean),
                 Data(variance));
  Cpu(y).set_layout(Cpu(x).layout());
  Cpu(mean).set_layout(Layout::kPlain);
  Cpu(variance).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

absl::Status BatchNormInferenceKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs& a,
                                      KernelOutputs out) {
  constexpr const char* kOp = batch_norm::kBatchNormInference;
  const DeviceTensor &x = *in[0], &gamma = *in[1], &beta = *in[2], &mean = *in[3],
                     &variance = *in[4];
  DeviceTensor* y = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "x", x));
  cpu.UseThreads();
  PSC_ASSIGN_OR_RETURN(const ChannelLayout l, ChannelLayoutOf(kOp, x));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "y", *y, x.shape()));
  PSC_RETURN_IF_ERROR(WantChannels(
      kOp, l, {{"gamma", &gamma}, {"beta", &beta}, {"mean", &mean}, {"variance", &variance}}));
  const Layout layout = Cpu(x).layout();
  cpu::BatchNormInference(l, Data(x), Data(gamma), Data(beta), Data(mean), Data(variance),
                          a.epsilon, Data(y));
  Cpu(y).set_layout(layout);
  return absl::OkStatus();
}

// dx in x's layout (dy brought to it); dgamma and dbeta plain.
absl::Status BatchNormBackwardKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs& a,
                                     KernelOutputs out) {
  constexpr const char* kOp = batch_norm::kBatchNormBackward;
  const DeviceTensor &x = *in[0], &dy = *in[1], &gamma = *in[2], &mean = *in[3], &variance = *in[4];
  DeviceTensor *dx = out[0], *dgamma = out[1], *dbeta = out[2];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "x", x));
  cpu.UseThreads();
  PSC_ASSIGN_OR_RETURN(const ChannelLayout l, ChannelLayoutOf(kOp, x));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, x.shape()));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, x.shape()));
  PSC_RETURN_IF_ERROR(WantChannels(kOp, l,
                                   {{"gamma", &gamma},
                                    {"mean", &mean},
                                    {"variance", &variance},
                                    {"dgamma", dgamma},
                                    {"dbeta", dbeta}}));
  const CpuTensor& xt = Cpu(x);
  const float* dyv = Data(dy);
  if (Cpu(dy).layout() != xt.layout()) {
    PSC_ASSIGN_OR_RETURN(dyv, cpu.InLayoutOf(kOp, dy, x, ReorderSlot::kFirst));
  }
  cpu::BatchNormBackward(l, xt.data(), dyv, Data(gamma), Data(mean), Data(variance), a.epsilon,
                         Data(dx), Data(dgamma), Data(dbeta));
  Cpu(dx).set_layout(xt.layout());
  Cpu(dgamma).set_layout(Layout::kPlain);
  Cpu(dbeta).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCpuBatchNormKernels(CpuKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CpuKernelContext> kKernels[] = {
      {batch_norm::kBatchNorm, 3, 3, BatchNormKernel, {}, batch_norm::Accepts},
      {batch_norm::kBatchNormInference, 5, 1, BatchNormInferenceKernel, {}, batch_norm::Accepts},
      {batch_norm::kBatchNormBackward, 5, 3, BatchNormBackwardKernel, {}, batch_norm::Accepts},
  };
  return RegisterKernels<CpuKernelContext>(context, kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
