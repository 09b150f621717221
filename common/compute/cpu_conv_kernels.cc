#include "common/compute/cpu_conv_kernels.h"

#include <map>
#include <memory>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/conv_ops.h"
#include "common/compute/cpu_batch_norm.h"
#include "common/compute/cpu_tensor.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

using dnnl::memory;

// The kernels' state: the backend's context, the algorithm rule and the
// primitives by shape, window, bias and fused ReLU. Thread-compatible, as
// the backend.
struct ConvState {
  CpuKernelContext* cpu;
  ConvAlgorithm algorithm;
  std::map<ConvKey, ConvPrimitives> convs;

  // Throws dnnl::error (call inside RunOneDnn).
  ConvPrimitives& For(const Shape& x, int64_t k, const Window& window, bool bias, bool relu,
                      DType dtype) {
    const ConvKey key{x[0], x[1], x[2], x[3], k, window, bias, relu, dtype};
    auto it = convs.find(key);
    if (it != convs.end()) return it->second;
    return convs.emplace(key, ConvPrimitives::Create(cpu->engine(), key, algorithm)).first->second;
  }

  // For backward data, which neither the bias nor the ReLU changes: the
  // primitives of this shape the forward pass made (the same algorithms,
  // so the same layouts), else new ones.
  ConvPrimitives& Any(const Shape& x, int64_t k, const Window& window, DType dtype) {
    for (bool bias : {false, true}) {
      for (bool relu : {false, true}) {
        auto it = convs.find(ConvKey{x[0], x[1], x[2], x[3], k, window, bias, relu, dtype});
        if (it != convs.end()) return it->second;
      }
    }
    return For(x, k, window, /*bias=*/true, /*relu=*/false, dtype);
  }

  std::vector<std::string> Chosen() const {
    std::vector<std::string> out;
    for (const auto& [key, p] : convs) {
      out.push_back(absl::StrCat("Conv2D [", key.n, ",", key.h, ",", key.w, ",", key.c, "]->",
                                 key.k, " ", key.window.Text(), key.bias ? "" : " no bias",
                                 key.relu ? " relu" : "", key.dtype == DType::kFloat32 ? "" : " ",
                                 key.dtype == DType::kFloat32 ? "" : DTypeName(key.dtype), ": ",
                                 p.algorithms, " (", p.impl, ")"));
    }
    return out;
  }
};

absl::Status Conv2DKernel(ConvState& s, KernelInputs in, const OpAttrs& a, KernelOutputs out) {
  constexpr const char* kOp = conv::kConv2D;
  const DeviceTensor &x = *in[0], &w = *in[1];
  const DeviceTensor* b = in[2];
  DeviceTensor* y = out[0];
  const Window& window = a.window;
  PSC_RETURN_IF_ERROR(conv::CheckConv2D(x, w, b, a, *y));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "w", &w));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "b", b));
  s.cpu->UseThreads();
  const int64_t k = w.shape()[3];
  return s.cpu->RunOneDnn(kOp, [&] {
    ConvPrimitives& p = s.For(x.shape(), k, window, b != nullptr, a.relu, y->dtype());
    const dnnl::engine& engine = s.cpu->engine();
    memory src = s.cpu->Reordered(x, p.fwd_pd.src_desc(), ReorderSlot::kConvSource);
    memory dst(p.fwd_pd.dst_desc(), engine, Cpu(y).raw());
    s.cpu->Reorder(p.user_weights, Data(w), p.fwd_pd.weights_desc(),
                   p.fwd_weights.get_data_handle());
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_WEIGHTS, p.fwd_weights},
        {DNNL_ARG_DST, dst},
        {DNNL_ARG_SCRATCHPAD, s.cpu->Scratchpad(p.fwd_scratch)}};
    if (b != nullptr) args[DNNL_ARG_BIAS] = memory(p.bias, engine, Mutable(*b));
    p.fwd.execute(s.cpu->stream(), args);
    Cpu(y).set_layout(*LayoutOf(y->shape(), p.fwd_pd.dst_desc()));
  });
}

absl::Status Conv2DBackwardDataKernel(ConvState& s, KernelInputs in, const OpAttrs& a,
                                      KernelOutputs out) {
  constexpr const char* kOp = conv::kConv2DBackwardData;
  const DeviceTensor &dy = *in[0], &w = *in[1];
  DeviceTensor* dx = out[0];
  const Window& window = a.window;
  PSC_RETURN_IF_ERROR(conv::CheckConv2DBackwardData(dy, w, a, *dx));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "w", &w));
  s.cpu->UseThreads();
  const int64_t k = w.shape()[3];
  return s.cpu->RunOneDnn(kOp, [&] {
    ConvPrimitives& p = s.Any(dx->shape(), k, window, dx->dtype());
    memory diff_dst =
        s.cpu->Reordered(dy, p.bwd_data_pd.diff_dst_desc(), ReorderSlot::kConvGradient);
    memory diff_src(p.bwd_data_pd.diff_src_desc(), s.cpu->engine(), Cpu(dx).raw());
    s.cpu->Reorder(p.user_weights, Data(w), p.bwd_data_pd.weights_desc(),
                   p.bwd_data_weights.get_data_handle());
    p.bwd_data.execute(s.cpu->stream(),
                       {{DNNL_ARG_DIFF_DST, diff_dst},
                        {DNNL_ARG_WEIGHTS, p.bwd_data_weights},
                        {DNNL_ARG_DIFF_SRC, diff_src},
                        {DNNL_ARG_SCRATCHPAD, s.cpu->Scratchpad(p.bwd_data_scratch)}});
    Cpu(dx).set_layout(*LayoutOf(dx->shape(), p.bwd_data_pd.diff_src_desc()));
  });
}

absl::Status Conv2DBackwardWeightsKernel(ConvState& s, KernelInputs in, const OpAttrs& a,
                                         KernelOutputs out) {
  constexpr const char* kOp = conv::kConv2DBackwardWeights;
  const DeviceTensor &x = *in[0], &dy = *in[1];
  DeviceTensor *dw = out[0], *db = out[1];
  const Window& window = a.window;
  PSC_RETURN_IF_ERROR(conv::CheckConv2DBackwardWeights(x, dy, a, *dw, db));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "dw", dw));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "db", db));
  s.cpu->UseThreads();
  const int64_t k = dy.shape()[3];
  if (db != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "db", *db, {k}));
  // In float32 the bias gradient is ours: a sum over N*OH*OW positions in
  // double (oneDNN's float accumulation errs by ~1e-5 relative at
  // 28x28x32, more than Keras's on the same step). In low precision
  // oneDNN's (float32 accumulation of the rounded dy) is as close, and
  // needs no float32 copy of dy.
  const bool ours = db != nullptr && dy.dtype() == DType::kFloat32;
  if (ours) {
    PSC_ASSIGN_OR_RETURN(const ChannelLayout l, ChannelLayoutOf(kOp, dy));
    SumPerChannel(l, Data(dy), Data(db));
    Cpu(db).set_layout(Layout::kPlain);
  }
  const bool bias = db != nullptr && !ours;
  return s.cpu->RunOneDnn(kOp, [&] {
    ConvPrimitives& p = s.For(x.shape(), k, window, bias, /*relu=*/false, dy.dtype());
    memory src = s.cpu->Reordered(x, p.bwd_weights_pd.src_desc(), ReorderSlot::kConvSource);
    memory diff_dst =
        s.cpu->Reordered(dy, p.bwd_weights_pd.diff_dst_desc(), ReorderSlot::kConvGradient);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_DIFF_DST, diff_dst},
        {DNNL_ARG_DIFF_WEIGHTS, p.diff_weights},
        {DNNL_ARG_SCRATCHPAD, s.cpu->Scratchpad(p.bwd_weights_scratch)}};
    if (bias) {
      args[DNNL_ARG_DIFF_BIAS] = memory(p.bias, s.cpu->engine(), Data(db));
      Cpu(db).set_layout(Layout::kPlain);
    }
    p.bwd_weights.execute(s.cpu->stream(), args);
    s.cpu->Reorder(p.bwd_weights_pd.diff_weights_desc(), p.diff_weights.get_data_handle(),
                   p.user_weights, Data(dw));
  });
}

}  // namespace

absl::StatusOr<ConvChoices> RegisterCpuConvKernels(CpuKernelContext* context,
                                                   ConvAlgorithm algorithm,
                                                   KernelRegistry* registry) {
  KernelEntry<ConvState> kKernels[] = {
      {conv::kConv2D,
       3,
       1,
       Conv2DKernel,
       {/*inputs=*/0b100, 0},
       conv::Accepts,
       KernelDtypes::kBFloat16},
      {conv::kConv2DBackwardData,
       2,
       1,
       Conv2DBackwardDataKernel,
       {},
       conv::Accepts,
       KernelDtypes::kBFloat16},
      {conv::kConv2DBackwardWeights,
       2,
       2,
       Conv2DBackwardWeightsKernel,
       {0, /*outputs=*/0b10},
       conv::Accepts,
       KernelDtypes::kBFloat16},
  };
  Bfloat16WhereNative(kKernels);
  auto state = std::make_shared<ConvState>();
  state->cpu = context;
  state->algorithm = algorithm;
  PSC_RETURN_IF_ERROR(RegisterKernels<ConvState>(state, kKernels, registry));
  return ConvChoices([state] { return state->Chosen(); });
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
