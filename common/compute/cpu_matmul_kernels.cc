#include "common/compute/cpu_matmul_kernels.h"

#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "common/base/status_macros.h"
#include "common/compute/cpu_conv.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/matmul_ops.h"
#include "common/compute/normalize_math.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

using dnnl::memory;
using dt = dnnl::memory::data_type;

struct MatMulPrims {
  memory::desc a, b, y, scratch;
  dnnl::matmul prim;
};

// The kernel's state: the backend's context and the primitives by shape
// and transposes. Thread-compatible, as the backend.
struct MatMulState {
  CpuKernelContext* cpu;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool>, MatMulPrims> prims;

  // Throws dnnl::error (call inside RunOneDnn).
  MatMulPrims& For(int64_t batch, const OpAttrs::MatMul& mm) {
    const auto key = std::make_tuple(batch, mm.m, mm.k, mm.n, mm.transpose_a, mm.transpose_b);
    auto it = prims.find(key);
    if (it != prims.end()) return it->second;
    const int64_t m = mm.m, k = mm.k, n = mm.n;
    MatMulPrims p;
    // A transposed operand is the stored matrix read column by column.
    p.a = memory::desc({batch, m, k}, dt::f32,
                       mm.transpose_a ? memory::dims{m * k, 1, m} : memory::dims{m * k, k, 1});
    p.b = memory::desc({batch, k, n}, dt::f32,
                       mm.transpose_b ? memory::dims{k * n, 1, k} : memory::dims{k * n, n, 1});
    p.y = memory::desc({batch, m, n}, dt::f32, memory::dims{m * n, n, 1});
    dnnl::matmul::desc desc(p.a, p.b, p.y);
    dnnl::matmul::primitive_desc pd(desc, PrimitiveAttr(false), cpu->engine());
    p.prim = dnnl::matmul(pd);
    p.scratch = pd.scratchpad_desc();
    return prims.emplace(key, std::move(p)).first->second;
  }
};

absl::Status BatchMatMulKernel(MatMulState& s, KernelInputs in, const OpAttrs& attrs,
                               KernelOutputs out) {
  constexpr const char* kOp = matmul::kBatchMatMul;
  const DeviceTensor &a = *in[0], &b = *in[1];
  DeviceTensor* y = out[0];
  int64_t batch = 0;
  PSC_RETURN_IF_ERROR(matmul::CheckBatchMatMul(kOp, a, b, attrs.matmul, *y, &batch));
  s.cpu->UseThreads();
  PSC_ASSIGN_OR_RETURN(const float* av, s.cpu->Plain(kOp, a, ReorderSlot::kFirst));
  PSC_ASSIGN_OR_RETURN(const float* bv, s.cpu->Plain(kOp, b, ReorderSlot::kSecond));
  return s.cpu->RunOneDnn(kOp, [&] {
    MatMulPrims& p = s.For(batch, attrs.matmul);
    const dnnl::engine& engine = s.cpu->engine();
    p.prim.execute(s.cpu->stream(),
                   {{DNNL_ARG_SRC, memory(p.a, engine, const_cast<float*>(av))},
                    {DNNL_ARG_WEIGHTS, memory(p.b, engine, const_cast<float*>(bv))},
                    {DNNL_ARG_DST, memory(p.y, engine, Data(y))},
                    {DNNL_ARG_SCRATCHPAD, s.cpu->Scratchpad(p.scratch)}});
    Cpu(y).set_layout(Layout::kPlain);
  });
}

absl::Status L2NormalizeKernel(MatMulState& s, KernelInputs in, const OpAttrs& attrs,
                               KernelOutputs out) {
  constexpr const char* kOp = matmul::kL2Normalize;
  const DeviceTensor& x = *in[0];
  DeviceTensor* y = out[0];
  int64_t batch = 0;
  PSC_RETURN_IF_ERROR(matmul::CheckL2Normalize(kOp, x, attrs, *y, &batch));
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "y", *y));
  PSC_ASSIGN_OR_RETURN(const float* xv, s.cpu->Plain(kOp, x, ReorderSlot::kFirst));
  const OpAttrs::MatMul& mm = attrs.matmul;
  float* yv = Data(y);
  for (int64_t v = 0; v < batch * mm.m; ++v) {
    normalize::Forward(xv, yv, v, mm.m, mm.k, mm.transpose_a, attrs.epsilon);
  }
  Cpu(y).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

absl::Status L2NormalizeGradientKernel(MatMulState& s, KernelInputs in, const OpAttrs& attrs,
                                       KernelOutputs out) {
  constexpr const char* kOp = matmul::kL2NormalizeGradient;
  const DeviceTensor &x = *in[0], &dy = *in[1];
  DeviceTensor* dx = out[0];
  int64_t batch = 0;
  PSC_RETURN_IF_ERROR(matmul::CheckL2Normalize(kOp, x, attrs, *dx, &batch));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, x.shape()));
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dy", dy));
  PSC_RETURN_IF_ERROR(WantFloat(kOp, "dx", *dx));
  PSC_ASSIGN_OR_RETURN(const float* xv, s.cpu->Plain(kOp, x, ReorderSlot::kFirst));
  PSC_ASSIGN_OR_RETURN(const float* dyv, s.cpu->Plain(kOp, dy, ReorderSlot::kSecond));
  const OpAttrs::MatMul& mm = attrs.matmul;
  float* dxv = Data(dx);
  for (int64_t v = 0; v < batch * mm.m; ++v) {
    normalize::Backward(xv, dyv, dxv, v, mm.m, mm.k, mm.transpose_a, attrs.epsilon);
  }
  Cpu(dx).set_layout(Layout::kPlain);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCpuMatMulKernels(CpuKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<MatMulState> kKernels[] = {
      {matmul::kBatchMatMul, 2, 1, BatchMatMulKernel, {}, matmul::Accepts},
      {matmul::kL2Normalize, 1, 1, L2NormalizeKernel, {}, matmul::AcceptsNormalize},
      {matmul::kL2NormalizeGradient, 2, 1, L2NormalizeGradientKernel, {}, matmul::AcceptsNormalize},
  };
  auto state = std::make_shared<MatMulState>();
  state->cpu = context;
  return RegisterKernels<MatMulState>(std::move(state), kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
