// oneDNN's eltwise and softmax primitives for the CPU kernels that apply a
// transcendental function to many values (GELU, sigmoid, tanh, softmax,
// and the LSTM cell's gates): oneDNN vectorizes them for the CPU it runs on
// (AVX2, AVX-512), where our own loops call libm one value at a time. Each
// primitive is made once per shape and kept. Thread-compatible, as the
// backend whose engine it uses.
#ifndef PSC_COMMON_COMPUTE_CPU_ONEDNN_ELTWISE_H_
#define PSC_COMMON_COMPUTE_CPU_ONEDNN_ELTWISE_H_

#include <cstdint>
#include <map>
#include <tuple>

#include "absl/status/status.h"
#include "common/compute/backend.h"
#include "common/compute/cpu_kernel_context.h"
#include "dnnl.hpp"

namespace psc {
namespace compute {
namespace cpu {

class OneDnnEltwise {
 public:
  // `cpu` is not owned and must outlive this.
  explicit OneDnnEltwise(CpuKernelContext* cpu) : cpu_(cpu) {}

  // Whether Forward takes f: gelu, sigmoid, tanh.
  static bool Covers(Activation f);

  // y = f(x) over n values (y may be x). INTERNAL or RESOURCE_EXHAUSTED
  // naming `op` where oneDNN fails.
  absl::Status Forward(const char* op, Activation f, const float* x, float* y, int64_t n);
  // dx = dy gelu'(x) over n values (dx may be dy).
  absl::Status GeluBackward(const char* op, const float* x, const float* dy, float* dx, int64_t n);
  // Softmax over the rows of cols values, and its gradient from the output
  // y (dx may be dy).
  absl::Status Softmax(const char* op, const float* x, float* y, int64_t rows, int64_t cols);
  absl::Status SoftmaxBackward(const char* op, const float* y, const float* dy, float* dx,
                               int64_t rows, int64_t cols);

 private:
  using Key = std::tuple<int, int64_t, int64_t>;  // what, rows, cols

  // A primitive and the scratchpad it takes (the backend's, as every
  // primitive's: oneDNN's own is per thread).
  template <typename P>
  struct Made {
    dnnl::memory::desc scratch;
    P prim;
  };

  CpuKernelContext* cpu_;
  std::map<Key, Made<dnnl::eltwise_forward>> forward_;
  std::map<Key, Made<dnnl::eltwise_backward>> backward_;
  std::map<Key, Made<dnnl::softmax_forward>> softmax_;
  std::map<Key, Made<dnnl::softmax_backward>> softmax_backward_;
};

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_ONEDNN_ELTWISE_H_
