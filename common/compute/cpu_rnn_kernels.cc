#include "common/compute/cpu_rnn_kernels.h"

#include "common/base/status_macros.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/rnn_math.h"
#include "common/compute/rnn_ops.h"

namespace psc {
namespace compute {
namespace cpu {
namespace {

const float* In(const DeviceTensor* t) { return t == nullptr ? nullptr : Data(*t); }
float* Out(DeviceTensor* t) { return t == nullptr ? nullptr : Data(t); }

// Rank-2 tensors, always plain.
absl::Status LstmCellKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs&,
                            KernelOutputs out) {
  const DeviceTensor& z = *in[0];
  int64_t rows = 0, units = 0;
  PSC_RETURN_IF_ERROR(rnn::CheckLstm(
      rnn::kLstmCell, z, {{"c_prev", in[1]}, {"h", out[0]}, {"c", out[1]}}, &rows, &units));
  cpu.UseThreads();
  const float *zv = Data(z), *cp = In(in[1]);
  float *h = Data(out[0]), *c = Data(out[1]);
  const int64_t n = rows * units;
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < n; ++e) rnn::LstmForward(zv, cp, units, e, h, c);
  return absl::OkStatus();
}

absl::Status LstmCellBackwardKernel(CpuKernelContext& cpu, KernelInputs in, const OpAttrs&,
                                    KernelOutputs out) {
  const DeviceTensor& z = *in[0];
  int64_t rows = 0, units = 0;
  PSC_RETURN_IF_ERROR(rnn::CheckLstm(
      rnn::kLstmCellBackward, z,
      {{"c_prev", in[1]}, {"c", in[2]}, {"dh", in[3]}, {"dc", in[4]}, {"dc_prev", out[1]}}, &rows,
      &units));
  PSC_RETURN_IF_ERROR(WantShape(rnn::kLstmCellBackward, "dz", *out[0], z.shape()));
  cpu.UseThreads();
  const float *zv = Data(z), *cp = In(in[1]), *c = Data(*in[2]), *dh = Data(*in[3]),
              *dc = In(in[4]);
  float *dz = Data(out[0]), *dcp = Out(out[1]);
  const int64_t n = rows * units;
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < n; ++e) rnn::LstmBackward(zv, cp, c, dh, dc, units, e, dz, dcp);
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
  static constexpr KernelEntry<CpuKernelContext> kKernels[] = {
      {rnn::kLstmCell, 2, 2, LstmCellKernel, {/*inputs=*/0b10, 0}},
      {rnn::kLstmCellBackward,
       5,
       2,
       LstmCellBackwardKernel,
       {/*inputs=*/0b10010, /*outputs=*/0b10}},
      {rnn::kGruCell, 3, 1, GruCellKernel, {/*inputs=*/0b100, 0}},
      {rnn::kGruCellBackward, 4, 3, GruCellBackwardKernel, {/*inputs=*/0b100, /*outputs=*/0b100}},
  };
  return RegisterKernels<CpuKernelContext>(context, kKernels, registry);
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
