#include "common/compute/cpu_backend.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_batch_norm.h"
#include "common/compute/cpu_batch_norm_kernels.h"
#include "common/compute/cpu_conv.h"
#include "common/compute/cpu_conv_kernels.h"
#include "common/compute/cpu_dense_kernels.h"
#include "common/compute/cpu_elementwise.h"
#include "common/compute/cpu_elementwise_kernels.h"
#include "common/compute/cpu_embedding_kernels.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/cpu_layer_norm_kernels.h"
#include "common/compute/cpu_loss_kernels.h"
#include "common/compute/cpu_lstm_layer.h"
#include "common/compute/cpu_mask_kernels.h"
#include "common/compute/cpu_matmul_kernels.h"
#include "common/compute/cpu_pooling_kernels.h"
#include "common/compute/cpu_rnn_kernels.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/kernel_registry.h"
#include "dnnl.hpp"

namespace psc {
namespace compute {
namespace {

using cpu::Cpu;
using cpu::CpuTensor;
using cpu::Data;
using cpu::DescFor;
using cpu::Layout;
using cpu::Reorderer;
using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

class CpuBackend : public ComputeBackend, public cpu::CpuKernelContext {
 public:
  CpuBackend(int threads, ConvAlgorithm conv)
      : threads_(threads),
        conv_(conv),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_),
        reorder_(engine_) {}

  std::string name() const override { return "cpu:onednn"; }

  absl::Status Init() {
    PSC_RETURN_IF_ERROR(cpu::RegisterCpuElementwiseKernels(this, &kernels_));
    PSC_RETURN_IF_ERROR(cpu::RegisterCpuPoolingKernels(this, &kernels_));
    PSC_RETURN_IF_ERROR(cpu::RegisterCpuBatchNormKernels(this, &kernels_));
    PSC_RETURN_IF_ERROR(cpu::RegisterCpuLayerNormKernels(this, &kernels_));
    PSC_RETURN_IF_ERROR(cpu::RegisterCpuRnnKernels(this, &kernels_));
    PSC_RETURN_IF_ERROR(cpu::RegisterCpuMaskKernels(this, &kernels_));
    PSC_RETURN_IF_ERROR(cpu::RegisterCpuLstmLayerKernels(this, &kernels_));
    PSC_RETURN_IF_ERROR(cpu::RegisterCpuDenseKernels(this, &kernels_));
    PSC_RETURN_IF_ERROR(cpu::RegisterCpuLossKernels(this, &kernels_));
    PSC_RETURN_IF_ERROR(cpu::RegisterCpuEmbeddingKernels(this, &kernels_));
    PSC_RETURN_IF_ERROR(cpu::RegisterCpuMatMulKernels(this, &kernels_));
    PSC_ASSIGN_OR_RETURN(conv_choices_, cpu::RegisterCpuConvKernels(this, conv_, &kernels_));
    return absl::OkStatus();
  }
  const KernelRegistry& kernels() const override { return kernels_; }

  // CpuKernelContext.
  void UseThreads() override {
    if (threads_ > 0 && omp_get_max_threads() != threads_) omp_set_num_threads(threads_);
  }
  absl::StatusOr<const float*> Plain(const char* op, const DeviceTensor& t,
                                     cpu::ReorderSlot slot) override {
    const float* data = nullptr;
    PSC_RETURN_IF_ERROR(OneDnn(op, [&] { data = reorder_.Plain(Cpu(t), stream_, Slot(slot)); }));
    return data;
  }
  const dnnl::engine& engine() const override { return engine_; }
  dnnl::stream& stream() override { return stream_; }
  memory Scratchpad(const memory::desc& desc) override { return Scratch(desc); }
  absl::Status RunOneDnn(const char* op, const std::function<void()>& work) override {
    return OneDnn(op, work);
  }
  memory Reordered(const DeviceTensor& t, const memory::desc& want,
                   cpu::ReorderSlot slot) override {
    return reorder_.As(Cpu(t), want, stream_, Slot(slot));
  }
  void Reorder(const memory::desc& from, const void* src, const memory::desc& to,
               void* dst) override {
    reorder_.Run(from, src, to, dst, stream_);
  }
  absl::StatusOr<const float*> InLayoutOf(const char* op, const DeviceTensor& t,
                                          const DeviceTensor& like,
                                          cpu::ReorderSlot slot) override {
    const float* data = nullptr;
    PSC_RETURN_IF_ERROR(OneDnn(op, [&] {
      data = static_cast<const float*>(
          reorder_
              .As(Cpu(t), DescFor(t.shape(), Cpu(like).layout(), t.dtype()), stream_, Slot(slot))
              .get_data_handle());
    }));
    return data;
  }

  std::vector<std::string> ConvolutionsChosen() const { return conv_choices_(); }

  absl::StatusOr<std::unique_ptr<DeviceTensor>> AllocateTensor(const Shape& shape,
                                                               DType dtype) override {
    PSC_ASSIGN_OR_RETURN(auto t, CpuTensor::Create(shape, dtype));
    return std::unique_ptr<DeviceTensor>(std::move(t));
  }

  absl::Status CopyBytesFromHost(const void* src, size_t bytes, DeviceTensor* dst) override {
    std::memcpy(Cpu(dst).raw(), src, bytes);
    Cpu(dst).set_layout(Layout::kPlain);
    return absl::OkStatus();
  }

  absl::Status CopyBytesToHost(const DeviceTensor& src, void* dst, size_t bytes) override {
    const CpuTensor& t = Cpu(src);
    if (t.layout() == Layout::kPlain) {
      std::memcpy(dst, t.raw(), bytes);
      return absl::OkStatus();
    }
    return OneDnn("CopyToHost", [&] {
      reorder_.Run(t.desc(), t.data(), DescFor(t.shape(), Layout::kPlain, t.dtype()), dst, stream_);
    });
  }

 private:
  // The scratchpad of the primitive about to run: one buffer shared by all of
  // them (ops run one at a time), grown to the largest, allocated once and not
  // per call (a per-call allocation page-faults every step).
  memory Scratch(const memory::desc& desc) {
    const size_t bytes = std::max<size_t>(desc.get_size(), 1);
    if (bytes > scratch_bytes_) {
      scratch_.reset(static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
      if (scratch_ == nullptr) throw dnnl::error(dnnl_out_of_memory, "scratchpad");
      scratch_bytes_ = bytes;
    }
    return memory(desc, engine_, scratch_.get());
  }

  // Runs oneDNN work and waits for it; oneDNN throws, we return INTERNAL
  // naming the op.
  template <typename F>
  absl::Status OneDnn(const char* op, F&& work) {
    try {
      work();
      stream_.wait();
    } catch (const dnnl::error& e) {
      if (e.status == dnnl_out_of_memory) {
        return absl::ResourceExhaustedError(absl::StrCat(op, ": out of host memory: ", e.what()));
      }
      return absl::InternalError(absl::StrCat(op, ": oneDNN: ", e.what()));
    }
    return absl::OkStatus();
  }

  // Reorderer slots (cpu_tensor.h): one per input an op may convert.
  static constexpr int kSlotConvSrc = 0, kSlotConvDiffDst = 1, kSlotElementwise = 2, kSlotDense = 3,
                       kSlotSecond = 4;
  static int Slot(cpu::ReorderSlot slot) {
    switch (slot) {
      case cpu::ReorderSlot::kFirst:
        return kSlotElementwise;
      case cpu::ReorderSlot::kSecond:
        return kSlotSecond;
      case cpu::ReorderSlot::kDense:
        return kSlotDense;
      case cpu::ReorderSlot::kConvSource:
        return kSlotConvSrc;
      case cpu::ReorderSlot::kConvGradient:
        return kSlotConvDiffDst;
    }
    return kSlotElementwise;
  }

  const int threads_;  // 0 = OpenMP's default (all cores)
  const ConvAlgorithm conv_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  Reorderer reorder_;
  KernelRegistry kernels_;
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> scratch_;
  size_t scratch_bytes_ = 0;
  cpu::ConvChoices conv_choices_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCpuBackend(int threads) {
  return CreateCpuBackend(CpuBackendOptions{.threads = threads});
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCpuBackend(const CpuBackendOptions& options) {
  const int threads = options.threads;
  if (threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("intra-op threads must be >= 0 (0 = all cores), not ", threads));
  }
  if (threads > 0) omp_set_num_threads(threads);
  try {
    auto backend = std::make_unique<CpuBackend>(threads, options.conv);
    PSC_RETURN_IF_ERROR(backend->Init());
    return std::unique_ptr<ComputeBackend>(std::move(backend));
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN CPU engine: ", e.what()));
  }
}

std::vector<std::string> CpuConvolutionsChosen(const ComputeBackend& backend) {
  const auto* cpu = dynamic_cast<const CpuBackend*>(&backend);
  return cpu == nullptr ? std::vector<std::string>{} : cpu->ConvolutionsChosen();
}

int CpuBackendThreads() { return omp_get_max_threads(); }

std::string CpuBfloat16Isa() {
  if (!cpu::NativeBfloat16()) return "";
  // oneDNN's cpu_isa values are sets of bits (avx2_vnni's is numerically
  // above avx512_core_amx's): an ISA includes another when it has its bits.
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto amx = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx);
  return (isa & amx) == amx ? "avx512_core_amx" : "avx512_core_bf16";
}

absl::Status CheckCpuComputeDtypes(const std::vector<DType>& dtypes) {
  for (DType d : dtypes) {
    if (d == DType::kFloat16) {
      return absl::InvalidArgumentError(
          "the dtype policy mixed_float16 (float16) on a CPU worker: oneDNN has no float16 "
          "convolutions or matmuls on CPUs; pass --dtype_policy=mixed_bfloat16 (on a CPU with "
          "AVX512_BF16 or AMX) or --dtype_policy=float32, or train on GPUs");
    }
    if (d == DType::kBFloat16 && CpuBfloat16Isa().empty()) {
      return absl::InvalidArgumentError(
          "the dtype policy mixed_bfloat16 (bfloat16) on a CPU without AVX512_BF16 or AMX "
          "(lscpu's avx512_bf16, amx_bf16): oneDNN would emulate bfloat16, slower than "
          "float32; pass --dtype_policy=float32");
    }
  }
  return absl::OkStatus();
}

}  // namespace compute
}  // namespace psc
