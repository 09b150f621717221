// The executor's recurrent layers (model.h): LSTM, GRU and SimpleRNN over
// their steps, forward and backward, with and without a Keras mask.
#include <functional>
#include <initializer_list>
#include <memory>

#include "common/base/status_macros.h"
#include "common/compute/dense_ops.h"
#include "common/compute/elementwise_ops.h"
#include "common/compute/layer_graph.h"
#include "common/compute/mask_ops.h"
#include "common/compute/model.h"
#include "common/compute/rnn_ops.h"

namespace psc {
namespace compute {

// An LSTM runs as Keras's cell does it: the input's projection x W + b of
// every step in one Dense, then per step its gates z = that step's
// projection + h_prev U (a Dense of the batch's rows), the LstmCell op, and
// copies of h (and, in training, of z, c and h_prev) into the step's slot of
// the sequences; its backward pass runs the steps back, and the recurrent
// kernel's, the kernel's and the bias's gradients are each one Dense
// gradient over every step's rows at the end. With a mask, a masked step's
// rows keep the previous h and c (SelectRows), as Keras's RNN loop does,
// and its output is that h or, with zero_masked, zeros; backward, the
// cell of a masked row gets no gradient and the previous step all of it.
namespace {

// Each of `tensors`, of `shape`, allocated on `be`.
absl::Status AllocateEach(ComputeBackend* be, const Shape& shape,
                          std::initializer_list<std::unique_ptr<DeviceTensor>*> tensors) {
  for (std::unique_ptr<DeviceTensor>* t : tensors) {
    PSC_ASSIGN_OR_RETURN(*t, be->Allocate(shape));
  }
  return absl::OkStatus();
}

// Step i of a recurrent layer (its input slot s) of `steps`, over n rows
// of `units`.
struct RecurrentStep {
  int64_t i, s, steps, n, units;
};

// The layer's output at step i: h into y's step (Keras's sequence, in the
// input's order where `unreverse`) or, at the last step, y itself. With a
// mask (m: the step's) and zero_masked, the cell's own h (`cell_h`) at the
// kept rows and zeros at the masked (through `scratch`).
absl::Status StepOutput(ComputeBackend* be, const LayerSpec& l, const RecurrentStep& k,
                        const DeviceTensor& h, const DeviceTensor* m, const DeviceTensor* cell_h,
                        DeviceTensor* scratch, DeviceTensor* y) {
  if (!l.return_sequences) {
    return k.i + 1 == k.steps ? elementwise::Copy(be, h, y) : absl::OkStatus();
  }
  const DeviceTensor* o = &h;
  if (m != nullptr && l.zero_masked) {
    PSC_RETURN_IF_ERROR(mask::SelectRows(be, cell_h, nullptr, *m, scratch));
    o = scratch;
  }
  const int64_t out_step = l.unreverse ? k.s : k.i;
  return elementwise::CopyBlock(be, *o, k.units, 0, y, k.steps * k.units, out_step * k.units, k.n,
                                k.units);
}

// Its backward: dh, the output's gradient at step i (none at a masked row
// of a zero_masked output: it was a constant) and the next step's through
// h (dh_next, from step i + 1 on).
absl::Status StepOutputGradient(ComputeBackend* be, const LayerSpec& l, const RecurrentStep& k,
                                const DeviceTensor& g, const DeviceTensor* m,
                                const DeviceTensor& dh_next, DeviceTensor* dh) {
  if (!l.return_sequences) return elementwise::Copy(be, k.i + 1 == k.steps ? g : dh_next, dh);
  const int64_t out_step = l.unreverse ? k.s : k.i;
  PSC_RETURN_IF_ERROR(elementwise::CopyBlock(be, g, k.steps * k.units, out_step * k.units, dh,
                                             k.units, 0, k.n, k.units));
  if (m != nullptr && l.zero_masked) PSC_RETURN_IF_ERROR(mask::SelectRows(be, dh, nullptr, *m, dh));
  if (k.i + 1 < k.steps) return elementwise::Add(be, *dh, dh_next, dh);
  return absl::OkStatus();
}

}  // namespace

bool Executor::FusedLstm(size_t layer, const DeviceTensor* mask) const {
  const LayerSpec& l = model_->layers()[layer];
  const int graph_layer = static_cast<int>(layer);
  const int64_t steps = model_->graph().tensor(model_->graph().sources(graph_layer)[0]).shape[0];
  return mask == nullptr && (!l.go_backwards || l.unreverse) && steps >= 2 &&
         backend_->kernels().Find(rnn::kLstmLayer) != nullptr;
}

// The layer whole: its every step's h into `ys`, and y the sequence or
// the last step's h (the last the steps take: the first going backwards).
absl::Status Executor::RunLstmLayer(Buffers& b, size_t layer, const DeviceTensor& x,
                                    DeviceTensor* y, int64_t n, bool training) {
  const LayerSpec& l = model_->layers()[layer];
  const LayerVariables& v = model_->layer_variables()[layer];
  const int64_t steps =
      model_->graph().tensor(model_->graph().sources(static_cast<int>(layer))[0]).shape[0];
  const int64_t units = l.outputs;
  Buffers::LstmTensors& t = b.lstm[layer];
  if (t.ys == nullptr) {  // a returned sequence's shape (LayerGraph::BatchShape), Copy's
    PSC_ASSIGN_OR_RETURN(
        t.ys, backend_->Allocate(l.return_sequences ? y->shape() : Shape{n, steps, units}));
    if (!l.return_sequences) {  // zeros but where the backward writes the last step's
      PSC_ASSIGN_OR_RETURN(t.dys, backend_->Allocate({n, steps, units}));
    }
  }
  // Only a layer whose backward runs keeps the primitive's workspace.
  const bool keep = training && needs_gradient_[LayerGraph::OutputOf(static_cast<int>(layer))];
  PSC_RETURN_IF_ERROR(rnn::LstmLayer(backend_, x, *params_[v.kernel], *params_[v.recurrent],
                                     Param(v.bias), l.go_backwards, keep,
                                     instance_base_ + static_cast<int64_t>(layer), t.ys.get()));
  if (l.return_sequences) return elementwise::Copy(backend_, *t.ys, y);
  const int64_t last = l.go_backwards ? 0 : steps - 1;
  return elementwise::CopyBlock(backend_, *t.ys, steps * units, last * units, y, units, 0, n,
                                units);
}

absl::Status Executor::LstmLayerBackward(Buffers& b, size_t layer, const DeviceTensor& x,
                                         const DeviceTensor& g, DeviceTensor* dx,
                                         const std::function<absl::Status()>& ready) {
  const LayerSpec& l = model_->layers()[layer];
  const LayerVariables& v = model_->layer_variables()[layer];
  Buffers::LstmTensors& t = b.lstm.at(layer);
  const int64_t n = t.ys->shape()[0], units = l.outputs;
  const int64_t steps =
      model_->graph().tensor(model_->graph().sources(static_cast<int>(layer))[0]).shape[0];
  const DeviceTensor* dy = &g;
  if (!l.return_sequences) {
    const int64_t last = l.go_backwards ? 0 : steps - 1;
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, g, units, 0, t.dys.get(), steps * units,
                                               last * units, n, units));
    dy = t.dys.get();
  }
  const bool trainable = l.trainable;
  PSC_RETURN_IF_ERROR(rnn::LstmLayerBackward(backend_, x, *params_[v.kernel], *params_[v.recurrent],
                                             Param(v.bias), *t.ys, *dy, l.go_backwards,
                                             instance_base_ + static_cast<int64_t>(layer), dx,
                                             trainable ? param_grads_[v.kernel].get() : nullptr,
                                             trainable ? param_grads_[v.recurrent].get() : nullptr,
                                             trainable ? ParamGrad(v.bias) : nullptr));
  return ready();
}

absl::Status Executor::RunLstm(Buffers& b, size_t layer, const DeviceTensor& x,
                               const DeviceTensor* mask, DeviceTensor* y, int64_t n,
                               bool training) {
  if (FusedLstm(layer, mask)) return RunLstmLayer(b, layer, x, y, n, training);
  const LayerSpec& l = model_->layers()[layer];
  const LayerVariables& v = model_->layer_variables()[layer];
  const Shape& in =
      model_->graph().tensor(model_->graph().sources(static_cast<int>(layer))[0]).shape;
  const int64_t steps = in[0], units = l.outputs, gates = 4 * units;
  Buffers::LstmTensors& t = b.lstm[layer];
  if (t.xz == nullptr) {
    PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, steps, gates}, {&t.xz, &t.zs, &t.dzs}));
    PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, steps, units}, {&t.hp, &t.cs}));
    PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, gates}, {&t.z, &t.r}));
    PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, units},
                                     {&t.h[0], &t.h[1], &t.c[0], &t.c[1], &t.dh, &t.dh_next,
                                      &t.dc[0], &t.dc[1], &t.c_step, &t.c_prev}));
    if (mask != nullptr) {
      PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n}, {&t.m}));
      PSC_RETURN_IF_ERROR(
          AllocateEach(backend_, {n, units}, {&t.hn, &t.cn, &t.out, &t.dh_pass, &t.dc_pass}));
    }
  }
  PSC_RETURN_IF_ERROR(
      dense::Dense(backend_, x, *params_[v.kernel], Param(v.bias), false, t.xz.get()));
  auto slot = [&](int64_t i) { return l.go_backwards ? steps - 1 - i : i; };
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t s = slot(i);
    DeviceTensor *h = t.h[i % 2].get(), *c = t.c[i % 2].get();
    const DeviceTensor *h_prev = t.h[(i + 1) % 2].get(), *c_prev = t.c[(i + 1) % 2].get();
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.xz, steps * gates, s * gates, t.z.get(),
                                               gates, 0, n, gates));
    if (i > 0) {
      PSC_RETURN_IF_ERROR(
          dense::Dense(backend_, *h_prev, *params_[v.recurrent], nullptr, false, t.r.get()));
      PSC_RETURN_IF_ERROR(elementwise::Add(backend_, *t.z, *t.r, t.z.get()));
    }
    if (mask == nullptr) {
      PSC_RETURN_IF_ERROR(rnn::LstmCell(backend_, *t.z, i > 0 ? c_prev : nullptr, h, c));
    } else {  // the cell's h and c, then the masked rows' kept
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *mask, steps, s, t.m.get(), 1, 0, n, 1));
      PSC_RETURN_IF_ERROR(
          rnn::LstmCell(backend_, *t.z, i > 0 ? c_prev : nullptr, t.hn.get(), t.cn.get()));
      PSC_RETURN_IF_ERROR(
          mask::SelectRows(backend_, t.hn.get(), i > 0 ? h_prev : nullptr, *t.m, h));
      PSC_RETURN_IF_ERROR(
          mask::SelectRows(backend_, t.cn.get(), i > 0 ? c_prev : nullptr, *t.m, c));
    }
    if (training) {
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.z, gates, 0, t.zs.get(),
                                                 steps * gates, s * gates, n, gates));
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *c, units, 0, t.cs.get(), steps * units,
                                                 s * units, n, units));
      if (i + 1 < steps) {  // the next step's h_prev (the first step's slot stays zero)
        PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *h, units, 0, t.hp.get(),
                                                   steps * units, slot(i + 1) * units, n, units));
      }
    }
    PSC_RETURN_IF_ERROR(StepOutput(backend_, l, {i, s, steps, n, units}, *h,
                                   mask != nullptr ? t.m.get() : nullptr, t.hn.get(), t.out.get(),
                                   y));
  }
  return absl::OkStatus();
}

namespace {

// A recurrent layer's backward at one step of a masked sequence: dh (and
// dc, an LSTM's, or null) split into the cell's part (the kept rows') and
// what passes the step to the previous one (the masked rows'), into
// *h_pass (*c_pass); dh and dc keep the cell's. m: the step's mask.
absl::Status SplitMasked(ComputeBackend* be, const DeviceTensor& m, DeviceTensor* dh,
                         DeviceTensor* h_pass, DeviceTensor* dc, DeviceTensor* c_pass) {
  PSC_RETURN_IF_ERROR(mask::SelectRows(be, nullptr, dh, m, h_pass));
  PSC_RETURN_IF_ERROR(mask::SelectRows(be, dh, nullptr, m, dh));
  if (dc == nullptr) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(mask::SelectRows(be, nullptr, dc, m, c_pass));
  return mask::SelectRows(be, dc, nullptr, m, dc);
}

// The gradient reaching the cell of step k, dh: the output's and dh_next
// (StepOutputGradient); with a mask (the step's copied into m), its
// masked rows' (and dc's, an LSTM's) moved into h_pass (c_pass) for the
// previous step (SplitMasked).
absl::Status StepGradient(ComputeBackend* be, const LayerSpec& l, const RecurrentStep& k,
                          const DeviceTensor& g, const DeviceTensor* mask, DeviceTensor* m,
                          const DeviceTensor& dh_next, DeviceTensor* dh, DeviceTensor* h_pass,
                          DeviceTensor* dc = nullptr, DeviceTensor* c_pass = nullptr) {
  if (mask != nullptr) {
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(be, *mask, k.steps, k.s, m, 1, 0, k.n, 1));
  }
  PSC_RETURN_IF_ERROR(StepOutputGradient(be, l, k, g, mask != nullptr ? m : nullptr, dh_next, dh));
  if (mask == nullptr) return absl::OkStatus();
  return SplitMasked(be, *m, dh, h_pass, dc, c_pass);
}

}  // namespace

absl::Status Executor::LstmBackward(Buffers& b, size_t layer, const DeviceTensor& x,
                                    const DeviceTensor* mask, const DeviceTensor& g,
                                    DeviceTensor* dx, const std::function<absl::Status()>& ready) {
  if (FusedLstm(layer, mask)) return LstmLayerBackward(b, layer, x, g, dx, ready);
  const LayerSpec& l = model_->layers()[layer];
  const LayerVariables& v = model_->layer_variables()[layer];
  Buffers::LstmTensors& t = b.lstm.at(layer);
  const int64_t n = t.zs->shape()[0], steps = t.zs->shape()[1];
  const int64_t units = l.outputs, gates = 4 * units;
  auto slot = [&](int64_t i) { return l.go_backwards ? steps - 1 - i : i; };
  for (int64_t i = steps - 1; i >= 0; --i) {
    const int64_t s = slot(i);
    DeviceTensor* dc_next = i + 1 < steps ? t.dc[(i + 1) % 2].get() : nullptr;
    PSC_RETURN_IF_ERROR(StepGradient(backend_, l, {i, s, steps, n, units}, g, mask, t.m.get(),
                                     *t.dh_next, t.dh.get(), t.dh_pass.get(), dc_next,
                                     t.dc_pass.get()));
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.zs, steps * gates, s * gates, t.z.get(),
                                               gates, 0, n, gates));
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.cs, steps * units, s * units,
                                               t.c_step.get(), units, 0, n, units));
    if (i > 0) {
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(
          backend_, *t.cs, steps * units, slot(i - 1) * units, t.c_prev.get(), units, 0, n, units));
    }
    PSC_RETURN_IF_ERROR(rnn::LstmCellBackward(backend_, *t.z, i > 0 ? t.c_prev.get() : nullptr,
                                              *t.c_step, *t.dh, dc_next, t.r.get(),
                                              i > 0 ? t.dc[i % 2].get() : nullptr));
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.r, gates, 0, t.dzs.get(), steps * gates,
                                               s * gates, n, gates));
    if (i > 0) {
      PSC_RETURN_IF_ERROR(
          dense::DenseBackwardData(backend_, *t.r, *params_[v.recurrent], t.dh_next.get()));
      if (mask != nullptr) {
        PSC_RETURN_IF_ERROR(elementwise::Add(backend_, *t.dh_next, *t.dh_pass, t.dh_next.get()));
        if (dc_next != nullptr) {
          PSC_RETURN_IF_ERROR(
              elementwise::Add(backend_, *t.dc[i % 2], *t.dc_pass, t.dc[i % 2].get()));
        }
      }
    }
  }
  if (l.trainable) {  // every step's rows at once
    PSC_RETURN_IF_ERROR(dense::DenseBackwardWeights(backend_, *t.hp, *t.dzs,
                                                    param_grads_[v.recurrent].get(), nullptr));
    PSC_RETURN_IF_ERROR(dense::DenseBackwardWeights(
        backend_, x, *t.dzs, param_grads_[v.kernel].get(), ParamGrad(v.bias)));
  }
  PSC_RETURN_IF_ERROR(ready());
  if (dx == nullptr) return absl::OkStatus();
  return dense::DenseBackwardData(backend_, *t.dzs, *params_[v.kernel], dx);
}

// A GRU as an LSTM runs: the input's projection x W + b_in of every step,
// then per step hz = h_prev U + b_rec (h_prev zeros at the first) and the
// GruCell op; backward, dh_prev = dhz U^T + dh z, and the weight gradients
// (with the recurrent bias's) one Dense gradient each over every step's
// rows. The bias variable [2, 3U] is copied to and from its two rows. With
// reset_after=False (one bias [3U], the input's), GruResetBefore adds the
// reset gate's ops to each step. A mask as an LSTM's.
absl::Status Executor::RunGru(Buffers& b, size_t layer, const DeviceTensor& x,
                              const DeviceTensor* mask, DeviceTensor* y, int64_t n, bool training) {
  const LayerSpec& l = model_->layers()[layer];
  const LayerVariables& v = model_->layer_variables()[layer];
  const Shape& in =
      model_->graph().tensor(model_->graph().sources(static_cast<int>(layer))[0]).shape;
  const int64_t steps = in[0], units = l.outputs, gates = 3 * units;
  Buffers::GruTensors& t = b.gru[layer];
  if (t.xz == nullptr) {
    PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, steps, gates}, {&t.xz, &t.hzs, &t.dxz, &t.dhz}));
    PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, steps, units}, {&t.hp}));
    PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, gates}, {&t.x, &t.hz, &t.dx, &t.dhzt}));
    PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, units},
                                     {&t.h[0], &t.h[1], &t.zero, &t.dh, &t.dh_next, &t.dh_direct}));
    PSC_RETURN_IF_ERROR(AllocateEach(backend_, {gates}, {&t.b_in, &t.b_rec, &t.db_in, &t.db_rec}));
    if (mask != nullptr) {
      PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n}, {&t.m}));
      PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, units}, {&t.hn, &t.out, &t.dh_pass}));
    }
    if (!l.reset_after) {
      PSC_RETURN_IF_ERROR(AllocateEach(backend_, {units, units}, {&t.u_h, &t.du_h}));
      PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, steps, units}, {&t.rhs, &t.dcands}));
      PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, units}, {&t.r, &t.rh, &t.cand, &t.a, &t.c}));
    }
  }
  const DeviceTensor *b_in = nullptr, *b_rec = nullptr;
  if (!l.reset_after) {  // one bias, the input's; u_h: the candidate's columns of U
    b_in = Param(v.bias);
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *params_[v.recurrent], gates, 2 * units,
                                               t.u_h.get(), units, 0, units, units));
  } else if (v.bias >= 0) {  // the variable's two rows
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *params_[v.bias], 2 * gates, 0,
                                               t.b_in.get(), gates, 0, 1, gates));
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *params_[v.bias], 2 * gates, gates,
                                               t.b_rec.get(), gates, 0, 1, gates));
    b_in = t.b_in.get();
    b_rec = t.b_rec.get();
  }
  PSC_RETURN_IF_ERROR(dense::Dense(backend_, x, *params_[v.kernel], b_in, false, t.xz.get()));
  auto slot = [&](int64_t i) { return l.go_backwards ? steps - 1 - i : i; };
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t s = slot(i);
    DeviceTensor* h = t.h[i % 2].get();
    const DeviceTensor* h_prev = i > 0 ? t.h[(i + 1) % 2].get() : t.zero.get();
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.xz, steps * gates, s * gates, t.x.get(),
                                               gates, 0, n, gates));
    PSC_RETURN_IF_ERROR(
        dense::Dense(backend_, *h_prev, *params_[v.recurrent], b_rec, false, t.hz.get()));
    if (!l.reset_after && i > 0) {  // (at the first step h_prev and r h_prev are 0)
      PSC_RETURN_IF_ERROR(GruResetBefore(t, *h_prev, n, units, s, steps, training));
      if (training) {  // the step's x, changed, for the backward
        PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.x, gates, 0, t.xz.get(),
                                                   steps * gates, s * gates, n, gates));
      }
    }
    if (mask == nullptr) {
      PSC_RETURN_IF_ERROR(rnn::GruCell(backend_, *t.x, *t.hz, i > 0 ? h_prev : nullptr, h));
    } else {
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *mask, steps, s, t.m.get(), 1, 0, n, 1));
      PSC_RETURN_IF_ERROR(
          rnn::GruCell(backend_, *t.x, *t.hz, i > 0 ? h_prev : nullptr, t.hn.get()));
      PSC_RETURN_IF_ERROR(
          mask::SelectRows(backend_, t.hn.get(), i > 0 ? h_prev : nullptr, *t.m, h));
    }
    if (training) {
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.hz, gates, 0, t.hzs.get(),
                                                 steps * gates, s * gates, n, gates));
      if (i + 1 < steps) {
        PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *h, units, 0, t.hp.get(),
                                                   steps * units, slot(i + 1) * units, n, units));
      }
    }
    PSC_RETURN_IF_ERROR(StepOutput(backend_, l, {i, s, steps, n, units}, *h,
                                   mask != nullptr ? t.m.get() : nullptr, t.hn.get(), t.out.get(),
                                   y));
  }
  return absl::OkStatus();
}

absl::Status Executor::GruBackward(Buffers& b, size_t layer, const DeviceTensor& x,
                                   const DeviceTensor* mask, const DeviceTensor& g,
                                   DeviceTensor* dx, const std::function<absl::Status()>& ready) {
  const LayerSpec& l = model_->layers()[layer];
  const LayerVariables& v = model_->layer_variables()[layer];
  Buffers::GruTensors& t = b.gru.at(layer);
  const int64_t n = t.xz->shape()[0], steps = t.xz->shape()[1];
  const int64_t units = l.outputs, gates = 3 * units;
  auto slot = [&](int64_t i) { return l.go_backwards ? steps - 1 - i : i; };
  for (int64_t i = steps - 1; i >= 0; --i) {
    const int64_t s = slot(i);
    PSC_RETURN_IF_ERROR(StepGradient(backend_, l, {i, s, steps, n, units}, g, mask, t.m.get(),
                                     *t.dh_next, t.dh.get(), t.dh_pass.get()));
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.xz, steps * gates, s * gates, t.x.get(),
                                               gates, 0, n, gates));
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.hzs, steps * gates, s * gates,
                                               t.hz.get(), gates, 0, n, gates));
    if (i > 0) {  // h_prev: the slot's, the previous step's h
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.hp, steps * units, s * units,
                                                 t.h[0].get(), units, 0, n, units));
    }
    PSC_RETURN_IF_ERROR(rnn::GruCellBackward(backend_, *t.x, *t.hz, i > 0 ? t.h[0].get() : nullptr,
                                             *t.dh, t.dx.get(), t.dhzt.get(),
                                             i > 0 ? t.dh_direct.get() : nullptr));
    if (!l.reset_after && i > 0) {
      PSC_RETURN_IF_ERROR(GruResetBeforeBackward(t, *t.h[0], n, units, s, steps));
    }
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.dx, gates, 0, t.dxz.get(),
                                               steps * gates, s * gates, n, gates));
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.dhzt, gates, 0, t.dhz.get(),
                                               steps * gates, s * gates, n, gates));
    if (i > 0) {
      PSC_RETURN_IF_ERROR(
          dense::DenseBackwardData(backend_, *t.dhzt, *params_[v.recurrent], t.dh_next.get()));
      PSC_RETURN_IF_ERROR(elementwise::Add(backend_, *t.dh_next, *t.dh_direct, t.dh_next.get()));
      if (!l.reset_after) {  // r's path: d(r h_prev) r
        PSC_RETURN_IF_ERROR(elementwise::Add(backend_, *t.dh_next, *t.cand, t.dh_next.get()));
      }
      if (mask != nullptr) {
        PSC_RETURN_IF_ERROR(elementwise::Add(backend_, *t.dh_next, *t.dh_pass, t.dh_next.get()));
      }
    }
  }
  if (l.trainable) {  // every step's rows at once; the biases back into the variable's rows
    const bool bias = v.bias >= 0, two = bias && l.reset_after;
    PSC_RETURN_IF_ERROR(dense::DenseBackwardWeights(
        backend_, *t.hp, *t.dhz, param_grads_[v.recurrent].get(), two ? t.db_rec.get() : nullptr));
    if (!l.reset_after) {  // the candidate's columns: (r h_prev)^T dcand
      PSC_RETURN_IF_ERROR(
          dense::DenseBackwardWeights(backend_, *t.rhs, *t.dcands, t.du_h.get(), nullptr));
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.du_h, units, 0,
                                                 param_grads_[v.recurrent].get(), gates, 2 * units,
                                                 units, units));
    }
    PSC_RETURN_IF_ERROR(
        dense::DenseBackwardWeights(backend_, x, *t.dxz, param_grads_[v.kernel].get(),
                                    two ? t.db_in.get() : (bias ? ParamGrad(v.bias) : nullptr)));
    if (two) {
      DeviceTensor* db = param_grads_[v.bias].get();
      PSC_RETURN_IF_ERROR(
          elementwise::CopyBlock(backend_, *t.db_in, gates, 0, db, 2 * gates, 0, 1, gates));
      PSC_RETURN_IF_ERROR(
          elementwise::CopyBlock(backend_, *t.db_rec, gates, 0, db, 2 * gates, gates, 1, gates));
    }
  }
  PSC_RETURN_IF_ERROR(ready());
  if (dx == nullptr) return absl::OkStatus();
  return dense::DenseBackwardData(backend_, *t.dxz, *params_[v.kernel], dx);
}

// Keras's GRUCell with reset_after=False: hh = tanh(x_h + (r h_prev) U_h),
// r = sigmoid(x_r + h_prev U_r). r h_prev is known once r is, so the step
// is (t.x, t.hz: its xz and h_prev U) r, then the candidate's product,
// added to x's candidate columns, and hz's zeroed: GruCell's
// tanh(x_h + r hz_h) is then Keras's.
absl::Status Executor::GruResetBefore(Buffers::GruTensors& t, const DeviceTensor& h_prev, int64_t n,
                                      int64_t units, int64_t slot, int64_t steps, bool training) {
  const int64_t gates = 3 * units;
  auto column = [&](const DeviceTensor& from, int64_t gate, DeviceTensor* to) {
    return elementwise::CopyBlock(backend_, from, gates, gate * units, to, units, 0, n, units);
  };
  PSC_RETURN_IF_ERROR(column(*t.x, 1, t.a.get()));
  PSC_RETURN_IF_ERROR(column(*t.hz, 1, t.r.get()));
  PSC_RETURN_IF_ERROR(elementwise::Add(backend_, *t.a, *t.r, t.a.get()));
  PSC_RETURN_IF_ERROR(elementwise::Activate(backend_, Activation::kSigmoid, 0, *t.a, t.r.get()));
  PSC_RETURN_IF_ERROR(elementwise::Multiply(backend_, *t.r, h_prev, t.rh.get()));
  if (training) {
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.rh, units, 0, t.rhs.get(),
                                               steps * units, slot * units, n, units));
  }
  PSC_RETURN_IF_ERROR(dense::Dense(backend_, *t.rh, *t.u_h, nullptr, false, t.cand.get()));
  PSC_RETURN_IF_ERROR(column(*t.x, 2, t.a.get()));
  PSC_RETURN_IF_ERROR(elementwise::Add(backend_, *t.a, *t.cand, t.a.get()));
  PSC_RETURN_IF_ERROR(
      elementwise::CopyBlock(backend_, *t.a, units, 0, t.x.get(), gates, 2 * units, n, units));
  return elementwise::CopyBlock(backend_, *t.zero, units, 0, t.hz.get(), gates, 2 * units, n,
                                units);
}

// Its backward after GruCellBackward (t.dx, t.dhzt: the step's, with the
// reset gate's columns 0 since hz's candidate columns were): the
// candidate's gradient dc (x's candidate columns') kept for u_h's gradient;
// d(r h_prev) = dc u_h^T; the reset gate's gradient d(r h_prev) h_prev
// r (1 - r) into both r columns; hz's candidate columns 0 (u_h's gradient is
// apart); t.cand: d(r h_prev) r, r h_prev's part of dh_prev.
absl::Status Executor::GruResetBeforeBackward(Buffers::GruTensors& t, const DeviceTensor& h_prev,
                                              int64_t n, int64_t units, int64_t slot,
                                              int64_t steps) {
  const int64_t gates = 3 * units;
  auto column = [&](const DeviceTensor& from, int64_t gate, DeviceTensor* to) {
    return elementwise::CopyBlock(backend_, from, gates, gate * units, to, units, 0, n, units);
  };
  auto into = [&](const DeviceTensor& from, int64_t gate, DeviceTensor* to) {
    return elementwise::CopyBlock(backend_, from, units, 0, to, gates, gate * units, n, units);
  };
  PSC_RETURN_IF_ERROR(column(*t.dx, 2, t.c.get()));
  PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.c, units, 0, t.dcands.get(),
                                             steps * units, slot * units, n, units));
  PSC_RETURN_IF_ERROR(dense::DenseBackwardData(backend_, *t.c, *t.u_h, t.cand.get()));
  PSC_RETURN_IF_ERROR(column(*t.x, 1, t.a.get()));  // r again
  PSC_RETURN_IF_ERROR(column(*t.hz, 1, t.r.get()));
  PSC_RETURN_IF_ERROR(elementwise::Add(backend_, *t.a, *t.r, t.a.get()));
  PSC_RETURN_IF_ERROR(elementwise::Activate(backend_, Activation::kSigmoid, 0, *t.a, t.r.get()));
  PSC_RETURN_IF_ERROR(elementwise::Multiply(backend_, *t.cand, h_prev, t.a.get()));
  PSC_RETURN_IF_ERROR(
      elementwise::ActivateBackward(backend_, Activation::kSigmoid, 0, *t.r, *t.a, t.a.get()));
  PSC_RETURN_IF_ERROR(into(*t.a, 1, t.dx.get()));
  PSC_RETURN_IF_ERROR(into(*t.a, 1, t.dhzt.get()));
  PSC_RETURN_IF_ERROR(into(*t.zero, 2, t.dhzt.get()));
  return elementwise::Multiply(backend_, *t.cand, *t.r, t.cand.get());
}

// A SimpleRNN as an LSTM runs, its cell h = f(z), z = x W + b + h_prev U
// (f: the layer's activation, none for linear): backward, dz = f'(.) dh
// from the step's z or h (what ActivateBackward takes for f), dh_prev =
// dz U^T, and the weights' gradients one Dense gradient each over every
// step's rows. A mask as an LSTM's.
absl::Status Executor::RunSimpleRnn(Buffers& b, size_t layer, const DeviceTensor& x,
                                    const DeviceTensor* mask, DeviceTensor* y, int64_t n,
                                    bool training) {
  const LayerSpec& l = model_->layers()[layer];
  const LayerVariables& v = model_->layer_variables()[layer];
  const Shape& in =
      model_->graph().tensor(model_->graph().sources(static_cast<int>(layer))[0]).shape;
  const int64_t steps = in[0], units = l.outputs;
  const bool from_input = l.activation && GradientFromInput(*l.activation);
  Buffers::RnnTensors& t = b.rnn[layer];
  if (t.xz == nullptr) {
    PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, steps, units}, {&t.xz, &t.acts, &t.dzs, &t.hp}));
    PSC_RETURN_IF_ERROR(
        AllocateEach(backend_, {n, units}, {&t.z, &t.r, &t.h[0], &t.h[1], &t.dh, &t.dh_next}));
    if (mask != nullptr) {
      PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n}, {&t.m}));
      PSC_RETURN_IF_ERROR(AllocateEach(backend_, {n, units}, {&t.hn, &t.out, &t.dh_pass}));
    }
  }
  PSC_RETURN_IF_ERROR(
      dense::Dense(backend_, x, *params_[v.kernel], Param(v.bias), false, t.xz.get()));
  auto slot = [&](int64_t i) { return l.go_backwards ? steps - 1 - i : i; };
  auto keep = [&](const DeviceTensor& from, int64_t s) {  // into acts' slot s
    return elementwise::CopyBlock(backend_, from, units, 0, t.acts.get(), steps * units, s * units,
                                  n, units);
  };
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t s = slot(i);
    DeviceTensor* h = t.h[i % 2].get();
    const DeviceTensor* h_prev = t.h[(i + 1) % 2].get();
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.xz, steps * units, s * units, t.z.get(),
                                               units, 0, n, units));
    if (i > 0) {
      PSC_RETURN_IF_ERROR(
          dense::Dense(backend_, *h_prev, *params_[v.recurrent], nullptr, false, t.r.get()));
      PSC_RETURN_IF_ERROR(elementwise::Add(backend_, *t.z, *t.r, t.z.get()));
    }
    if (training && from_input) PSC_RETURN_IF_ERROR(keep(*t.z, s));
    DeviceTensor* cell = mask != nullptr ? t.hn.get() : h;
    PSC_RETURN_IF_ERROR(l.activation
                            ? elementwise::Activate(backend_, *l.activation, l.alpha, *t.z, cell)
                            : elementwise::Copy(backend_, *t.z, cell));
    if (training && l.activation && !from_input) PSC_RETURN_IF_ERROR(keep(*cell, s));
    if (mask != nullptr) {
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *mask, steps, s, t.m.get(), 1, 0, n, 1));
      PSC_RETURN_IF_ERROR(
          mask::SelectRows(backend_, t.hn.get(), i > 0 ? h_prev : nullptr, *t.m, h));
    }
    if (training && i + 1 < steps) {
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *h, units, 0, t.hp.get(), steps * units,
                                                 slot(i + 1) * units, n, units));
    }
    PSC_RETURN_IF_ERROR(StepOutput(backend_, l, {i, s, steps, n, units}, *h,
                                   mask != nullptr ? t.m.get() : nullptr, t.hn.get(), t.out.get(),
                                   y));
  }
  return absl::OkStatus();
}

absl::Status Executor::SimpleRnnBackward(Buffers& b, size_t layer, const DeviceTensor& x,
                                         const DeviceTensor* mask, const DeviceTensor& g,
                                         DeviceTensor* dx,
                                         const std::function<absl::Status()>& ready) {
  const LayerSpec& l = model_->layers()[layer];
  const LayerVariables& v = model_->layer_variables()[layer];
  Buffers::RnnTensors& t = b.rnn.at(layer);
  const int64_t n = t.xz->shape()[0], steps = t.xz->shape()[1], units = l.outputs;
  auto slot = [&](int64_t i) { return l.go_backwards ? steps - 1 - i : i; };
  for (int64_t i = steps - 1; i >= 0; --i) {
    const int64_t s = slot(i);
    PSC_RETURN_IF_ERROR(StepGradient(backend_, l, {i, s, steps, n, units}, g, mask, t.m.get(),
                                     *t.dh_next, t.dh.get(), t.dh_pass.get()));
    if (l.activation) {  // dz = f'(.) dh, from the step's z or h
      PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.acts, steps * units, s * units,
                                                 t.z.get(), units, 0, n, units));
      PSC_RETURN_IF_ERROR(
          elementwise::ActivateBackward(backend_, *l.activation, l.alpha, *t.z, *t.dh, t.dh.get()));
    }
    PSC_RETURN_IF_ERROR(elementwise::CopyBlock(backend_, *t.dh, units, 0, t.dzs.get(),
                                               steps * units, s * units, n, units));
    if (i > 0) {
      PSC_RETURN_IF_ERROR(
          dense::DenseBackwardData(backend_, *t.dh, *params_[v.recurrent], t.dh_next.get()));
      if (mask != nullptr) {
        PSC_RETURN_IF_ERROR(elementwise::Add(backend_, *t.dh_next, *t.dh_pass, t.dh_next.get()));
      }
    }
  }
  if (l.trainable) {  // every step's rows at once
    PSC_RETURN_IF_ERROR(dense::DenseBackwardWeights(backend_, *t.hp, *t.dzs,
                                                    param_grads_[v.recurrent].get(), nullptr));
    PSC_RETURN_IF_ERROR(dense::DenseBackwardWeights(
        backend_, x, *t.dzs, param_grads_[v.kernel].get(), ParamGrad(v.bias)));
  }
  PSC_RETURN_IF_ERROR(ready());
  if (dx == nullptr) return absl::OkStatus();
  return dense::DenseBackwardData(backend_, *t.dzs, *params_[v.kernel], dx);
}

}  // namespace compute
}  // namespace psc
