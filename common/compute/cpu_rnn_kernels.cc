#include "common/compute/cpu_rnn_kernels.h"

#include <cstring>
#include <memory>
#include <vector>

#include "common/base/status_macros.h"
#include "common/compute/cpu_onednn_eltwise.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/rnn_math.h"
#include "common/compute/rnn_ops.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

const float* In(const DeviceTensor* t) { return t == nullptr ? nullptr : Data(*t); }
float* Out(DeviceTensor* t) { return t == nullptr ? nullptr : Data(t); }

// The LSTM kernels' state: the backend, oneDNN's sigmoid and tanh (a
// step's gates at once, vectorized: libm's one value at a time was half an
// LSTM's training step), and their scratch: the activated gates [n, 4U],
// the g gate's and tanh(c)'s [n, U].
// Below this many values of a step a loop runs on one thread.
constexpr int64_t kRnnParallelValues = int64_t{1} << 16;

struct RnnState {
  explicit RnnState(CpuKernelContext* c) : cpu(c), onednn(c) {}
  CpuKernelContext* cpu;
  OneDnnEltwise onednn;
  std::vector<float> act, g, tc;
};

// act = sigmoid(z) for the gates i, f, o and s.g = tanh(z_g), from z [n, 4U].
absl::Status LstmGates(RnnState& s, const char* op, const float* z, int64_t rows, int64_t units) {
  const int64_t n = rows * units;
  s.act.resize(static_cast<size_t>(4 * n));
  s.g.resize(static_cast<size_t>(n));
  s.tc.resize(static_cast<size_t>(n));
  PSC_RETURN_IF_ERROR(s.onednn.Forward(op, Activation::kSigmoid, z, s.act.data(), 4 * n));
  float* g = s.g.data();
#pragma omp parallel for schedule(static) if (rows * units >= kRnnParallelValues)
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(g + r * units, z + r * 4 * units + 2 * units, units * sizeof(float));
  }
  return s.onednn.Forward(op, Activation::kTanh, g, g, n);
}

// Rank-2 tensors, always plain: c = f c_prev + i g, h = o tanh(c).
absl::Status LstmCellKernel(RnnState& s, KernelInputs in, const OpAttrs&, KernelOutputs out) {
  const DeviceTensor& z = *in[0];
  int64_t rows = 0, units = 0;
  PSC_RETURN_IF_ERROR(rnn::CheckLstm(
      rnn::kLstmCell, z, {{"c_prev", in[1]}, {"h", out[0]}, {"c", out[1]}}, &rows, &units));
  s.cpu->UseThreads();
  PSC_RETURN_IF_ERROR(LstmGates(s, rnn::kLstmCell, Data(z), rows, units));
  const float *cp = In(in[1]), *act = s.act.data(), *g = s.g.data();
  float *h = Data(out[0]), *c = Data(out[1]);
#pragma omp parallel for schedule(static) if (rows * units >= kRnnParallelValues)
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = act + r * 4 * units;
    const int64_t o = r * units;
#pragma omp simd
    for (int64_t j = 0; j < units; ++j) {
      c[o + j] = (cp == nullptr ? 0.0f : a[units + j] * cp[o + j]) + a[j] * g[o + j];
    }
  }
  float* tc = s.tc.data();
  PSC_RETURN_IF_ERROR(s.onednn.Forward(rnn::kLstmCell, Activation::kTanh, c, tc, rows * units));
#pragma omp parallel for schedule(static) if (rows * units >= kRnnParallelValues)
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = act + r * 4 * units + 3 * units;
    const int64_t o = r * units;
#pragma omp simd
    for (int64_t j = 0; j < units; ++j) h[o + j] = a[j] * tc[o + j];
  }
  return absl::OkStatus();
}

// The gates again from z (as the forward), then every gradient in one
// vectorized pass (rnn_math.h's LstmBackward, row by row).
absl::Status LstmCellBackwardKernel(RnnState& s, KernelInputs in, const OpAttrs&,
                                    KernelOutputs out) {
  const DeviceTensor& z = *in[0];
  int64_t rows = 0, units = 0;
  PSC_RETURN_IF_ERROR(rnn::CheckLstm(
      rnn::kLstmCellBackward, z,
      {{"c_prev", in[1]}, {"c", in[2]}, {"dh", in[3]}, {"dc", in[4]}, {"dc_prev", out[1]}}, &rows,
      &units));
  PSC_RETURN_IF_ERROR(WantShape(rnn::kLstmCellBackward, "dz", *out[0], z.shape()));
  s.cpu->UseThreads();
  PSC_RETURN_IF_ERROR(LstmGates(s, rnn::kLstmCellBackward, Data(z), rows, units));
  float* tcv = s.tc.data();
  PSC_RETURN_IF_ERROR(
      s.onednn.Forward(rnn::kLstmCellBackward, Activation::kTanh, Data(*in[2]), tcv, rows * units));
  const float *cp = In(in[1]), *dh = Data(*in[3]), *dc = In(in[4]), *act = s.act.data(),
              *gv = s.g.data(), *tc = tcv;
  float *dz = Data(out[0]), *dcp = Out(out[1]);
#pragma omp parallel for schedule(static) if (rows * units >= kRnnParallelValues)
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = act + r * 4 * units;
    float* d = dz + r * 4 * units;
    const int64_t o = r * units;
#pragma omp simd
    for (int64_t j = 0; j < units; ++j) {
      const float i = a[j], f = a[units + j], og = a[3 * units + j];
      const float g = gv[o + j], t = tc[o + j];
      const float prev = cp == nullptr ? 0.0f : cp[o + j];
      const float dct = (dc == nullptr ? 0.0f : dc[o + j]) + dh[o + j] * og * (1.0f - t * t);
      d[j] = dct * g * i * (1.0f - i);
      d[units + j] = dct * prev * f * (1.0f - f);
      d[2 * units + j] = dct * i * (1.0f - g * g);
      d[3 * units + j] = dh[o + j] * t * og * (1.0f - og);
      if (dcp != nullptr) dcp[o + j] = dct * f;
    }
  }
  return absl::OkStatus();
}

absl::Status GruCellKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs&,
                           KernelOutputs out) {
  int64_t rows = 0, units = 0;
  PSC_RETURN_IF_ERROR(rnn::CheckGru(rnn::kGruCell, *in[0], {{"hz", in[1]}},
                                    {{"h_prev", in[2]}, {"h", out[0]}}, &rows, &units));
  cpu.UseThreads();
  const float *xz = Data(*in[0]), *hz = Data(*in[1]), *hp = In(in[2]);
  float* h = Data(out[0]);
  const int64_t n = rows * units;
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < n; ++e) rnn::GruForward(xz, hz, hp, units, e, h);
  return absl::OkStatus();
}

absl::Status GruCellBackwardKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs&,
                                   KernelOutputs out) {
  int64_t rows = 0, units = 0;
  PSC_RETURN_IF_ERROR(rnn::CheckGru(
      rnn::kGruCellBackward, *in[0], {{"hz", in[1]}, {"dxz", out[0]}, {"dhz", out[1]}},
      {{"h_prev", in[2]}, {"dh", in[3]}, {"dh_prev", out[2]}}, &rows, &units));
  cpu.UseThreads();
  const float *xz = Data(*in[0]), *hz = Data(*in[1]), *hp = In(in[2]), *dh = Data(*in[3]);
  float *dxz = Data(out[0]), *dhz = Data(out[1]), *dhp = Out(out[2]);
  const int64_t n = rows * units;
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < n; ++e) rnn::GruBackward(xz, hz, hp, dh, units, e, dxz, dhz, dhp);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCpuRnnKernels(CpuKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<RnnState> kLstm[] = {
      {rnn::kLstmCell, 2, 2, LstmCellKernel, {/*inputs=*/0b10, 0}},
      {rnn::kLstmCellBackward,
       5,
       2,
       LstmCellBackwardKernel,
       {/*inputs=*/0b10010, /*outputs=*/0b10}},
  };
  PSC_RETURN_IF_ERROR(
      RegisterKernels<RnnState>(std::make_shared<RnnState>(context), kLstm, registry));
  static constexpr KernelEntry<CpuKernelContext> kKernels[] = {
      {rnn::kGruCell, 3, 1, GruCellKernel, {/*inputs=*/0b100, 0}},
      {rnn::kGruCellBackward, 4, 3, GruCellBackwardKernel, {/*inputs=*/0b100, /*outputs=*/0b100}},
  };
  return RegisterKernels<CpuKernelContext>(context, kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
