#include "common/compute/cuda/cuda_conv.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/compute/cuda/cuda_kernels.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

constexpr size_t kFloat = sizeof(float);
constexpr size_t kMinFindWorkspace = size_t{1} << 20;

// The first acceptable result of a Find (they come fastest first).
template <typename Perf>
bool Pick(const Perf* perf, int count, bool allow_tf32, size_t workspace_limit, int* algo,
          cudnnMathType_t* math, size_t* workspace) {
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC) continue;
    if (!allow_tf32 && p.mathType != CUDNN_FMA_MATH) continue;
    if (p.memory > workspace_limit) continue;
    *algo = static_cast<int>(p.algo);
    *math = p.mathType;
    *workspace = p.memory;
    return true;
  }
  return false;
}

// What a Find returned, for the error when nothing fits.
template <typename Perf>
std::string Results(const Perf* perf, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    absl::StrAppendFormat(
        &out, "%salgo %d: %s, math %d, %s, %d bytes", i == 0 ? "" : "; ",
        static_cast<int>(perf[i].algo), cudnnGetErrorString(perf[i].status),
        static_cast<int>(perf[i].mathType),
        perf[i].determinism == CUDNN_DETERMINISTIC ? "deterministic" : "non-deterministic",
        static_cast<long long>(perf[i].memory));
  }
  return out.empty() ? "no results" : out;
}

}  // namespace

std::string ConvShape::Text() const {
  return absl::StrCat("x [", n, ",", h, ",", w, ",", c, "] -> ", k);
}

CudaConv::Plan& CudaConv::PlanFor(const ConvShape& s) { return plans_[s.Key()]; }

absl::StatusOr<CudaConv::Descs*> CudaConv::DescsFor(const ConvShape& s, Plan& plan, Layout layout) {
  std::unique_ptr<Descs>& slot = plan.descs[static_cast<int>(layout)];
  if (slot != nullptr) return slot.get();
  auto d = std::make_unique<Descs>();
  PSC_ASSIGN_OR_RETURN(d->x, MakeTensorDesc());
  PSC_ASSIGN_OR_RETURN(d->y, MakeTensorDesc());
  PSC_ASSIGN_OR_RETURN(d->w, MakeFilterDesc());
  PSC_ASSIGN_OR_RETURN(d->conv, MakeConvDesc());
  const cudnnTensorFormat_t format =
      layout == Layout::kNhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  PSC_CUDNN_RETURN_IF_ERROR(
      cudnnSetTensor4dDescriptor(d->x.get(), format, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w));
  PSC_CUDNN_RETURN_IF_ERROR(
      cudnnSetTensor4dDescriptor(d->y.get(), format, CUDNN_DATA_FLOAT, s.n, s.k, s.h, s.w));
  // NHWC filters are KRSC, NCHW ones KCRS.
  PSC_CUDNN_RETURN_IF_ERROR(
      cudnnSetFilter4dDescriptor(d->w.get(), CUDNN_DATA_FLOAT, format, s.k, s.c, 3, 3));
  PSC_CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(
      d->conv.get(), 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  slot = std::move(d);
  return slot.get();
}

absl::Status CudaConv::SetMath(Descs* d, cudnnMathType_t math) {
  PSC_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(d->conv.get(), math));
  return absl::OkStatus();
}

absl::StatusOr<const float*> CudaConv::FilterIn(const ConvShape& s, Layout layout,
                                                const float* hwio) {
  const int64_t taps = 9 * int64_t{s.c};
  const size_t bytes = taps * s.k * kFloat;
  PSC_ASSIGN_OR_RETURN(void* out, filter_.Get(context_->allocator, bytes));
  float* o = static_cast<float*>(out);
  if (layout == Layout::kNhwc) {  // [9C, K] -> [K, 9C]
    PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(hwio, o, 1, taps, s.k, context_->stream));
    return o;
  }
  PSC_ASSIGN_OR_RETURN(void* tmp, filter_tmp_.Get(context_->allocator, bytes));
  float* t = static_cast<float*>(tmp);
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(hwio, t, 1, taps, s.k, context_->stream));  // KRSC
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(t, o, s.k, 9, s.c, context_->stream));      // KCRS
  return o;
}

absl::Status CudaConv::FilterOut(const ConvShape& s, Layout layout, const float* cudnn,
                                 float* hwio) {
  const int64_t taps = 9 * int64_t{s.c};
  if (layout == Layout::kNhwc) {
    PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(cudnn, hwio, 1, s.k, taps, context_->stream));
    return absl::OkStatus();
  }
  PSC_ASSIGN_OR_RETURN(void* tmp, filter_tmp_.Get(context_->allocator, taps * s.k * kFloat));
  float* t = static_cast<float*>(tmp);
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(cudnn, t, s.k, s.c, 9, context_->stream));  // KRSC
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(t, hwio, 1, s.k, taps, context_->stream));
  return absl::OkStatus();
}

absl::StatusOr<float*> CudaConv::ToNchw(const float* nhwc, int n, int hw, int c, Scratch* scratch) {
  PSC_ASSIGN_OR_RETURN(void* out, scratch->Get(context_->allocator, int64_t{n} * hw * c * kFloat));
  float* o = static_cast<float*>(out);
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(nhwc, o, n, hw, c, context_->stream));
  return o;
}

absl::Status CudaConv::ToNhwc(const float* nchw, int n, int hw, int c, float* nhwc) {
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(nchw, nhwc, n, c, hw, context_->stream));
  return absl::OkStatus();
}

absl::StatusOr<CudaConv::Operands> CudaConv::PrepareForward(const ConvShape& s, Layout layout,
                                                            const float* x, const float* w,
                                                            float* y) {
  Operands o;
  PSC_ASSIGN_OR_RETURN(o.other, FilterIn(s, layout, w));
  if (layout == Layout::kNhwc) {
    o.in = x;
    o.out = y;
    return o;
  }
  const int hw = s.h * s.w;
  PSC_ASSIGN_OR_RETURN(o.in, ToNchw(x, s.n, hw, s.c, &in_nchw_));
  PSC_ASSIGN_OR_RETURN(void* out,
                       out_nchw_.Get(context_->allocator, int64_t{s.n} * hw * s.k * kFloat));
  o.out = static_cast<float*>(out);
  return o;
}

absl::StatusOr<CudaConv::Operands> CudaConv::PrepareBackwardData(const ConvShape& s, Layout layout,
                                                                 const float* dy, const float* w,
                                                                 float* dx) {
  Operands o;
  PSC_ASSIGN_OR_RETURN(o.other, FilterIn(s, layout, w));
  if (layout == Layout::kNhwc) {
    o.in = dy;
    o.out = dx;
    return o;
  }
  const int hw = s.h * s.w;
  PSC_ASSIGN_OR_RETURN(o.in, ToNchw(dy, s.n, hw, s.k, &in_nchw_));
  PSC_ASSIGN_OR_RETURN(void* out,
                       out_nchw_.Get(context_->allocator, int64_t{s.n} * hw * s.c * kFloat));
  o.out = static_cast<float*>(out);
  return o;
}

absl::StatusOr<CudaConv::Operands> CudaConv::PrepareBackwardFilter(const ConvShape& s,
                                                                   Layout layout, const float* x,
                                                                   const float* dy) {
  Operands o;
  PSC_ASSIGN_OR_RETURN(void* out,
                       filter_.Get(context_->allocator, 9 * int64_t{s.c} * s.k * kFloat));
  o.out = static_cast<float*>(out);
  if (layout == Layout::kNhwc) {
    o.in = x;
    o.other = dy;
    return o;
  }
  const int hw = s.h * s.w;
  PSC_ASSIGN_OR_RETURN(o.in, ToNchw(x, s.n, hw, s.c, &in_nchw_));
  PSC_ASSIGN_OR_RETURN(o.other, ToNchw(dy, s.n, hw, s.k, &other_nchw_));
  return o;
}

absl::StatusOr<DeviceBuffer> CudaConv::FindWorkspace() {
  size_t bytes = context_->conv_workspace_limit;
  while (bytes >= kMinFindWorkspace) {
    absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(context_->allocator, bytes);
    if (b.ok() || !absl::IsResourceExhausted(b.status())) return b;
    bytes /= 2;
  }
  return DeviceBuffer();  // algorithms without workspace only
}

absl::StatusOr<void*> CudaConv::Workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  return workspace_.Get(context_->allocator, bytes);
}

template <typename Perf, int kMaxAlgos, typename Prepare, typename Find>
absl::Status CudaConv::Choose(const char* op, const char* find_name, const ConvShape& s, Plan& plan,
                              Choice& choice, Prepare prepare, Find find) {
  if (choice.chosen) return absl::OkStatus();
  const cudnnMathType_t find_math = context_->allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  PSC_ASSIGN_OR_RETURN(DeviceBuffer ws, FindWorkspace());
  std::string tried;
  for (Layout layout : {Layout::kNhwc, Layout::kNchw}) {
    PSC_ASSIGN_OR_RETURN(Descs * d, DescsFor(s, plan, layout));
    PSC_ASSIGN_OR_RETURN(Operands o, prepare(layout));
    PSC_RETURN_IF_ERROR(SetMath(d, find_math));
    Perf perf[kMaxAlgos];
    int count = 0;
    absl::Status found = CudnnStatus(find(d, o, ws, kMaxAlgos, &count, perf), find_name);
    if (found.ok() && Pick(perf, count, context_->allow_tf32, ws.bytes(), &choice.algo,
                           &choice.math, &choice.workspace)) {
      choice.chosen = true;
      choice.layout = layout;
      return absl::OkStatus();
    }
    absl::StrAppend(&tried, layout == Layout::kNhwc ? " NHWC: " : " NCHW: ",
                    found.ok() ? Results(perf, count) : found.ToString(), ".");
  }
  return absl::UnimplementedError(
      absl::StrCat(op, " ", s.Text(), ": cuDNN has no deterministic algorithm",
                   context_->allow_tf32 ? "" : " with CUDNN_FMA_MATH", " within ", ws.bytes(),
                   " bytes of workspace;", tried));
}

absl::Status CudaConv::Forward(const ConvShape& s, const float* x, const float* w, float* y) {
  Plan& p = PlanFor(s);
  const float one = 1.0f, zero = 0.0f;
  PSC_RETURN_IF_ERROR((Choose<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
      "Conv2D", "cudnnFindConvolutionForwardAlgorithmEx", s, p, p.fwd,
      [&](Layout layout) { return PrepareForward(s, layout, x, w, y); },
      [&](Descs* d, const Operands& o, DeviceBuffer& ws, int max, int* count,
          cudnnConvolutionFwdAlgoPerf_t* perf) {
        return cudnnFindConvolutionForwardAlgorithmEx(context_->cudnn, d->x.get(), o.in, d->w.get(),
                                                      o.other, d->conv.get(), d->y.get(), o.out,
                                                      max, count, perf, ws.get(), ws.bytes());
      })));
  PSC_ASSIGN_OR_RETURN(Descs * d, DescsFor(s, p, p.fwd.layout));
  PSC_ASSIGN_OR_RETURN(Operands o, PrepareForward(s, p.fwd.layout, x, w, y));
  PSC_ASSIGN_OR_RETURN(void* ws, Workspace(p.fwd.workspace));
  PSC_RETURN_IF_ERROR(SetMath(d, p.fwd.math));
  PSC_CUDNN_RETURN_IF_ERROR(
      cudnnConvolutionForward(context_->cudnn, &one, d->x.get(), o.in, d->w.get(), o.other,
                              d->conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(p.fwd.algo), ws,
                              p.fwd.workspace, &zero, d->y.get(), o.out));
  if (p.fwd.layout == Layout::kNchw) return ToNhwc(o.out, s.n, s.h * s.w, s.k, y);
  return absl::OkStatus();
}

absl::Status CudaConv::BackwardData(const ConvShape& s, const float* dy, const float* w,
                                    float* dx) {
  Plan& p = PlanFor(s);
  const float one = 1.0f, zero = 0.0f;
  PSC_RETURN_IF_ERROR(
      (Choose<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
          "Conv2DBackwardData", "cudnnFindConvolutionBackwardDataAlgorithmEx", s, p, p.bwd_data,
          [&](Layout layout) { return PrepareBackwardData(s, layout, dy, w, dx); },
          [&](Descs* d, const Operands& o, DeviceBuffer& ws, int max, int* count,
              cudnnConvolutionBwdDataAlgoPerf_t* perf) {
            return cudnnFindConvolutionBackwardDataAlgorithmEx(
                context_->cudnn, d->w.get(), o.other, d->y.get(), o.in, d->conv.get(), d->x.get(),
                o.out, max, count, perf, ws.get(), ws.bytes());
          })));
  PSC_ASSIGN_OR_RETURN(Descs * d, DescsFor(s, p, p.bwd_data.layout));
  PSC_ASSIGN_OR_RETURN(Operands o, PrepareBackwardData(s, p.bwd_data.layout, dy, w, dx));
  PSC_ASSIGN_OR_RETURN(void* ws, Workspace(p.bwd_data.workspace));
  PSC_RETURN_IF_ERROR(SetMath(d, p.bwd_data.math));
  PSC_CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardData(
      context_->cudnn, &one, d->w.get(), o.other, d->y.get(), o.in, d->conv.get(),
      static_cast<cudnnConvolutionBwdDataAlgo_t>(p.bwd_data.algo), ws, p.bwd_data.workspace, &zero,
      d->x.get(), o.out));
  if (p.bwd_data.layout == Layout::kNchw) return ToNhwc(o.out, s.n, s.h * s.w, s.c, dx);
  return absl::OkStatus();
}

absl::Status CudaConv::BackwardFilter(const ConvShape& s, const float* x, const float* dy,
                                      float* dw) {
  Plan& p = PlanFor(s);
  const float one = 1.0f, zero = 0.0f;
  PSC_RETURN_IF_ERROR(
      (Choose<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
          "Conv2DBackwardWeights", "cudnnFindConvolutionBackwardFilterAlgorithmEx", s, p,
          p.bwd_filter, [&](Layout layout) { return PrepareBackwardFilter(s, layout, x, dy); },
          [&](Descs* d, const Operands& o, DeviceBuffer& ws, int max, int* count,
              cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
            return cudnnFindConvolutionBackwardFilterAlgorithmEx(
                context_->cudnn, d->x.get(), o.in, d->y.get(), o.other, d->conv.get(), d->w.get(),
                o.out, max, count, perf, ws.get(), ws.bytes());
          })));
  PSC_ASSIGN_OR_RETURN(Descs * d, DescsFor(s, p, p.bwd_filter.layout));
  PSC_ASSIGN_OR_RETURN(Operands o, PrepareBackwardFilter(s, p.bwd_filter.layout, x, dy));
  PSC_ASSIGN_OR_RETURN(void* ws, Workspace(p.bwd_filter.workspace));
  PSC_RETURN_IF_ERROR(SetMath(d, p.bwd_filter.math));
  PSC_CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardFilter(
      context_->cudnn, &one, d->x.get(), o.in, d->y.get(), o.other, d->conv.get(),
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.bwd_filter.algo), ws, p.bwd_filter.workspace,
      &zero, d->w.get(), o.out));
  return FilterOut(s, p.bwd_filter.layout, o.out, dw);
}

std::string CudaConv::Describe(const ConvShape& s) const {
  auto it = plans_.find(s.Key());
  if (it == plans_.end()) return "not run yet";
  auto text = [](const char* what, const Choice& c) {
    if (!c.chosen) return absl::StrCat(what, " not run");
    return absl::StrFormat("%s %s algo %d (%s, %d bytes workspace)", what,
                           c.layout == Layout::kNhwc ? "NHWC" : "NCHW", c.algo,
                           c.math == CUDNN_FMA_MATH ? "FMA" : "tensor-op math",
                           static_cast<long long>(c.workspace));
  };
  const Plan& p = it->second;
  return absl::StrCat(text("fwd", p.fwd), "; ", text("bwd-data", p.bwd_data), "; ",
                      text("bwd-filter", p.bwd_filter));
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
