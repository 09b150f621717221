#include "common/compute/cpu_onednn_eltwise.h"

#include <omp.h>

#include "common/compute/cpu_conv.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

// Below this many values a primitive runs on one thread: a recurrent
// layer's step is a few thousand, where waking the others costs more than
// it saves.
constexpr int64_t kSerialValues = int64_t{1} << 16;

// Sets this thread's OpenMP thread count to one while it lives, then back
// to what it was (whatever the backend's setting, "all cores" included).
class OneThread {
 public:
  OneThread() : before_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(before_); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  const int before_;
};

// Runs `run` on one OpenMP thread when `n` is small.
template <typename F>
void SizedThreads(int64_t n, F&& run) {
  if (n >= kSerialValues) return run();
  OneThread one;
  run();
}

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using dt = dnnl::memory::data_type;

algorithm AlgorithmOf(Activation f) {
  switch (f) {
    case Activation::kGelu:
      return algorithm::eltwise_gelu_erf;
    case Activation::kSigmoid:
      return algorithm::eltwise_logistic;
    default:
      return algorithm::eltwise_tanh;
  }
}

memory::desc Flat(int64_t n) { return memory::desc({n}, dt::f32, memory::format_tag::a); }
memory::desc Rows(int64_t rows, int64_t cols) {
  return memory::desc({rows, cols}, dt::f32, memory::format_tag::ab);
}

}  // namespace

bool OneDnnEltwise::Covers(Activation f) {
  return f == Activation::kGelu || f == Activation::kSigmoid || f == Activation::kTanh;
}

absl::Status OneDnnEltwise::Forward(const char* op, Activation f, const float* x, float* y,
                                    int64_t n) {
  if (n <= 0) return absl::OkStatus();
  return cpu_->RunOneDnn(op, [&] {
    const Key key{static_cast<int>(f), 1, n};
    auto it = forward_.find(key);
    if (it == forward_.end()) {
      dnnl::eltwise_forward::desc d(prop_kind::forward_training, AlgorithmOf(f), Flat(n), 0, 0);
      dnnl::eltwise_forward::primitive_desc pd(d, PrimitiveAttr(false), cpu_->engine());
      it = forward_.emplace(key, Made<dnnl::eltwise_forward>{pd.scratchpad_desc(), {pd}}).first;
    }
    const dnnl::engine& e = cpu_->engine();
    SizedThreads(n, [&] {
      it->second.prim.execute(cpu_->stream(),
                              {{DNNL_ARG_SRC, memory(Flat(n), e, const_cast<float*>(x))},
                               {DNNL_ARG_DST, memory(Flat(n), e, y)},
                               {DNNL_ARG_SCRATCHPAD, cpu_->Scratchpad(it->second.scratch)}});
      cpu_->stream().wait();
    });
  });
}

absl::Status OneDnnEltwise::GeluBackward(const char* op, const float* x, const float* dy, float* dx,
                                         int64_t n) {
  if (n <= 0) return absl::OkStatus();
  return cpu_->RunOneDnn(op, [&] {
    const Key key{static_cast<int>(Activation::kGelu), 1, n};
    auto it = backward_.find(key);
    if (it == backward_.end()) {
      const dnnl::engine& e = cpu_->engine();
      dnnl::eltwise_forward::desc fd(prop_kind::forward_training, algorithm::eltwise_gelu_erf,
                                     Flat(n), 0, 0);
      dnnl::eltwise_forward::primitive_desc hint(fd, PrimitiveAttr(false), e);
      dnnl::eltwise_backward::desc bd(algorithm::eltwise_gelu_erf, Flat(n), Flat(n), 0, 0);
      dnnl::eltwise_backward::primitive_desc pd(bd, PrimitiveAttr(false), e, hint);
      it = backward_.emplace(key, Made<dnnl::eltwise_backward>{pd.scratchpad_desc(), {pd}}).first;
    }
    const dnnl::engine& e = cpu_->engine();
    SizedThreads(n, [&] {
      it->second.prim.execute(cpu_->stream(),
                              {{DNNL_ARG_SRC, memory(Flat(n), e, const_cast<float*>(x))},
                               {DNNL_ARG_DIFF_DST, memory(Flat(n), e, const_cast<float*>(dy))},
                               {DNNL_ARG_DIFF_SRC, memory(Flat(n), e, dx)},
                               {DNNL_ARG_SCRATCHPAD, cpu_->Scratchpad(it->second.scratch)}});
      cpu_->stream().wait();
    });
  });
}

absl::Status OneDnnEltwise::Softmax(const char* op, const float* x, float* y, int64_t rows,
                                    int64_t cols) {
  if (rows <= 0 || cols <= 0) return absl::OkStatus();
  return cpu_->RunOneDnn(op, [&] {
    const Key key{0, rows, cols};
    auto it = softmax_.find(key);
    if (it == softmax_.end()) {
      dnnl::softmax_forward::desc d(prop_kind::forward_training, Rows(rows, cols), 1);
      dnnl::softmax_forward::primitive_desc pd(d, PrimitiveAttr(false), cpu_->engine());
      it = softmax_.emplace(key, Made<dnnl::softmax_forward>{pd.scratchpad_desc(), {pd}}).first;
    }
    const dnnl::engine& e = cpu_->engine();
    it->second.prim.execute(cpu_->stream(),
                            {{DNNL_ARG_SRC, memory(Rows(rows, cols), e, const_cast<float*>(x))},
                             {DNNL_ARG_DST, memory(Rows(rows, cols), e, y)},
                             {DNNL_ARG_SCRATCHPAD, cpu_->Scratchpad(it->second.scratch)}});
  });
}

absl::Status OneDnnEltwise::SoftmaxBackward(const char* op, const float* y, const float* dy,
                                            float* dx, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return absl::OkStatus();
  return cpu_->RunOneDnn(op, [&] {
    const Key key{0, rows, cols};
    auto it = softmax_backward_.find(key);
    if (it == softmax_backward_.end()) {
      const dnnl::engine& e = cpu_->engine();
      dnnl::softmax_forward::desc fd(prop_kind::forward_training, Rows(rows, cols), 1);
      dnnl::softmax_forward::primitive_desc hint(fd, PrimitiveAttr(false), e);
      dnnl::softmax_backward::desc bd(Rows(rows, cols), Rows(rows, cols), 1);
      dnnl::softmax_backward::primitive_desc pd(bd, PrimitiveAttr(false), e, hint);
      it = softmax_backward_.emplace(key, Made<dnnl::softmax_backward>{pd.scratchpad_desc(), {pd}})
               .first;
    }
    const dnnl::engine& e = cpu_->engine();
    it->second.prim.execute(
        cpu_->stream(), {{DNNL_ARG_DST, memory(Rows(rows, cols), e, const_cast<float*>(y))},
                         {DNNL_ARG_DIFF_DST, memory(Rows(rows, cols), e, const_cast<float*>(dy))},
                         {DNNL_ARG_DIFF_SRC, memory(Rows(rows, cols), e, dx)},
                         {DNNL_ARG_SCRATCHPAD, cpu_->Scratchpad(it->second.scratch)}});
  });
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
