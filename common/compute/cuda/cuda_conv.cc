#include "common/compute/cuda/cuda_conv.h"

#include <algorithm>
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
constexpr int kMaxAlgos = 16;  // more than any direction has in cuDNN 9
constexpr int64_t kMaxInt = (int64_t{1} << 31) - 1;

cudnnDataType_t CudnnType(DType d) {
  return d == DType::kBFloat16  ? CUDNN_DATA_BFLOAT16
         : d == DType::kFloat16 ? CUDNN_DATA_HALF
                                : CUDNN_DATA_FLOAT;
}

// The layouts a shape's candidates are ranked in: a 16-bit one runs NHWC
// only (what tensor cores take; the NCHW transposes are float32's).
std::vector<ConvLayout> Layouts(const ConvShape& s) {
  if (IsLowPrecision(s.dtype)) return {ConvLayout::kNhwc};
  return {ConvLayout::kNhwc, ConvLayout::kNchw};
}

const char* DirectionName(ConvDirection d) {
  switch (d) {
    case ConvDirection::kForward:
      return "Conv2D";
    case ConvDirection::kBackwardData:
      return "Conv2DBackwardData";
    case ConvDirection::kBackwardFilter:
      return "Conv2DBackwardWeights";
  }
  return "?";
}

template <typename Perf>
AlgorithmCandidate FromPerf(const Perf& p, ConvLayout layout) {
  AlgorithmCandidate c;
  c.layout = layout;
  c.algo = static_cast<int>(p.algo);
  c.supported = p.status == CUDNN_STATUS_SUCCESS;
  c.deterministic = p.determinism == CUDNN_DETERMINISTIC;
  c.fma_math = p.mathType == CUDNN_FMA_MATH;
  c.math = static_cast<int>(p.mathType);
  c.workspace = p.memory;
  return c;
}

// What a ranking returned, for the error when nothing is acceptable.
std::string Results(const std::vector<AlgorithmCandidate>& all) {
  std::string out;
  for (const AlgorithmCandidate& c : all) {
    absl::StrAppendFormat(&out, "%s%s algo %d: %s, %s, %s, %d bytes", out.empty() ? "" : "; ",
                          c.layout == ConvLayout::kNhwc ? "NHWC" : "NCHW", c.algo,
                          c.supported ? "supported" : "not supported",
                          c.deterministic ? "deterministic" : "non-deterministic",
                          c.fma_math ? "FMA" : "tensor-op math",
                          static_cast<long long>(c.workspace));
  }
  return out.empty() ? "no results" : out;
}

}  // namespace

std::string ConvShape::Text() const {
  return absl::StrCat("x [", n, ",", h, ",", w, ",", c, "] -> ", k, ", ", window.Text(),
                      dtype == DType::kFloat32 ? "" : ", ",
                      dtype == DType::kFloat32 ? "" : DTypeName(dtype));
}

absl::StatusOr<ConvShape> MakeConvShape(const char* op, int64_t n, int64_t h, int64_t w, int64_t c,
                                        int64_t k, const Window& window) {
  // Each factor is below 2^31 before a product is formed, and each product
  // is checked before it is multiplied again, so nothing overflows int64.
  auto fits = [](int64_t v) { return v >= 0 && v <= kMaxInt; };
  bool ok = fits(n) && fits(h) && fits(w) && fits(c) && fits(k) && fits(window.height) &&
            fits(window.width) && fits(window.stride_h) && fits(window.stride_w) &&
            fits(window.dilation_h) && fits(window.dilation_w) && fits(window.groups) &&
            fits(window.SpanRows()) && fits(window.SpanCols());
  if (ok) {
    const WindowExtent rows = window.Rows(h), cols = window.Cols(w);
    const CudnnPadding p = PlanCudnnPadding(h, w, rows.before, rows.after, cols.before, cols.after);
    ok = fits(p.in_h) && fits(p.in_w) && fits(n * p.in_h) && fits(n * p.in_h * p.in_w) &&
         fits(n * p.in_h * p.in_w * c) && fits(n * rows.out) && fits(n * rows.out * cols.out) &&
         fits(n * rows.out * cols.out * k) && fits(window.height * window.width) &&
         fits(window.height * window.width * c) && fits(window.height * window.width * c * k);
  }
  if (!ok) {
    return absl::UnimplementedError(absl::StrCat(op, ": x [", n, ",", h, ",", w, ",", c, "] -> ", k,
                                                 " over ", window.Text(),
                                                 " exceeds cuDNN's 2^31 elements"));
  }
  return ConvShape{static_cast<int>(n), static_cast<int>(h), static_cast<int>(w),
                   static_cast<int>(c), static_cast<int>(k), window};
}

absl::StatusOr<CudaConv::ShapePlan*> CudaConv::PlanFor(const ConvShape& s) {
  auto [it, added] = plans_.try_emplace(s.Key());
  ShapePlan& plan = it->second;
  if (!added) return &plan;
  plan.shape = s;
  const WindowExtent rows = s.window.Rows(s.h), cols = s.window.Cols(s.w);
  Geometry& g = plan.geometry;
  g.padding = PlanCudnnPadding(s.h, s.w, rows.before, rows.after, cols.before, cols.after);
  g.in_h = static_cast<int>(g.padding.in_h);
  g.in_w = static_cast<int>(g.padding.in_w);
  g.out_h = static_cast<int>(rows.out);
  g.out_w = static_cast<int>(cols.out);
  // cuDNN's output extent is the window's (conv_padding.h); a shape where
  // it is not would be a bug here, not the caller's.
  if (CudnnOutput(g.in_h, g.padding.pad_h, s.window.SpanRows(), s.window.stride_h) != g.out_h ||
      CudnnOutput(g.in_w, g.padding.pad_w, s.window.SpanCols(), s.window.stride_w) != g.out_w) {
    plans_.erase(it);
    return absl::InternalError(
        absl::StrCat(s.Text(), ": cuDNN's output extent is not ", rows.out, "x", cols.out));
  }
  return &plan;
}

absl::StatusOr<const void*> CudaConv::PadInput(const ShapePlan& plan, const void* x) {
  const ConvShape& s = plan.shape;
  const Geometry& g = plan.geometry;
  if (!g.padding.explicit_pad) return x;
  const math::PadGeometry pad{s.n, s.h, s.w, s.c, g.in_h, g.in_w, g.padding.top, g.padding.left};
  PSC_ASSIGN_OR_RETURN(void* out,
                       padded_in_.Get(context_->allocator,
                                      int64_t{s.n} * g.in_h * g.in_w * s.c * s.element_bytes()));
  if (IsLowPrecision(s.dtype)) {
    PSC_CUDA_RETURN_IF_ERROR(
        Pad(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(out), pad, context_->stream));
  } else {
    PSC_CUDA_RETURN_IF_ERROR(
        Pad(static_cast<const float*>(x), static_cast<float*>(out), pad, context_->stream));
  }
  return out;
}

absl::StatusOr<CudaConv::Descs*> CudaConv::DescsFor(ShapePlan& plan, ConvLayout layout) {
  std::unique_ptr<Descs>& slot = plan.descs[static_cast<int>(layout)];
  if (slot != nullptr) return slot.get();
  const ConvShape& s = plan.shape;
  const Geometry& g = plan.geometry;
  auto d = std::make_unique<Descs>();
  PSC_ASSIGN_OR_RETURN(d->x, MakeTensorDesc());
  PSC_ASSIGN_OR_RETURN(d->y, MakeTensorDesc());
  PSC_ASSIGN_OR_RETURN(d->w, MakeFilterDesc());
  PSC_ASSIGN_OR_RETURN(d->conv, MakeConvDesc());
  const cudnnTensorFormat_t format =
      layout == ConvLayout::kNhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  // The activations and the filter in the shape's dtype; the arithmetic in
  // float32 (the convolution descriptor's type) in every dtype.
  const cudnnDataType_t type = CudnnType(s.dtype);
  PSC_CUDNN_RETURN_IF_ERROR(
      cudnnSetTensor4dDescriptor(d->x.get(), format, type, s.n, s.c, g.in_h, g.in_w));
  PSC_CUDNN_RETURN_IF_ERROR(
      cudnnSetTensor4dDescriptor(d->y.get(), format, type, s.n, s.k, g.out_h, g.out_w));
  // NHWC filters are KRSC, NCHW ones KCRS.
  // Grouped: K filters of C / groups channels each.
  PSC_CUDNN_RETURN_IF_ERROR(cudnnSetFilter4dDescriptor(d->w.get(), type, format, s.k, s.cg(),
                                                       static_cast<int>(s.window.height),
                                                       static_cast<int>(s.window.width)));
  PSC_CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(
      d->conv.get(), static_cast<int>(g.padding.pad_h), static_cast<int>(g.padding.pad_w),
      static_cast<int>(s.window.stride_h), static_cast<int>(s.window.stride_w),
      static_cast<int>(s.window.dilation_h), static_cast<int>(s.window.dilation_w),
      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  PSC_CUDNN_RETURN_IF_ERROR(
      cudnnSetConvolutionGroupCount(d->conv.get(), static_cast<int>(s.window.groups)));
  int on = 0, ok = 0, oh = 0, ow = 0;
  PSC_CUDNN_RETURN_IF_ERROR(cudnnGetConvolution2dForwardOutputDim(d->conv.get(), d->x.get(),
                                                                  d->w.get(), &on, &ok, &oh, &ow));
  if (on != s.n || ok != s.k || oh != g.out_h || ow != g.out_w) {
    return absl::InternalError(absl::StrCat(s.Text(), ": cuDNN computes an output of ", on, "x", ok,
                                            "x", oh, "x", ow, " (NKHW), want ", s.n, "x", s.k, "x",
                                            g.out_h, "x", g.out_w));
  }
  slot = std::move(d);
  return slot.get();
}

absl::Status CudaConv::SetMath(Descs* d, int math) {
  PSC_CUDNN_RETURN_IF_ERROR(
      cudnnSetConvolutionMathType(d->conv.get(), static_cast<cudnnMathType_t>(math)));
  return absl::OkStatus();
}

absl::StatusOr<const void*> CudaConv::FilterIn(const ConvShape& s, ConvLayout layout,
                                               const float* hwio) {
  const int64_t spatial = s.window.height * s.window.width;
  const int64_t taps = spatial * s.cg();
  const size_t bytes = taps * s.k * kFloat;
  if (IsLowPrecision(s.dtype)) {  // NHWC: [RSC, K] -> [K, RSC] in float32, then rounded
    PSC_ASSIGN_OR_RETURN(void* tmp, filter_tmp_.Get(context_->allocator, bytes));
    PSC_ASSIGN_OR_RETURN(void* out,
                         filter_.Get(context_->allocator, taps * s.k * s.element_bytes()));
    float* t = static_cast<float*>(tmp);
    PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(hwio, t, 1, taps, s.k, context_->stream));
    PSC_CUDA_RETURN_IF_ERROR(
        Cast(t, CastCode(DType::kFloat32), out, CastCode(s.dtype), taps * s.k, context_->stream));
    return out;
  }
  PSC_ASSIGN_OR_RETURN(void* out, filter_.Get(context_->allocator, bytes));
  float* o = static_cast<float*>(out);
  if (layout == ConvLayout::kNhwc) {  // [RSC, K] -> [K, RSC]
    PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(hwio, o, 1, taps, s.k, context_->stream));
    return o;
  }
  PSC_ASSIGN_OR_RETURN(void* tmp, filter_tmp_.Get(context_->allocator, bytes));
  float* t = static_cast<float*>(tmp);
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(hwio, t, 1, taps, s.k, context_->stream));       // KRSC
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(t, o, s.k, spatial, s.cg(), context_->stream));  // KCRS
  return o;
}

absl::Status CudaConv::FilterOut(const ConvShape& s, ConvLayout layout, const void* cudnn,
                                 float* hwio) {
  const int64_t spatial = s.window.height * s.window.width;
  const int64_t taps = spatial * s.cg();
  if (IsLowPrecision(s.dtype)) {  // NHWC: widened, then [K, RSC] -> [RSC, K]
    PSC_ASSIGN_OR_RETURN(void* tmp, filter_tmp_.Get(context_->allocator, taps * s.k * kFloat));
    float* t = static_cast<float*>(tmp);
    PSC_CUDA_RETURN_IF_ERROR(
        Cast(cudnn, CastCode(s.dtype), t, CastCode(DType::kFloat32), taps * s.k, context_->stream));
    PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(t, hwio, 1, s.k, taps, context_->stream));
    return absl::OkStatus();
  }
  const float* f = static_cast<const float*>(cudnn);
  if (layout == ConvLayout::kNhwc) {
    PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(f, hwio, 1, s.k, taps, context_->stream));
    return absl::OkStatus();
  }
  PSC_ASSIGN_OR_RETURN(void* tmp, filter_tmp_.Get(context_->allocator, taps * s.k * kFloat));
  float* t = static_cast<float*>(tmp);
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(f, t, s.k, s.cg(), spatial, context_->stream));  // KRSC
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(t, hwio, 1, s.k, taps, context_->stream));
  return absl::OkStatus();
}

absl::StatusOr<float*> CudaConv::ToNchw(const float* nhwc, int n, int64_t hw, int c,
                                        Scratch* scratch) {
  PSC_ASSIGN_OR_RETURN(void* out, scratch->Get(context_->allocator, int64_t{n} * hw * c * kFloat));
  float* o = static_cast<float*>(out);
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(nhwc, o, n, hw, c, context_->stream));
  return o;
}

absl::Status CudaConv::ToNhwc(const float* nchw, int n, int64_t hw, int c, float* nhwc) {
  PSC_CUDA_RETURN_IF_ERROR(BatchedTranspose(nchw, nhwc, n, c, hw, context_->stream));
  return absl::OkStatus();
}

absl::StatusOr<CudaConv::Operands> CudaConv::Prepare(const ShapePlan& plan, ConvDirection d,
                                                     ConvLayout layout, const void* a,
                                                     const void* b, void* out) {
  const ConvShape& s = plan.shape;
  if (layout == ConvLayout::kNchw && IsLowPrecision(s.dtype)) {
    return absl::InternalError(absl::StrCat(s.Text(), ": NCHW is not run in a 16-bit format"));
  }
  const int64_t in_hw = int64_t{plan.geometry.in_h} * plan.geometry.in_w;
  const int64_t out_hw = int64_t{plan.geometry.out_h} * plan.geometry.out_w;
  Operands o;
  switch (d) {
    case ConvDirection::kForward:
    case ConvDirection::kBackwardData: {
      const bool fwd = d == ConvDirection::kForward;
      PSC_ASSIGN_OR_RETURN(o.other, FilterIn(s, layout, static_cast<const float*>(b)));
      if (layout == ConvLayout::kNhwc) {
        o.in = a;
        o.out = out;
        return o;
      }
      PSC_ASSIGN_OR_RETURN(o.in, ToNchw(static_cast<const float*>(a), s.n, fwd ? in_hw : out_hw,
                                        fwd ? s.c : s.k, &in_nchw_));
      PSC_ASSIGN_OR_RETURN(
          o.out, out_nchw_.Get(context_->allocator,
                               int64_t{s.n} * (fwd ? out_hw * s.k : in_hw * s.c) * kFloat));
      return o;
    }
    case ConvDirection::kBackwardFilter: {
      // cuDNN's dw in s.dtype (FilterOut widens it).
      PSC_ASSIGN_OR_RETURN(
          o.out, filter_.Get(context_->allocator,
                             s.window.height * s.window.width * s.cg() * s.k * s.element_bytes()));
      if (layout == ConvLayout::kNhwc) {
        o.in = a;
        o.other = b;
        return o;
      }
      PSC_ASSIGN_OR_RETURN(o.in, ToNchw(static_cast<const float*>(a), s.n, in_hw, s.c, &in_nchw_));
      PSC_ASSIGN_OR_RETURN(o.other,
                           ToNchw(static_cast<const float*>(b), s.n, out_hw, s.k, &other_nchw_));
      return o;
    }
  }
  return absl::InternalError("bad direction");
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

absl::Status CudaConv::Rank(ShapePlan& plan, ConvDirection d, const void* a, const void* b,
                            void* out) {
  const ConvShape& s = plan.shape;
  Choice& choice = plan.choice[static_cast<int>(d)];
  if (choice.ranked) return absl::OkStatus();
  const bool autotune = context_->autotune;
  DeviceBuffer find_ws;
  if (autotune) {
    PSC_ASSIGN_OR_RETURN(find_ws, FindWorkspace());
  }
  const cudnnHandle_t h = context_->cudnn;
  std::vector<AlgorithmCandidate> all;
  std::string failed;
  // Tensor-op math in a 16-bit format (what it is for); in float32 only
  // where TF32 is allowed.
  const bool low = IsLowPrecision(s.dtype);
  const bool reduced_math = low || context_->allow_tf32;
  for (ConvLayout layout : Layouts(s)) {
    PSC_ASSIGN_OR_RETURN(Descs * ds, DescsFor(plan, layout));
    PSC_RETURN_IF_ERROR(SetMath(ds, low                    ? CUDNN_TENSOR_OP_MATH
                                    : context_->allow_tf32 ? CUDNN_DEFAULT_MATH
                                                           : CUDNN_FMA_MATH));
    Operands o;
    if (autotune) {
      PSC_ASSIGN_OR_RETURN(o, Prepare(plan, d, layout, a, b, out));
    }
    int count = 0;
    absl::Status ranked;
    auto collect = [&](const auto* perf) {
      for (int i = 0; i < count; ++i) all.push_back(FromPerf(perf[i], layout));
    };
    switch (d) {
      case ConvDirection::kForward: {
        cudnnConvolutionFwdAlgoPerf_t perf[kMaxAlgos];
        ranked = autotune ? CudnnStatus(cudnnFindConvolutionForwardAlgorithmEx(
                                            h, ds->x.get(), o.in, ds->w.get(), o.other,
                                            ds->conv.get(), ds->y.get(), o.out, kMaxAlgos, &count,
                                            perf, find_ws.get(), find_ws.bytes()),
                                        "cudnnFindConvolutionForwardAlgorithmEx")
                          : CudnnStatus(cudnnGetConvolutionForwardAlgorithm_v7(
                                            h, ds->x.get(), ds->w.get(), ds->conv.get(),
                                            ds->y.get(), kMaxAlgos, &count, perf),
                                        "cudnnGetConvolutionForwardAlgorithm_v7");
        if (ranked.ok()) collect(perf);
        break;
      }
      case ConvDirection::kBackwardData: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[kMaxAlgos];
        ranked = autotune ? CudnnStatus(cudnnFindConvolutionBackwardDataAlgorithmEx(
                                            h, ds->w.get(), o.other, ds->y.get(), o.in,
                                            ds->conv.get(), ds->x.get(), o.out, kMaxAlgos, &count,
                                            perf, find_ws.get(), find_ws.bytes()),
                                        "cudnnFindConvolutionBackwardDataAlgorithmEx")
                          : CudnnStatus(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                            h, ds->w.get(), ds->y.get(), ds->conv.get(),
                                            ds->x.get(), kMaxAlgos, &count, perf),
                                        "cudnnGetConvolutionBackwardDataAlgorithm_v7");
        if (ranked.ok()) collect(perf);
        break;
      }
      case ConvDirection::kBackwardFilter: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[kMaxAlgos];
        ranked = autotune ? CudnnStatus(cudnnFindConvolutionBackwardFilterAlgorithmEx(
                                            h, ds->x.get(), o.in, ds->y.get(), o.other,
                                            ds->conv.get(), ds->w.get(), o.out, kMaxAlgos, &count,
                                            perf, find_ws.get(), find_ws.bytes()),
                                        "cudnnFindConvolutionBackwardFilterAlgorithmEx")
                          : CudnnStatus(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                            h, ds->x.get(), ds->y.get(), ds->conv.get(),
                                            ds->w.get(), kMaxAlgos, &count, perf),
                                        "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
        if (ranked.ok()) collect(perf);
        break;
      }
    }
    if (absl::IsFailedPrecondition(ranked)) return ranked;  // no usable GPU: say so
    if (!ranked.ok()) {
      absl::StrAppend(&failed,
                      layout == ConvLayout::kNhwc ? " NHWC: " : " NCHW: ", ranked.ToString(), ".");
    }
  }
  // Autotune: the Find workspace goes back now, and the cache in growth mode
  // (the execution workspace is sized to the choice).
  const size_t limit = autotune ? find_ws.bytes() : context_->conv_workspace_limit;
  if (autotune) {
    find_ws.Reset();
    context_->allocator->ReleaseCached();
  }
  choice.candidates = Acceptable(all, reduced_math, limit);
  if (choice.candidates.empty()) {
    return absl::UnimplementedError(
        absl::StrCat(DirectionName(d), " ", s.Text(), ": cuDNN has no deterministic algorithm",
                     reduced_math ? "" : " with CUDNN_FMA_MATH", " within ", limit,
                     " bytes of workspace: ", Results(all), ".", failed));
  }
  choice.ranked = true;
  return absl::OkStatus();
}

absl::Status CudaConv::RunCandidate(ShapePlan& plan, ConvDirection d, const AlgorithmCandidate& c,
                                    const void* a, const void* b, void* out) {
  const ConvShape& s = plan.shape;
  const int64_t in_hw = int64_t{plan.geometry.in_h} * plan.geometry.in_w;
  const int64_t out_hw = int64_t{plan.geometry.out_h} * plan.geometry.out_w;
  PSC_ASSIGN_OR_RETURN(Descs * ds, DescsFor(plan, c.layout));
  PSC_RETURN_IF_ERROR(SetMath(ds, c.math));
  // The workspace as cuDNN states it for this algorithm and math type (a
  // heuristic's estimate may be lower), within the limit.
  const cudnnHandle_t h = context_->cudnn;
  size_t needed = 0;
  switch (d) {
    case ConvDirection::kForward:
      PSC_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardWorkspaceSize(
          h, ds->x.get(), ds->w.get(), ds->conv.get(), ds->y.get(),
          static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), &needed));
      break;
    case ConvDirection::kBackwardData:
      PSC_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataWorkspaceSize(
          h, ds->w.get(), ds->y.get(), ds->conv.get(), ds->x.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), &needed));
      break;
    case ConvDirection::kBackwardFilter:
      PSC_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterWorkspaceSize(
          h, ds->x.get(), ds->y.get(), ds->conv.get(), ds->w.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), &needed));
      break;
  }
  const size_t ws_bytes = std::max(needed, c.workspace);
  if (ws_bytes > context_->conv_workspace_limit) {
    return absl::UnimplementedError(absl::StrCat("needs ", ws_bytes, " bytes of workspace, over ",
                                                 context_->conv_workspace_limit));
  }
  PSC_ASSIGN_OR_RETURN(Operands o, Prepare(plan, d, c.layout, a, b, out));
  PSC_ASSIGN_OR_RETURN(void* ws, Workspace(ws_bytes));
  const float one = 1.0f, zero = 0.0f;
  switch (d) {
    case ConvDirection::kForward:
      PSC_CUDNN_RETURN_IF_ERROR(cudnnConvolutionForward(
          h, &one, ds->x.get(), o.in, ds->w.get(), o.other, ds->conv.get(),
          static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws, ws_bytes, &zero, ds->y.get(), o.out));
      if (c.layout == ConvLayout::kNchw) {
        return ToNhwc(static_cast<const float*>(o.out), s.n, out_hw, s.k, static_cast<float*>(out));
      }
      return absl::OkStatus();
    case ConvDirection::kBackwardData:
      PSC_CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardData(
          h, &one, ds->w.get(), o.other, ds->y.get(), o.in, ds->conv.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws, ws_bytes, &zero, ds->x.get(),
          o.out));
      if (c.layout == ConvLayout::kNchw) {
        return ToNhwc(static_cast<const float*>(o.out), s.n, in_hw, s.c, static_cast<float*>(out));
      }
      return absl::OkStatus();
    case ConvDirection::kBackwardFilter:
      PSC_CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardFilter(
          h, &one, ds->x.get(), o.in, ds->y.get(), o.other, ds->conv.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws, ws_bytes, &zero, ds->w.get(),
          o.out));
      return FilterOut(s, c.layout, o.out, static_cast<float*>(out));
  }
  return absl::InternalError("bad direction");
}

absl::Status CudaConv::Run(ShapePlan& plan, ConvDirection d, const void* a, const void* b,
                           void* out) {
  PSC_RETURN_IF_ERROR(Rank(plan, d, a, b, out));
  Choice& choice = plan.choice[static_cast<int>(d)];
  if (choice.chosen >= 0) {
    return RunCandidate(plan, d, choice.candidates[choice.chosen], a, b, out);
  }
  PSC_ASSIGN_OR_RETURN(
      choice.chosen,
      FirstThatRuns(
          static_cast<int>(choice.candidates.size()),
          [&](int i) { return RunCandidate(plan, d, choice.candidates[i], a, b, out); },
          [&](int i) { return choice.candidates[i].Text(); },
          absl::StrCat(DirectionName(d), " ", plan.shape.Text())));
  return absl::OkStatus();
}

absl::Status CudaConv::Widened(const ShapePlan& plan, ConvDirection d, const void* a, const void* b,
                               void* out) {
  const ConvShape& s = plan.shape;
  ConvShape f = s;
  f.dtype = DType::kFloat32;
  const int64_t act_in = int64_t{s.n} * s.h * s.w * s.c;
  const int64_t act_out = int64_t{s.n} * plan.geometry.out_h * plan.geometry.out_w * s.k;
  const int from = CastCode(s.dtype), to = CastCode(DType::kFloat32);
  auto widen = [&](const void* in, int64_t n, Scratch* scratch) -> absl::StatusOr<float*> {
    PSC_ASSIGN_OR_RETURN(void* o, scratch->Get(context_->allocator, n * kFloat));
    PSC_CUDA_RETURN_IF_ERROR(Cast(in, from, o, to, n, context_->stream));
    return static_cast<float*>(o);
  };
  switch (d) {
    case ConvDirection::kForward: {
      PSC_ASSIGN_OR_RETURN(float* x, widen(a, act_in, &wide_a_));
      PSC_ASSIGN_OR_RETURN(void* y, wide_out_.Get(context_->allocator, act_out * kFloat));
      PSC_RETURN_IF_ERROR(Forward(f, x, static_cast<const float*>(b), y));
      PSC_CUDA_RETURN_IF_ERROR(Cast(y, to, out, from, act_out, context_->stream));
      return absl::OkStatus();
    }
    case ConvDirection::kBackwardData: {
      PSC_ASSIGN_OR_RETURN(float* dy, widen(a, act_out, &wide_a_));
      PSC_ASSIGN_OR_RETURN(void* dx, wide_out_.Get(context_->allocator, act_in * kFloat));
      PSC_RETURN_IF_ERROR(BackwardData(f, dy, static_cast<const float*>(b), dx));
      PSC_CUDA_RETURN_IF_ERROR(Cast(dx, to, out, from, act_in, context_->stream));
      return absl::OkStatus();
    }
    case ConvDirection::kBackwardFilter: {
      PSC_ASSIGN_OR_RETURN(float* x, widen(a, act_in, &wide_a_));
      PSC_ASSIGN_OR_RETURN(float* dy, widen(b, act_out, &wide_b_));
      return BackwardFilter(f, x, dy, static_cast<float*>(out));
    }
  }
  return absl::InternalError("bad direction");
}

absl::Status CudaConv::RunOrWiden(ShapePlan& plan, ConvDirection d, const void* a, const void* b,
                                  void* out, const void* unpadded_a) {
  absl::Status s = Run(plan, d, a, b, out);
  if (!IsLowPrecision(plan.shape.dtype) || !absl::IsUnimplemented(s)) return s;
  plan.widen[static_cast<int>(d)] = true;
  return Widened(plan, d, unpadded_a, b, out);
}

absl::Status CudaConv::Forward(const ConvShape& s, const void* x, const float* w, void* y) {
  PSC_ASSIGN_OR_RETURN(ShapePlan * plan, PlanFor(s));
  if (plan->widen[0]) return Widened(*plan, ConvDirection::kForward, x, w, y);
  PSC_ASSIGN_OR_RETURN(const void* in, PadInput(*plan, x));
  return RunOrWiden(*plan, ConvDirection::kForward, in, w, y, x);
}

absl::Status CudaConv::BackwardData(const ConvShape& s, const void* dy, const float* w, void* dx) {
  PSC_ASSIGN_OR_RETURN(ShapePlan * plan, PlanFor(s));
  if (plan->widen[1]) return Widened(*plan, ConvDirection::kBackwardData, dy, w, dx);
  const Geometry& g = plan->geometry;
  if (!g.padding.explicit_pad) {
    return RunOrWiden(*plan, ConvDirection::kBackwardData, dy, w, dx, dy);
  }
  // The gradient of the padded input, then its inside: the padding's
  // gradient is dropped.
  PSC_ASSIGN_OR_RETURN(void* padded,
                       padded_grad_.Get(context_->allocator,
                                        int64_t{s.n} * g.in_h * g.in_w * s.c * s.element_bytes()));
  if (absl::Status run = Run(*plan, ConvDirection::kBackwardData, dy, w, padded); !run.ok()) {
    if (!IsLowPrecision(s.dtype) || !absl::IsUnimplemented(run)) return run;
    plan->widen[1] = true;
    return Widened(*plan, ConvDirection::kBackwardData, dy, w, dx);
  }
  const math::PadGeometry pad{s.n, s.h, s.w, s.c, g.in_h, g.in_w, g.padding.top, g.padding.left};
  if (IsLowPrecision(s.dtype)) {
    PSC_CUDA_RETURN_IF_ERROR(Crop(static_cast<const uint16_t*>(padded), static_cast<uint16_t*>(dx),
                                  pad, context_->stream));
  } else {
    PSC_CUDA_RETURN_IF_ERROR(
        Crop(static_cast<const float*>(padded), static_cast<float*>(dx), pad, context_->stream));
  }
  return absl::OkStatus();
}

absl::Status CudaConv::BackwardFilter(const ConvShape& s, const void* x, const void* dy,
                                      float* dw) {
  PSC_ASSIGN_OR_RETURN(ShapePlan * plan, PlanFor(s));
  if (plan->widen[2]) return Widened(*plan, ConvDirection::kBackwardFilter, x, dy, dw);
  PSC_ASSIGN_OR_RETURN(const void* in, PadInput(*plan, x));
  return RunOrWiden(*plan, ConvDirection::kBackwardFilter, in, dy, dw, x);
}

absl::Status CudaConv::Plan(const ConvShape& s, ConvDirection d) {
  PSC_ASSIGN_OR_RETURN(ShapePlan * plan, PlanFor(s));
  if (plan->choice[static_cast<int>(d)].ranked) return absl::OkStatus();
  if (plan->widen[static_cast<int>(d)]) return PlanWidened(s, d);
  absl::Status ranked = RankAhead(plan, d);
  if (!IsLowPrecision(s.dtype) || !absl::IsUnimplemented(ranked)) return ranked;
  plan->widen[static_cast<int>(d)] = true;  // no 16-bit algorithm: float32 copies
  return PlanWidened(s, d);
}

absl::Status CudaConv::PlanWidened(const ConvShape& s, ConvDirection d) {
  ConvShape f = s;
  f.dtype = DType::kFloat32;
  return Plan(f, d);
}

absl::Status CudaConv::RankAhead(ShapePlan* plan, ConvDirection d) {
  const ConvShape& s = plan->shape;
  if (!context_->autotune) return Rank(*plan, d, nullptr, nullptr, nullptr);
  // A Find times real runs: give it operands of the shape (zeros, in
  // cuDNN's geometry), then free them.
  const Geometry& g = plan->geometry;
  const int64_t act_in = int64_t{s.n} * g.in_h * g.in_w * s.c;
  const int64_t act_out = int64_t{s.n} * g.out_h * g.out_w * s.k;
  const int64_t filter = s.window.height * s.window.width * s.cg() * s.k;
  const int64_t sizes[3][3] = {{act_in, filter, act_out},             // x, w -> y
                               {act_out, filter, act_in},             // dy, w -> dx
                               {act_in, act_out, filter}};            // x, dy -> dw
  const int filter_at = d == ConvDirection::kBackwardFilter ? 2 : 1;  // float32 HWIO
  DeviceBuffer buffers[3];
  for (int i = 0; i < 3; ++i) {
    const size_t bytes =
        sizes[static_cast<int>(d)][i] * (i == filter_at ? kFloat : s.element_bytes());
    PSC_ASSIGN_OR_RETURN(buffers[i], DeviceBuffer::Allocate(context_->allocator, bytes));
    PSC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffers[i].get(), 0, bytes, context_->stream));
  }
  absl::Status s_ranked = Rank(*plan, d, buffers[0].get(), buffers[1].get(), buffers[2].get());
  // The buffers go back to the allocator at scope end; the Find ran on the
  // stream, which is where the allocator hands them out again.
  return s_ranked;
}

std::string CudaConv::Describe(const ConvShape& s) const {
  auto it = plans_.find(s.Key());
  if (it == plans_.end()) return "not planned";
  const ShapePlan& p = it->second;
  auto text = [&p](const char* what, const Choice& c) {
    if (p.widen[&c - p.choice]) return absl::StrCat(what, " widened to float32");
    if (c.chosen >= 0) return absl::StrCat(what, " ", c.candidates[c.chosen].Text());
    if (c.ranked) return absl::StrCat(what, " ", c.candidates.size(), " candidates, not run yet");
    return absl::StrCat(what, " not planned");
  };
  return absl::StrCat(p.geometry.padding.explicit_pad ? "explicit padding; " : "",
                      text("fwd", p.choice[0]), "; ", text("bwd-data", p.choice[1]), "; ",
                      text("bwd-filter", p.choice[2]));
}

std::vector<std::string> CudaConv::DescribeAll() const {
  std::vector<std::string> out;
  for (const auto& [key, plan] : plans_) {
    out.push_back(absl::StrCat(plan.shape.Text(), ": ", Describe(plan.shape)));
  }
  return out;
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
