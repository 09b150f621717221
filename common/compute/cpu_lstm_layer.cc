#include "common/compute/cpu_lstm_layer.h"

#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/base/status_macros.h"
#include "common/compute/cpu_conv.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/rnn_ops.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// One shape's primitives: the forward for training and for inference, and
// the backward, each with its weights in the layout it chose.
struct LstmPrims {
  memory::desc src, dst, bias, w_user, r_user;
  dnnl::lstm_forward::primitive_desc train_pd, infer_pd;
  dnnl::lstm_backward::primitive_desc backward_pd;
  dnnl::lstm_forward train, infer;
  dnnl::lstm_backward backward;
};

// (n, T, C, U, reverse)
using LstmKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool>;

struct LstmLayerState {
  CpuKernelContext* cpu = nullptr;
  std::map<LstmKey, LstmPrims> prims;
  // Per instance: the workspace of its last forward for training, and the
  // shape it was made for.
  std::map<int64_t, std::pair<LstmKey, memory>> workspaces;
  std::vector<float> zero_bias;

  // Throws dnnl::error (call inside RunOneDnn).
  LstmPrims& For(const LstmKey& key) {
    auto it = prims.find(key);
    if (it != prims.end()) return it->second;
    const auto [n, steps, c, units, reverse] = key;
    const dnnl::engine& e = cpu->engine();
    LstmPrims p;
    p.src = memory::desc({steps, n, c}, dt::f32, tag::ntc);
    p.dst = memory::desc({steps, n, units}, dt::f32, tag::ntc);
    p.bias = memory::desc({1, 1, 4, units}, dt::f32, tag::ldgo);
    p.w_user = memory::desc({1, 1, c, 4, units}, dt::f32, tag::ldigo);
    p.r_user = memory::desc({1, 1, units, 4, units}, dt::f32, tag::ldigo);
    const memory::desc w_any({1, 1, c, 4, units}, dt::f32, tag::any);
    const memory::desc r_any({1, 1, units, 4, units}, dt::f32, tag::any);
    const memory::desc none;
    const auto direction = reverse ? dnnl::rnn_direction::unidirectional_right2left
                                   : dnnl::rnn_direction::unidirectional_left2right;
    dnnl::lstm_forward::desc train(dnnl::prop_kind::forward_training, direction, p.src, none, none,
                                   w_any, r_any, p.bias, p.dst, none, none);
    // The scratchpad ours (as every primitive of the backend's): oneDNN's
    // own is per thread, and a worker runs each unit on a thread of its own.
    const dnnl::primitive_attr attr = PrimitiveAttr(false);
    p.train_pd = dnnl::lstm_forward::primitive_desc(train, attr, e);
    dnnl::lstm_forward::desc infer(dnnl::prop_kind::forward_inference, direction, p.src, none, none,
                                   w_any, r_any, p.bias, p.dst, none, none);
    p.infer_pd = dnnl::lstm_forward::primitive_desc(infer, attr, e);
    dnnl::lstm_backward::desc backward(dnnl::prop_kind::backward, direction, p.src, none, none,
                                       w_any, r_any, p.bias, p.dst, none, none, p.src, none, none,
                                       w_any, r_any, p.bias, p.dst, none, none);
    p.backward_pd = dnnl::lstm_backward::primitive_desc(backward, attr, e, p.train_pd);
    p.train = dnnl::lstm_forward(p.train_pd);
    p.infer = dnnl::lstm_forward(p.infer_pd);
    p.backward = dnnl::lstm_backward(p.backward_pd);
    return prims.emplace(key, std::move(p)).first->second;
  }

  // `user` (Keras's layout) in `want`'s: a new memory, reordered.
  memory InLayout(const memory::desc& user_desc, const float* user, const memory::desc& want) {
    memory out(want, cpu->engine());
    cpu->Reorder(user_desc, user, want, out.get_data_handle());
    return out;
  }

  const float* Bias(const DeviceTensor* b, int64_t units) {
    if (b != nullptr) return Data(*b);
    zero_bias.assign(static_cast<size_t>(4 * units), 0.0f);
    return zero_bias.data();
  }
};

absl::Status LstmLayerKernel(LstmLayerState& s, KernelInputs in, const OpAttrs& a,
                             KernelOutputs out) {
  constexpr const char* kOp = rnn::kLstmLayer;
  int64_t n = 0, steps = 0, c = 0, units = 0;
  PSC_RETURN_IF_ERROR(
      rnn::CheckLstmLayer(kOp, *in[0], *in[1], *in[2], in[3], {out[0]}, &n, &steps, &c, &units));
  s.cpu->UseThreads();
  PSC_ASSIGN_OR_RETURN(const float* x, s.cpu->Plain(kOp, *in[0], ReorderSlot::kFirst));
  const float *w = Data(*in[1]), *r = Data(*in[2]), *b = s.Bias(in[3], units);
  float* y = Data(out[0]);
  const LstmKey key{n, steps, c, units, a.reverse};
  return s.cpu->RunOneDnn(kOp, [&] {
    LstmPrims& p = s.For(key);
    const dnnl::engine& e = s.cpu->engine();
    const auto& pd = a.training ? p.train_pd : p.infer_pd;
    memory wm = s.InLayout(p.w_user, w, pd.weights_layer_desc());
    memory rm = s.InLayout(p.r_user, r, pd.weights_iter_desc());
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC_LAYER, memory(p.src, e, const_cast<float*>(x))},
        {DNNL_ARG_WEIGHTS_LAYER, wm},
        {DNNL_ARG_WEIGHTS_ITER, rm},
        {DNNL_ARG_BIAS, memory(p.bias, e, const_cast<float*>(b))},
        {DNNL_ARG_DST_LAYER, memory(p.dst, e, y)},
        {DNNL_ARG_SCRATCHPAD, s.cpu->Scratchpad(pd.scratchpad_desc())}};
    if (a.training) {
      auto& [made_for, ws] = s.workspaces[a.instance];
      if (!ws || made_for != key) ws = memory(p.train_pd.workspace_desc(), e);
      made_for = key;
      args[DNNL_ARG_WORKSPACE] = ws;
      p.train.execute(s.cpu->stream(), args);
    } else {
      p.infer.execute(s.cpu->stream(), args);
    }
    Cpu(out[0]).set_layout(Layout::kPlain);
  });
}

absl::Status LstmLayerBackwardKernel(LstmLayerState& s, KernelInputs in, const OpAttrs& a,
                                     KernelOutputs out) {
  constexpr const char* kOp = rnn::kLstmLayerBackward;
  int64_t n = 0, steps = 0, c = 0, units = 0;
  PSC_RETURN_IF_ERROR(rnn::CheckLstmLayer(kOp, *in[0], *in[1], *in[2], in[3], {in[4], in[5]}, &n,
                                          &steps, &c, &units));
  if (out[0] != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *out[0], in[0]->shape()));
  if (out[1] != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "dw", *out[1], in[1]->shape()));
  if (out[2] != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "dr", *out[2], in[2]->shape()));
  if (out[3] != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "db", *out[3], {4 * units}));
  s.cpu->UseThreads();
  PSC_ASSIGN_OR_RETURN(const float* x, s.cpu->Plain(kOp, *in[0], ReorderSlot::kFirst));
  PSC_ASSIGN_OR_RETURN(const float* dy, s.cpu->Plain(kOp, *in[5], ReorderSlot::kSecond));
  const float *w = Data(*in[1]), *r = Data(*in[2]), *b = s.Bias(in[3], units);
  const float* y = Data(*in[4]);
  const LstmKey key{n, steps, c, units, a.reverse};
  std::vector<float> dx_scratch, y_scratch;
  float* dx = nullptr;
  if (out[0] != nullptr) {
    dx = Data(out[0]);
  } else {
    dx_scratch.resize(static_cast<size_t>(n * steps * c));
    dx = dx_scratch.data();
  }
  std::vector<float> db(static_cast<size_t>(4 * units), 0.0f);
  return s.cpu->RunOneDnn(kOp, [&] {
    LstmPrims& p = s.For(key);
    const dnnl::engine& e = s.cpu->engine();
    const memory src(p.src, e, const_cast<float*>(x));
    const memory bias(p.bias, e, const_cast<float*>(b));
    // The forward's workspace: this instance's, else made again.
    memory ws;
    auto it = s.workspaces.find(a.instance);
    if (it != s.workspaces.end() && it->second.first == key && it->second.second) {
      ws = it->second.second;
    } else {
      ws = memory(p.train_pd.workspace_desc(), e);
      y_scratch.resize(static_cast<size_t>(n * steps * units));
      p.train.execute(
          s.cpu->stream(),
          {{DNNL_ARG_SRC_LAYER, src},
           {DNNL_ARG_WEIGHTS_LAYER, s.InLayout(p.w_user, w, p.train_pd.weights_layer_desc())},
           {DNNL_ARG_WEIGHTS_ITER, s.InLayout(p.r_user, r, p.train_pd.weights_iter_desc())},
           {DNNL_ARG_BIAS, bias},
           {DNNL_ARG_DST_LAYER, memory(p.dst, e, y_scratch.data())},
           {DNNL_ARG_WORKSPACE, ws},
           {DNNL_ARG_SCRATCHPAD, s.cpu->Scratchpad(p.train_pd.scratchpad_desc())}});
    }
    const auto& pd = p.backward_pd;
    // The backward adds to its weight gradients: they start at zero.
    memory dwm(pd.diff_weights_layer_desc(), e), drm(pd.diff_weights_iter_desc(), e);
    std::memset(dwm.get_data_handle(), 0, pd.diff_weights_layer_desc().get_size());
    std::memset(drm.get_data_handle(), 0, pd.diff_weights_iter_desc().get_size());
    p.backward.execute(s.cpu->stream(),
                       {{DNNL_ARG_SRC_LAYER, src},
                        {DNNL_ARG_WEIGHTS_LAYER, s.InLayout(p.w_user, w, pd.weights_layer_desc())},
                        {DNNL_ARG_WEIGHTS_ITER, s.InLayout(p.r_user, r, pd.weights_iter_desc())},
                        {DNNL_ARG_BIAS, bias},
                        {DNNL_ARG_DST_LAYER, memory(p.dst, e, const_cast<float*>(y))},
                        {DNNL_ARG_WORKSPACE, ws},
                        {DNNL_ARG_DIFF_SRC_LAYER, memory(p.src, e, dx)},
                        {DNNL_ARG_DIFF_WEIGHTS_LAYER, dwm},
                        {DNNL_ARG_DIFF_WEIGHTS_ITER, drm},
                        {DNNL_ARG_DIFF_BIAS, memory(p.bias, e, db.data())},
                        {DNNL_ARG_DIFF_DST_LAYER, memory(p.dst, e, const_cast<float*>(dy))},
                        {DNNL_ARG_SCRATCHPAD, s.cpu->Scratchpad(pd.scratchpad_desc())}});
    s.cpu->stream().wait();
    if (out[1] != nullptr) {
      s.cpu->Reorder(pd.diff_weights_layer_desc(), dwm.get_data_handle(), p.w_user, Data(out[1]));
      Cpu(out[1]).set_layout(Layout::kPlain);
    }
    if (out[2] != nullptr) {
      if (steps == 1) {  // the state before the only step is zeros: dr is 0 (oneDNN 2.6
                         // leaves other values there for a batch of one)
        std::memset(Data(out[2]), 0, static_cast<size_t>(out[2]->size()) * sizeof(float));
      } else {
        s.cpu->Reorder(pd.diff_weights_iter_desc(), drm.get_data_handle(), p.r_user, Data(out[2]));
      }
      Cpu(out[2]).set_layout(Layout::kPlain);
    }
    if (out[3] != nullptr) {
      std::memcpy(Data(out[3]), db.data(), db.size() * sizeof(float));
      Cpu(out[3]).set_layout(Layout::kPlain);
    }
    if (out[0] != nullptr) Cpu(out[0]).set_layout(Layout::kPlain);
  });
}

}  // namespace

absl::Status RegisterCpuLstmLayerKernels(CpuKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<LstmLayerState> kKernels[] = {
      {rnn::kLstmLayer, 4, 1, LstmLayerKernel, {/*inputs=*/0b1000, 0}},
      {rnn::kLstmLayerBackward,
       6,
       4,
       LstmLayerBackwardKernel,
       {/*inputs=*/0b1000, /*outputs=*/0b1111}},
  };
  auto state = std::make_shared<LstmLayerState>();
  state->cpu = context;
  return RegisterKernels<LstmLayerState>(std::move(state), kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
