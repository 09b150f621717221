#include "common/compute/cpu_backend.h"

#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_batch_norm.h"
#include "common/compute/cpu_batch_norm_kernels.h"
#include "common/compute/cpu_conv.h"
#include "common/compute/cpu_dense_kernels.h"
#include "common/compute/cpu_elementwise.h"
#include "common/compute/cpu_elementwise_kernels.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/cpu_pooling_kernels.h"
#include "common/compute/cpu_tensor.h"
#include "common/compute/kernel_registry.h"
#include "dnnl.hpp"

namespace psc {
namespace compute {
namespace {

using cpu::ConvPrimitives;
using cpu::Cpu;
using cpu::CpuTensor;
using cpu::Data;
using cpu::DescFor;
using cpu::Layout;
using cpu::LayoutOf;
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
    return cpu::RegisterCpuDenseKernels(this, &kernels_);
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
  absl::StatusOr<const float*> InLayoutOf(const char* op, const DeviceTensor& t,
                                          const DeviceTensor& like,
                                          cpu::ReorderSlot slot) override {
    const float* data = nullptr;
    PSC_RETURN_IF_ERROR(OneDnn(op, [&] {
      data = static_cast<const float*>(
          reorder_.As(Cpu(t), DescFor(t.shape(), Cpu(like).layout()), stream_, Slot(slot))
              .get_data_handle());
    }));
    return data;
  }

  std::vector<std::string> ConvolutionsChosen() const {
    std::vector<std::string> out;
    for (const auto& [key, p] : convs_) {
      out.push_back(absl::StrCat("Conv2D [", key.n, ",", key.h, ",", key.w, ",", key.c, "]->",
                                 key.k, " ", key.window.Text(), key.bias ? "" : " no bias",
                                 key.relu ? " relu" : "", ": ", p.algorithms, " (", p.impl, ")"));
    }
    return out;
  }

  bool Supports(const OpSpec& spec) const override {
    // Every op, any shape with positive dimensions (4-D activations with a
    // window that has an output for convolution and pooling).
    for (int64_t d : spec.input) {
      if (d < 1) return false;
    }
    switch (spec.op) {
      case Op::kConv2D:
      case Op::kConv2DBackwardData:
      case Op::kConv2DBackwardWeights:
        return CheckWindow(OpName(spec.op), spec.window, spec.input).ok() &&
               (spec.kernel.empty() || (spec.kernel.size() == 4 &&
                                        CheckConvKernel(OpName(spec.op), "kernel", spec.window,
                                                        spec.input[3], spec.kernel[3], spec.kernel)
                                            .ok()));
      case Op::kMaxPool:
      case Op::kMaxPoolBackward:
      case Op::kAvgPool:
      case Op::kAvgPoolBackward:
        return CheckPoolWindow(OpName(spec.op), spec.window, spec.input).ok();
      case Op::kGlobalPool:
      case Op::kGlobalPoolBackward:
        return spec.input.size() == 4;
      case Op::kBatchNorm:
      case Op::kBatchNormInference:
      case Op::kBatchNormBackward:
        return spec.input.size() == 4 || spec.input.size() == 2;
      default:
        return !spec.input.empty();
    }
  }

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
      reorder_.Run(t.desc(), t.data(), DescFor(t.shape(), Layout::kPlain), dst, stream_);
    });
  }

  absl::Status Conv2D(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor* b,
                      const Window& window, bool relu, DeviceTensor* y) override {
    PSC_RETURN_IF_ERROR(WantFloat("Conv2D", "x", x));
    UseThreads();
    constexpr const char* kOp = "Conv2D";
    PSC_RETURN_IF_ERROR(CheckWindow(kOp, window, x.shape()));
    PSC_RETURN_IF_ERROR(WantRank(kOp, "w", w, 4));
    const int64_t c = x.shape()[3], k = w.shape()[3];
    PSC_RETURN_IF_ERROR(CheckConvKernel(kOp, "w", window, c, k, w.shape()));
    if (b != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "b", *b, {k}));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "y", *y, window.Output(x.shape(), k)));
    return OneDnn(kOp, [&] {
      ConvPrimitives& p = Conv(x.shape(), k, window, b != nullptr, relu);
      memory src = reorder_.As(Cpu(x), p.fwd_pd.src_desc(), stream_, kSlotConvSrc);
      memory dst(p.fwd_pd.dst_desc(), engine_, Data(y));
      reorder_.Run(p.user_weights, Data(w), p.fwd_pd.weights_desc(),
                   p.fwd_weights.get_data_handle(), stream_);
      std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src},
                                              {DNNL_ARG_WEIGHTS, p.fwd_weights},
                                              {DNNL_ARG_DST, dst},
                                              {DNNL_ARG_SCRATCHPAD, Scratch(p.fwd_scratch)}};
      if (b != nullptr) args[DNNL_ARG_BIAS] = memory(p.bias, engine_, const_cast<float*>(Data(*b)));
      p.fwd.execute(stream_, args);
      Cpu(y).set_layout(*LayoutOf(y->shape(), p.fwd_pd.dst_desc()));
    });
  }

  absl::Status Conv2DBackwardData(const DeviceTensor& dy, const DeviceTensor& w,
                                  const Window& window, DeviceTensor* dx) override {
    PSC_RETURN_IF_ERROR(WantFloat("Conv2DBackwardData", "dy", dy));
    PSC_RETURN_IF_ERROR(WantFloat("Conv2DBackwardData", "dx", *dx));
    UseThreads();
    constexpr const char* kOp = "Conv2DBackwardData";
    PSC_RETURN_IF_ERROR(CheckWindow(kOp, window, dx->shape()));
    PSC_RETURN_IF_ERROR(WantRank(kOp, "w", w, 4));
    const int64_t c = dx->shape()[3], k = w.shape()[3];
    PSC_RETURN_IF_ERROR(CheckConvKernel(kOp, "w", window, c, k, w.shape()));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, window.Output(dx->shape(), k)));
    return OneDnn(kOp, [&] {
      // The bias and the ReLU do not change this direction: the primitives
      // the forward pass made are the ones to reuse.
      ConvPrimitives& p = ConvAny(dx->shape(), k, window);
      memory diff_dst =
          reorder_.As(Cpu(dy), p.bwd_data_pd.diff_dst_desc(), stream_, kSlotConvDiffDst);
      memory diff_src(p.bwd_data_pd.diff_src_desc(), engine_, Data(dx));
      reorder_.Run(p.user_weights, Data(w), p.bwd_data_pd.weights_desc(),
                   p.bwd_data_weights.get_data_handle(), stream_);
      p.bwd_data.execute(stream_, {{DNNL_ARG_DIFF_DST, diff_dst},
                                   {DNNL_ARG_WEIGHTS, p.bwd_data_weights},
                                   {DNNL_ARG_DIFF_SRC, diff_src},
                                   {DNNL_ARG_SCRATCHPAD, Scratch(p.bwd_data_scratch)}});
      Cpu(dx).set_layout(*LayoutOf(dx->shape(), p.bwd_data_pd.diff_src_desc()));
    });
  }

  absl::Status Conv2DBackwardWeights(const DeviceTensor& x, const DeviceTensor& dy,
                                     const Window& window, DeviceTensor* dw,
                                     DeviceTensor* db) override {
    PSC_RETURN_IF_ERROR(WantFloat("Conv2DBackwardWeights", "x", x));
    PSC_RETURN_IF_ERROR(WantFloat("Conv2DBackwardWeights", "dw", *dw));
    UseThreads();
    constexpr const char* kOp = "Conv2DBackwardWeights";
    PSC_RETURN_IF_ERROR(CheckWindow(kOp, window, x.shape()));
    PSC_RETURN_IF_ERROR(WantRank(kOp, "dy", dy, 4));
    const int64_t c = x.shape()[3], k = dy.shape()[3];
    PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, window.Output(x.shape(), k)));
    PSC_RETURN_IF_ERROR(CheckConvKernel(kOp, "dw", window, c, k, dw->shape()));
    if (db != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "db", *db, {k}));
    // The bias gradient is ours: a sum over N*OH*OW positions, in double
    // (oneDNN's float accumulation errs by ~1e-5 relative at 28x28x32, more
    // than Keras's on the same step).
    if (db != nullptr) {
      PSC_ASSIGN_OR_RETURN(const cpu::ChannelLayout l, cpu::ChannelLayoutOf(kOp, dy));
      cpu::SumPerChannel(l, Data(dy), Data(db));
      Cpu(db).set_layout(Layout::kPlain);
    }
    return OneDnn(kOp, [&] {
      ConvPrimitives& p = Conv(x.shape(), k, window, /*bias=*/false, /*relu=*/false);
      memory src = reorder_.As(Cpu(x), p.bwd_weights_pd.src_desc(), stream_, kSlotConvSrc);
      memory diff_dst =
          reorder_.As(Cpu(dy), p.bwd_weights_pd.diff_dst_desc(), stream_, kSlotConvDiffDst);
      p.bwd_weights.execute(stream_, {{DNNL_ARG_SRC, src},
                                      {DNNL_ARG_DIFF_DST, diff_dst},
                                      {DNNL_ARG_DIFF_WEIGHTS, p.diff_weights},
                                      {DNNL_ARG_SCRATCHPAD, Scratch(p.bwd_weights_scratch)}});
      reorder_.Run(p.bwd_weights_pd.diff_weights_desc(), p.diff_weights.get_data_handle(),
                   p.user_weights, Data(dw), stream_);
    });
  }

  absl::Status ReluBackward(const DeviceTensor& y, const DeviceTensor& dy,
                            DeviceTensor* dx) override {
    PSC_RETURN_IF_ERROR(WantFloat("ReluBackward", "y", y));
    UseThreads();
    PSC_RETURN_IF_ERROR(WantShape("ReluBackward", "dy", dy, y.shape()));
    PSC_RETURN_IF_ERROR(WantShape("ReluBackward", "dx", *dx, y.shape()));
    const CpuTensor& yt = Cpu(y);
    const float* __restrict yv = yt.data();
    const int64_t size = y.size();  // blocked layouts hold no padding (cpu_tensor.h)
    const float* dyv = Data(dy);
    if (Cpu(dy).layout() != yt.layout()) {
      PSC_RETURN_IF_ERROR(OneDnn("ReluBackward", [&] {
        dyv = static_cast<const float*>(
            reorder_.As(Cpu(dy), yt.desc(), stream_, kSlotElementwise).get_data_handle());
      }));
    }
    if (Data(dx) == dyv) {  // in place: one stream fewer
      float* __restrict d = Data(dx);
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < size; ++i) d[i] = yv[i] > 0.0f ? d[i] : 0.0f;
    } else {
      const float* __restrict dyr = dyv;
      float* __restrict dxv = Data(dx);
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < size; ++i) dxv[i] = yv[i] > 0.0f ? dyr[i] : 0.0f;
    }
    Cpu(dx).set_layout(yt.layout());
    return absl::OkStatus();
  }

  // Both on the plain layout: y is made plain first (its other columns
  // kept), then each row's block copied.
  absl::Status CopyBlock(const DeviceTensor& x, int64_t x_cols, int64_t x_first, DeviceTensor* y,
                         int64_t y_cols, int64_t y_first, int64_t rows, int64_t cols) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(CheckCopyBlock(x, x_cols, x_first, *y, y_cols, y_first, rows, cols));
    const float* xv = nullptr;
    PSC_RETURN_IF_ERROR(OneDnn("CopyBlock", [&] {
      xv = reorder_.Plain(Cpu(x), stream_, kSlotElementwise);
      if (Cpu(*y).layout() != Layout::kPlain) {
        const float* plain = reorder_.Plain(Cpu(*y), stream_, kSlotSecond);
        std::memcpy(Data(y), plain, static_cast<size_t>(y->size()) * sizeof(float));
      }
    }));
    float* yv = Data(y);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(yv + r * y_cols + y_first, xv + r * x_cols + x_first,
                  static_cast<size_t>(cols) * sizeof(float));
    }
    Cpu(y).set_layout(Layout::kPlain);
    return absl::OkStatus();
  }

  absl::Status SoftmaxCrossEntropy(const DeviceTensor& logits, absl::Span<const int32_t> labels,
                                   const LossOptions& options, DeviceTensor* dlogits,
                                   double* loss_sum, int64_t* correct) override {
    PSC_RETURN_IF_ERROR(CheckSoftmaxCrossEntropy(logits, labels, options, *dlogits));
    const int64_t n = logits.shape()[0], m = logits.shape()[1];
    const float* z = Data(logits);
    float* g = Data(dlogits);
    // t[j] = on where j is the label, off elsewhere.
    const double smoothing = options.label_smoothing;
    const double off = m > 0 ? smoothing / static_cast<double>(m) : 0.0;
    const double on = 1.0 - smoothing + off;
    double loss = 0;
    int64_t right = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* zi = z + i * m;
      float* gi = g + i * m;
      const double w = options.weights.empty() ? 1.0 : options.weights[i];
      int64_t argmax = 0;
      for (int64_t j = 1; j < m; ++j) {
        if (zi[j] > zi[argmax]) argmax = j;
      }
      const float top = zi[argmax];
      double sum = 0, shifted_sum = 0;
      for (int64_t j = 0; j < m; ++j) {
        sum += std::exp(static_cast<double>(zi[j] - top));
        shifted_sum += static_cast<double>(zi[j] - top);
      }
      const double log_sum = std::log(sum);
      // -sum_j t[j] (z[j] - top - log_sum), with sum_j t[j] = 1.
      const double row = log_sum - (1.0 - smoothing) * static_cast<double>(zi[labels[i]] - top) -
                         off * shifted_sum;
      loss += w * row;
      const double scale = w * options.grad_scale;
      for (int64_t j = 0; j < m; ++j) {
        const double p = std::exp(static_cast<double>(zi[j] - top) - log_sum);
        gi[j] = static_cast<float>((p - (j == labels[i] ? on : off)) * scale);
      }
      right += argmax == labels[i];
    }
    *loss_sum = loss;
    *correct = right;
    return absl::OkStatus();
  }

 private:
  ConvPrimitives& Conv(const Shape& x, int64_t k, const Window& window, bool bias, bool relu) {
    const cpu::ConvKey key{x[0], x[1], x[2], x[3], k, window, bias, relu};
    auto it = convs_.find(key);
    if (it != convs_.end()) return it->second;
    return convs_.emplace(key, ConvPrimitives::Create(engine_, key, conv_)).first->second;
  }

  // For backward data, which neither the bias nor the ReLU changes: the
  // primitives of this shape the forward pass made (the same algorithms, so
  // the same layouts), else new ones.
  ConvPrimitives& ConvAny(const Shape& x, int64_t k, const Window& window) {
    const cpu::ConvKey first{x[0], x[1], x[2], x[3], k, window, false, false};
    auto it = convs_.lower_bound(first);
    if (it != convs_.end() && it->first.n == x[0] && it->first.h == x[1] && it->first.w == x[2] &&
        it->first.c == x[3] && it->first.k == k && it->first.window == window) {
      return it->second;
    }
    return Conv(x, k, window, /*bias=*/true, /*relu=*/false);
  }

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
  std::map<cpu::ConvKey, ConvPrimitives> convs_;
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

}  // namespace compute
}  // namespace psc
