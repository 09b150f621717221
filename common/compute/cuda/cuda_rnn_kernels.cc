#include "common/compute/cuda/cuda_rnn_kernels.h"

#include "common/base/status_macros.h"
#include "common/compute/cuda/cuda_kernels.h"
#include "common/compute/cuda/cuda_status.h"
#include "common/compute/rnn_ops.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

float* RnnData(CudaKernelContext& c, const DeviceTensor* t) {
  return t == nullptr ? nullptr : c.DataOf(*t);
}

absl::Status LstmCellKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                            KernelOutputs out) {
  int64_t rows = 0, units = 0;
  PSC_RETURN_IF_ERROR(rnn::CheckLstm(
      rnn::kLstmCell, *in[0], {{"c_prev", in[1]}, {"h", out[0]}, {"c", out[1]}}, &rows, &units));
  PSC_RETURN_IF_ERROR(c.Enter());
  PSC_CUDA_RETURN_IF_ERROR(cuda::LstmCell(c.DataOf(*in[0]), RnnData(c, in[1]), rows, units,
                                          c.DataOf(*out[0]), c.DataOf(*out[1]), c.stream()));
  return absl::OkStatus();
}

absl::Status LstmCellBackwardKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                                    KernelOutputs out) {
  int64_t rows = 0, units = 0;
  PSC_RETURN_IF_ERROR(rnn::CheckLstm(
      rnn::kLstmCellBackward, *in[0],
      {{"c_prev", in[1]}, {"c", in[2]}, {"dh", in[3]}, {"dc", in[4]}, {"dc_prev", out[1]}}, &rows,
      &units));
  PSC_RETURN_IF_ERROR(WantShape(rnn::kLstmCellBackward, "dz", *out[0], in[0]->shape()));
  PSC_RETURN_IF_ERROR(c.Enter());
  PSC_CUDA_RETURN_IF_ERROR(cuda::LstmCellBackward(
      c.DataOf(*in[0]), RnnData(c, in[1]), c.DataOf(*in[2]), c.DataOf(*in[3]), RnnData(c, in[4]),
      rows, units, c.DataOf(*out[0]), RnnData(c, out[1]), c.stream()));
  return absl::OkStatus();
}

absl::Status GruCellKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                           KernelOutputs out) {
  int64_t rows = 0, units = 0;
  PSC_RETURN_IF_ERROR(rnn::CheckGru(rnn::kGruCell, *in[0], {{"hz", in[1]}},
                                    {{"h_prev", in[2]}, {"h", out[0]}}, &rows, &units));
  PSC_RETURN_IF_ERROR(c.Enter());
  PSC_CUDA_RETURN_IF_ERROR(cuda::GruCell(c.DataOf(*in[0]), c.DataOf(*in[1]), RnnData(c, in[2]),
                                         rows, units, c.DataOf(*out[0]), c.stream()));
  return absl::OkStatus();
}

absl::Status GruCellBackwardKernel(CudaKernelContext& c, KernelInputs in, const OpAttrs&,
                                   KernelOutputs out) {
  int64_t rows = 0, units = 0;
  PSC_RETURN_IF_ERROR(rnn::CheckGru(
      rnn::kGruCellBackward, *in[0], {{"hz", in[1]}, {"dxz", out[0]}, {"dhz", out[1]}},
      {{"h_prev", in[2]}, {"dh", in[3]}, {"dh_prev", out[2]}}, &rows, &units));
  PSC_RETURN_IF_ERROR(c.Enter());
  PSC_CUDA_RETURN_IF_ERROR(cuda::GruCellBackward(
      c.DataOf(*in[0]), c.DataOf(*in[1]), RnnData(c, in[2]), c.DataOf(*in[3]), rows, units,
      c.DataOf(*out[0]), c.DataOf(*out[1]), RnnData(c, out[2]), c.stream()));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterCudaRnnKernels(CudaKernelContext* context, KernelRegistry* registry) {
  static constexpr KernelEntry<CudaKernelContext> kKernels[] = {
      {rnn::kLstmCell, 2, 2, LstmCellKernel, {/*inputs=*/0b10, 0}},
      {rnn::kLstmCellBackward,
       5,
       2,
       LstmCellBackwardKernel,
       {/*inputs=*/0b10010, /*outputs=*/0b10}},
      {rnn::kGruCell, 3, 1, GruCellKernel, {/*inputs=*/0b100, 0}},
      {rnn::kGruCellBackward, 4, 3, GruCellBackwardKernel, {/*inputs=*/0b100, /*outputs=*/0b100}},
  };
  return RegisterKernels<CudaKernelContext>(context, kKernels, registry);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
