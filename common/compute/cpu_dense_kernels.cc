#include "common/compute/cpu_dense_kernels.h"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_conv.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/dense_ops.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

struct DensePrims {
  memory::desc fwd_scratch, bwd_data_scratch, bwd_weights_scratch;  // in the shared buffer
  // In low precision the primitives' weights are in the layouts oneDNN
  // picks (its brgemm kernels' blocked ones): the float32 kernel as Keras
  // holds it (user_weights) is reordered into each direction's copy in the
  // dtype (lp_weights: forward; lp_data_weights: backward data) per call,
  // and the weight gradient, float32 whatever the activations' dtype, out
  // of the primitive's layout (lp_diff_weights). In float32 all three are
  // the user's layout and no copy is made.
  memory::desc user_weights;
  memory lp_weights, lp_data_weights, lp_diff_weights;
  memory::desc diff_weights;
  dnnl::inner_product_forward::primitive_desc fwd_pd;
  dnnl::inner_product_forward fwd;
  dnnl::inner_product_backward_data bwd_data;
  dnnl::inner_product_backward_weights bwd_weights;
  memory::desc src, weights, bias, dst;
};

// The kernels' state: the backend's context and the primitives by shape,
// bias and fused ReLU. Thread-compatible, as the backend.
struct DenseState {
  CpuKernelContext* cpu;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool, DType>, DensePrims> prims;

  // Throws dnnl::error (call inside RunOneDnn). `dtype`: the activations'
  // (float32; bfloat16 or float16 with float32 kernel, bias and their
  // gradients).
  DensePrims& For(int64_t n, int64_t k, int64_t m, bool bias, bool relu, DType dtype) {
    const auto key = std::make_tuple(n, k, m, bias, relu, dtype);
    auto it = prims.find(key);
    if (it != prims.end()) return it->second;
    const dnnl::engine& engine = cpu->engine();
    const dt type = OneDnnType(dtype);
    DensePrims p;
    p.src = memory::desc({n, k}, type, tag::nc);
    p.user_weights = memory::desc({m, k}, dt::f32, tag::io);  // Keras (in, out)
    const bool low = dtype != DType::kFloat32;
    p.weights = low ? memory::desc({m, k}, type, tag::any) : p.user_weights;
    p.diff_weights = low ? memory::desc({m, k}, dt::f32, tag::any) : p.user_weights;
    // No bias: a zero descriptor, which oneDNN reads as "none".
    p.bias = bias ? memory::desc({m}, dt::f32, tag::x) : memory::desc();
    p.dst = memory::desc({n, m}, type, tag::nc);
    dnnl::inner_product_forward::desc fwd_desc(dnnl::prop_kind::forward_training, p.src, p.weights,
                                               p.bias, p.dst);
    p.fwd_pd = dnnl::inner_product_forward::primitive_desc(fwd_desc, PrimitiveAttr(relu), engine);
    p.fwd = dnnl::inner_product_forward(p.fwd_pd);
    p.fwd_scratch = p.fwd_pd.scratchpad_desc();
    if (low) p.lp_weights = memory(p.fwd_pd.weights_desc(), engine);
    dnnl::inner_product_backward_data::desc bwd_data_desc(p.src, p.weights, p.dst);
    dnnl::inner_product_backward_data::primitive_desc bwd_data_pd(
        bwd_data_desc, PrimitiveAttr(false), engine, p.fwd_pd);
    p.bwd_data = dnnl::inner_product_backward_data(bwd_data_pd);
    p.bwd_data_scratch = bwd_data_pd.scratchpad_desc();
    if (low) p.lp_data_weights = memory(bwd_data_pd.weights_desc(), engine);
    dnnl::inner_product_backward_weights::desc bwd_w_desc(p.src, p.diff_weights, p.bias, p.dst);
    dnnl::inner_product_backward_weights::primitive_desc bwd_w_pd(bwd_w_desc, PrimitiveAttr(false),
                                                                  engine, p.fwd_pd);
    p.bwd_weights = dnnl::inner_product_backward_weights(bwd_w_pd);
    p.bwd_weights_scratch = bwd_w_pd.scratchpad_desc();
    if (low) p.lp_diff_weights = memory(bwd_w_pd.diff_weights_desc(), engine);
    return prims.emplace(key, std::move(p)).first->second;
  }

  // The kernel w as a direction's primitive reads it (`copy`: that
  // direction's low-precision copy): w's own memory in float32, else
  // reordered into the copy. Throws dnnl::error.
  memory Weights(DensePrims& p, const DeviceTensor& w, memory& copy) {
    if (!copy) return memory(p.user_weights, cpu->engine(), Mutable(w));
    cpu->Reorder(p.user_weights, Data(w), copy.get_desc(), copy.get_data_handle());
    return copy;
  }

  // t's elements, plain, in `dtype` (t's own memory when it is held so).
  // Throws dnnl::error.
  void* In(const DeviceTensor& t, DType dtype, ReorderSlot slot) {
    return cpu->Reordered(t, DescFor(t.shape(), Layout::kPlain, dtype), slot).get_data_handle();
  }
};

absl::Status DenseKernel(DenseState& s, KernelInputs in, const OpAttrs& a, KernelOutputs out) {
  constexpr const char* kOp = dense::kDense;
  const DeviceTensor &x = *in[0], &w = *in[1];
  const DeviceTensor* b = in[2];
  DeviceTensor* y = out[0];
  s.cpu->UseThreads();
  int64_t n = 0, k = 0, m = 0;
  PSC_RETURN_IF_ERROR(CheckDense(kOp, x, w, *y, &n, &k, &m));
  if (b != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "b", *b, {m}));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "w", &w));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "b", b));
  return s.cpu->RunOneDnn(kOp, [&] {
    DensePrims& p = s.For(n, k, m, b != nullptr, a.relu, y->dtype());
    const dnnl::engine& engine = s.cpu->engine();
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, memory(p.src, engine, s.In(x, y->dtype(), ReorderSlot::kDense))},
        {DNNL_ARG_WEIGHTS, s.Weights(p, w, p.lp_weights)},
        {DNNL_ARG_DST, memory(p.dst, engine, Cpu(y).raw())},
        {DNNL_ARG_SCRATCHPAD, s.cpu->Scratchpad(p.fwd_scratch)}};
    if (b != nullptr) args[DNNL_ARG_BIAS] = memory(p.bias, engine, Mutable(*b));
    p.fwd.execute(s.cpu->stream(), args);
    Cpu(y).set_layout(Layout::kPlain);
  });
}

absl::Status DenseBackwardDataKernel(DenseState& s, KernelInputs in, const OpAttrs&,
                                     KernelOutputs out) {
  constexpr const char* kOp = dense::kDenseBackwardData;
  const DeviceTensor &dy = *in[0], &w = *in[1];
  DeviceTensor* dx = out[0];
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dy", dy));
  s.cpu->UseThreads();
  int64_t n = 0, k = 0, m = 0;
  PSC_RETURN_IF_ERROR(CheckDense(kOp, *dx, w, dy, &n, &k, &m));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "w", &w));
  return s.cpu->RunOneDnn(kOp, [&] {
    DensePrims& p = s.For(n, k, m, /*bias=*/true, false, dx->dtype());
    const dnnl::engine& engine = s.cpu->engine();
    p.bwd_data.execute(
        s.cpu->stream(),
        {{DNNL_ARG_DIFF_DST, memory(p.dst, engine, s.In(dy, dx->dtype(), ReorderSlot::kFirst))},
         {DNNL_ARG_WEIGHTS, s.Weights(p, w, p.lp_data_weights)},
         {DNNL_ARG_DIFF_SRC, memory(p.src, engine, Cpu(dx).raw())},
         {DNNL_ARG_SCRATCHPAD, s.cpu->Scratchpad(p.bwd_data_scratch)}});
    Cpu(dx).set_layout(Layout::kPlain);
  });
}

absl::Status DenseBackwardWeightsKernel(DenseState& s, KernelInputs in, const OpAttrs&,
                                        KernelOutputs out) {
  constexpr const char* kOp = dense::kDenseBackwardWeights;
  const DeviceTensor &x = *in[0], &dy = *in[1];
  DeviceTensor *dw = out[0], *db = out[1];
  s.cpu->UseThreads();
  int64_t n = 0, k = 0, m = 0;
  PSC_RETURN_IF_ERROR(CheckDense(kOp, x, *dw, dy, &n, &k, &m));
  if (db != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "db", *db, {m}));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "dw", dw));
  PSC_RETURN_IF_ERROR(WantVariable(kOp, "db", db));
  return s.cpu->RunOneDnn(kOp, [&] {
    DensePrims& p = s.For(n, k, m, db != nullptr, false, dy.dtype());
    const dnnl::engine& engine = s.cpu->engine();
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, memory(p.src, engine, s.In(x, dy.dtype(), ReorderSlot::kDense))},
        {DNNL_ARG_DIFF_DST, memory(p.dst, engine, s.In(dy, dy.dtype(), ReorderSlot::kFirst))},
        {DNNL_ARG_DIFF_WEIGHTS,
         p.lp_diff_weights ? p.lp_diff_weights : memory(p.user_weights, engine, Data(dw))},
        {DNNL_ARG_SCRATCHPAD, s.cpu->Scratchpad(p.bwd_weights_scratch)}};
    if (db != nullptr) args[DNNL_ARG_DIFF_BIAS] = memory(p.bias, engine, Data(db));
    p.bwd_weights.execute(s.cpu->stream(), args);
    if (p.lp_diff_weights) {
      s.cpu->Reorder(p.lp_diff_weights.get_desc(), p.lp_diff_weights.get_data_handle(),
                     p.user_weights, Data(dw));
    }
    Cpu(dw).set_layout(Layout::kPlain);
    if (db != nullptr) Cpu(db).set_layout(Layout::kPlain);
  });
}

}  // namespace

absl::Status RegisterCpuDenseKernels(CpuKernelContext* context, KernelRegistry* registry) {
  KernelEntry<DenseState> kKernels[] = {
      {dense::kDense, 3, 1, DenseKernel, {/*inputs=*/0b100, 0}, nullptr, KernelDtypes::kBFloat16},
      {dense::kDenseBackwardData,
       2,
       1,
       DenseBackwardDataKernel,
       {},
       nullptr,
       KernelDtypes::kBFloat16},
      {dense::kDenseBackwardWeights,
       2,
       2,
       DenseBackwardWeightsKernel,
       {0, /*outputs=*/0b10},
       nullptr,
       KernelDtypes::kBFloat16},
  };
  Bfloat16WhereNative(kKernels);
  auto state = std::make_shared<DenseState>();
  state->cpu = context;
  return RegisterKernels<DenseState>(std::move(state), kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
