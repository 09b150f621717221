// Kernels by op name: what a backend runs for each op it has moved off its
// virtual methods (backend.h's ComputeBackend::Run dispatches through it).
//
// A backend fills its own registry when it is made (the CPU backend with
// RegisterCpuElementwiseKernels, the CUDA backend, inside the GPU plugin,
// with RegisterCudaElementwiseKernels), each kernel bound to the backend's
// state (its oneDNN engine and reorder scratch, its CUDA stream), so there
// is no process-wide table and CUDA kernels exist only once the plugin has
// loaded and made a backend. An op's meaning (its tensors, attributes, shape
// rule and double-precision reference) is its OpDef in common/ops/, which
// the conformance suite checks every registered kernel against.
#ifndef PSC_COMMON_COMPUTE_KERNEL_REGISTRY_H_
#define PSC_COMMON_COMPUTE_KERNEL_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/compute/backend.h"

namespace psc {
namespace compute {

// The attributes ops take, one small struct for all of them; each op reads
// the fields its OpDef names and ignores the rest.
struct OpAttrs {
  Activation activation = Activation::kRelu;        // Activate, ActivateBackward
  float alpha = 0.0f;                               // the activation's parameter
  float scalar = 1.0f;                              // Scale's factor
  bool max = true;                                  // Extremum(Gradient): maximum, or minimum
  Window window = kPool2x2;                         // pooling's or a convolution's window
  GlobalPooling pooling = GlobalPooling::kAverage;  // GlobalPool(Backward)
  float epsilon = 1e-3f;                            // batch normalization's
  bool relu = false;                                // Dense, Conv2D: a ReLU fused after it
  // Conv2DBackwardData: x's height and width, which dy does not decide
  // when a stride exceeds 1 (TensorFlow's input_sizes); 0: any (dx's).
  int64_t x_height = 0, x_width = 0;
  // SoftmaxCrossEntropy: its gradient's factor (1/n for the batch's mean)
  // and Keras's label_smoothing.
  float grad_scale = 1.0f;
  float label_smoothing = 0.0f;
  // CopyBlock: x and y seen as row-major matrices of `rows` rows, x of
  // x_cols columns and y of y_cols; columns [x_first, x_first + cols) of x
  // go to [y_first, y_first + cols) of y.
  struct Block {
    int64_t rows = 0, cols = 0;
    int64_t x_cols = 0, x_first = 0;
    int64_t y_cols = 0, y_first = 0;
  } block;
  // BatchMatMul: each example's a [M,K] (transpose_a: stored [K,M]) times
  // b [K,N] (transpose_b: stored [N,K]).
  struct MatMul {
    int64_t m = 0, k = 0, n = 0;
    bool transpose_a = false, transpose_b = false;
  } matmul;
  // LayerNorm, LayerNormBackward: the values of each row (the normalized
  // axes), for the shape rule of common/ops/; kernels count the rows from
  // the statistics' tensors.
  int64_t row_size = 0;
  // Transpose: output axis i is input axis perm[i].
  std::vector<int> perm;
  // LstmLayer(Backward): the steps taken last to first (the sequence out
  // in the input's order); whether the forward keeps what its backward
  // needs; which layer of which model it runs (rnn_ops.h).
  bool reverse = false, training = false;
  int64_t instance = 0;
  // Cast: the output's dtype (its reference rounds to it).
  DType dtype = DType::kFloat32;
};

// A kernel's tensors: its inputs, read; its outputs, written.
using KernelInputs = absl::Span<const DeviceTensor* const>;
using KernelOutputs = absl::Span<DeviceTensor* const>;

// A kernel: reads `in`, writes every element of each of `out`. The tensors
// are the op's, in its order; their counts were checked against the
// registration. Shapes and dtypes are the kernel's to check
// (INVALID_ARGUMENT naming the op and tensor).
using Kernel =
    std::function<absl::Status(KernelInputs in, const OpAttrs& attrs, KernelOutputs out)>;

// Which of an op's tensors may be null, bit i for tensor i: a dense
// layer's bias and its gradient when it has none.
struct OptionalTensors {
  uint32_t inputs = 0;
  uint32_t outputs = 0;
};

// Whether a kernel runs the op of a capability query (backend.h's OpSpec:
// its main shapes and window), for soft device placement; null: any shape
// the backend takes at all (ComputeBackend::Supports).
using Accepts = bool (*)(const OpSpec& spec);

// Which floats a kernel's tensors may be held in. kFloat32: only float32;
// a bfloat16 or float16 tensor given to the op is cast to a float32 copy
// for it and its outputs are cast back (ComputeBackend::Run), so the op
// computes in float32 and rounds what it writes. kBFloat16: float32 or
// bfloat16 (a float16 tensor goes through float32 copies); kAny: float32,
// bfloat16 or float16. Each float tensor's dtype may differ; the kernel
// computes in the dtype of its main output (conv_ops.h, dense_ops.h say
// which) and converts the others itself.
enum class KernelDtypes { kFloat32, kBFloat16, kAny };
// Whether a kernel registered with `dtypes` takes a tensor of `dtype`
// (ids and float64 always: kernels check those themselves).
inline bool KernelTakes(KernelDtypes dtypes, DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return dtypes != KernelDtypes::kFloat32;
    case DType::kFloat16:
      return dtypes == KernelDtypes::kAny;
    default:
      return true;
  }
}

// For a kernel that takes low-precision tensors only in some cases (a
// pooling kernel: bfloat16 throughout, 2x2 windows): whether it runs these
// tensors and attributes as they are; when not, ComputeBackend::Run gives it
// float32 copies, as a float32-only kernel's. Null: whenever `dtypes` says.
using TakesLowPrecision = bool (*)(absl::Span<const DeviceTensor* const> in, const OpAttrs& attrs,
                                   absl::Span<DeviceTensor* const> out);

// Whether a and b are both given and held in one dtype: what a kernel's
// 16-bit path takes where its two activations must share the format.
inline bool SameDtype(const DeviceTensor* a, const DeviceTensor* b) {
  return a != nullptr && b != nullptr && a->dtype() == b->dtype();
}

struct RegisteredKernel {
  int inputs = 0;
  int outputs = 0;
  OptionalTensors optional;
  Kernel run;
  Accepts accepts = nullptr;
  KernelDtypes dtypes = KernelDtypes::kFloat32;
  TakesLowPrecision takes = nullptr;
  // Bit o: run on 16-bit inputs, output o is rounded to the format once
  // more than computing in float32 and rounding what it writes would:
  // a float32 output computed in the format and widened (cuDNN's filter
  // gradient, as TensorFlow's), or a 16-bit output rounded before its bias
  // is added (cuDNN's 16-bit Conv2D, as TensorFlow's BiasAdd after it). The
  // conformance suite allows those outputs that rounding, and no other.
  uint32_t extra_rounding = 0;
};

// Thread-compatible: filled once when its backend is made, then only read.
class KernelRegistry {
 public:
  // INVALID_ARGUMENT for an empty name, counts below 0 (inputs) or 1
  // (outputs) or over 32, an optional tensor past them, or no kernel;
  // ALREADY_EXISTS if `op` has one.
  absl::Status Register(std::string op, int inputs, int outputs, Kernel kernel,
                        OptionalTensors optional = {}, Accepts accepts = nullptr,
                        KernelDtypes dtypes = KernelDtypes::kFloat32,
                        TakesLowPrecision takes = nullptr, uint32_t extra_rounding = 0);
  // Null when `op` has no kernel here.
  const RegisteredKernel* Find(absl::string_view op) const;
  // The ops with a kernel, in name order.
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, RegisteredKernel, std::less<>> kernels_;
};

// One kernel of a backend's family, as a function of its context.
template <typename Context>
struct KernelEntry {
  const char* op;
  int inputs;
  int outputs;
  absl::Status (*run)(Context& context, KernelInputs in, const OpAttrs& attrs, KernelOutputs out);
  OptionalTensors optional = {};
  Accepts accepts = nullptr;
  KernelDtypes dtypes = KernelDtypes::kFloat32;
  TakesLowPrecision takes = nullptr;
  uint32_t extra_rounding = 0;
};

// Registers each of `entries` into `registry`, bound to `context`, which
// the registered kernels own together (and free with the registry). Stops
// at the first error.
template <typename Context>
absl::Status RegisterKernels(std::shared_ptr<Context> context,
                             absl::Span<const KernelEntry<Context>> entries,
                             KernelRegistry* registry) {
  for (const KernelEntry<Context>& e : entries) {
    absl::Status s = registry->Register(
        e.op, e.inputs, e.outputs,
        [context, run = e.run](KernelInputs in, const OpAttrs& attrs, KernelOutputs out) {
          return run(*context, in, attrs, out);
        },
        e.optional, e.accepts, e.dtypes, e.takes, e.extra_rounding);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The same with a context the kernels do not own (it must outlive the
// registry's use).
template <typename Context>
absl::Status RegisterKernels(Context* context, absl::Span<const KernelEntry<Context>> entries,
                             KernelRegistry* registry) {
  return RegisterKernels(std::shared_ptr<Context>(std::shared_ptr<Context>(), context), entries,
                         registry);
}

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_KERNEL_REGISTRY_H_
