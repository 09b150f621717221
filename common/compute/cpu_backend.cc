#include "common/compute/cpu_backend.h"

#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_conv.h"
#include "common/compute/cpu_elementwise.h"
#include "common/compute/cpu_tensor.h"
#include "dnnl.hpp"

namespace psc {
namespace compute {
namespace {

using cpu::ConvPrimitives;
using cpu::Cpu;
using cpu::CpuTensor;
using cpu::DescFor;
using cpu::Layout;
using cpu::LayoutOf;
using cpu::Reorderer;
using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

const float* Data(const DeviceTensor& t) { return Cpu(t).data(); }
float* Data(DeviceTensor* t) { return Cpu(t).data(); }

struct DensePrims {
  memory::desc fwd_scratch, bwd_data_scratch, bwd_weights_scratch;  // in the shared buffer
  dnnl::inner_product_forward::primitive_desc fwd_pd;
  dnnl::inner_product_forward fwd;
  dnnl::inner_product_backward_data bwd_data;
  dnnl::inner_product_backward_weights bwd_weights;
  memory::desc src, weights, bias, dst;
};

class CpuBackend : public ComputeBackend {
 public:
  CpuBackend(int threads, ConvAlgorithm conv)
      : threads_(threads),
        conv_(conv),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_),
        reorder_(engine_) {}

  std::string name() const override { return "cpu:onednn"; }

  std::vector<std::string> ConvolutionsChosen() const {
    std::vector<std::string> out;
    for (const auto& [key, p] : convs_) {
      const auto& [n, h, w, c, k, relu] = key;
      out.push_back(absl::StrCat("Conv2D [", n, ",", h, ",", w, ",", c, "]->", k,
                                 relu ? " relu" : "", ": ", p.algorithms, " (", p.impl, ")"));
    }
    return out;
  }

  bool Supports(const OpSpec& spec) const override {
    // Every op, any shape with positive dimensions (4-D activations for
    // convolution and pooling).
    for (int64_t d : spec.input) {
      if (d < 1) return false;
    }
    switch (spec.op) {
      case Op::kConv2D:
      case Op::kConv2DBackwardData:
      case Op::kConv2DBackwardWeights:
      case Op::kMaxPool2x2:
      case Op::kMaxPool2x2Backward:
      case Op::kGlobalPool:
      case Op::kGlobalPoolBackward:
      case Op::kAvgPool2x2:
      case Op::kAvgPool2x2Backward:
        return spec.input.size() == 4;
      default:
        return !spec.input.empty();
    }
  }

  absl::StatusOr<std::unique_ptr<DeviceTensor>> Allocate(const Shape& shape) override {
    PSC_ASSIGN_OR_RETURN(auto t, CpuTensor::Create(shape));
    return std::unique_ptr<DeviceTensor>(std::move(t));
  }

  absl::Status CopyFromHost(absl::Span<const float> src, DeviceTensor* dst) override {
    if (static_cast<int64_t>(src.size()) != dst->size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CopyFromHost: ", src.size(), " floats for shape ", ShapeText(dst->shape())));
    }
    // An empty span may have no data pointer, and memcpy must not see null.
    if (!src.empty()) std::memcpy(Data(dst), src.data(), src.size() * sizeof(float));
    Cpu(dst).set_layout(Layout::kPlain);
    return absl::OkStatus();
  }

  absl::Status CopyToHost(const DeviceTensor& src, absl::Span<float> dst) override {
    if (static_cast<int64_t>(dst.size()) != src.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("CopyToHost: ", dst.size(), " floats for shape ", ShapeText(src.shape())));
    }
    if (dst.empty()) return absl::OkStatus();
    const CpuTensor& t = Cpu(src);
    if (t.layout() == Layout::kPlain) {
      std::memcpy(dst.data(), t.data(), dst.size() * sizeof(float));
      return absl::OkStatus();
    }
    return OneDnn("CopyToHost", [&] {
      reorder_.Run(t.desc(), t.data(), DescFor(t.shape(), Layout::kPlain), dst.data(), stream_);
    });
  }

  absl::Status Conv2D(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& b,
                      bool relu, DeviceTensor* y) override {
    UseThreads();
    constexpr const char* kOp = "Conv2D";
    PSC_RETURN_IF_ERROR(WantRank(kOp, "x", x, 4));
    PSC_RETURN_IF_ERROR(WantRank(kOp, "w", w, 4));
    const int64_t n = x.shape()[0], h = x.shape()[1], wd = x.shape()[2], c = x.shape()[3];
    const int64_t k = w.shape()[3];
    PSC_RETURN_IF_ERROR(WantShape(kOp, "w", w, {3, 3, c, k}));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "b", b, {k}));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "y", *y, {n, h, wd, k}));
    return OneDnn(kOp, [&] {
      ConvPrimitives& p = Conv(n, h, wd, c, k, relu);
      memory src = reorder_.As(Cpu(x), p.fwd_pd.src_desc(), stream_, kSlotConvSrc);
      memory bias(p.bias, engine_, const_cast<float*>(Data(b)));
      memory dst(p.fwd_pd.dst_desc(), engine_, Data(y));
      reorder_.Run(p.user_weights, Data(w), p.fwd_pd.weights_desc(),
                   p.fwd_weights.get_data_handle(), stream_);
      p.fwd.execute(stream_, {{DNNL_ARG_SRC, src},
                              {DNNL_ARG_WEIGHTS, p.fwd_weights},
                              {DNNL_ARG_BIAS, bias},
                              {DNNL_ARG_DST, dst},
                              {DNNL_ARG_SCRATCHPAD, Scratch(p.fwd_scratch)}});
      Cpu(y).set_layout(*LayoutOf(y->shape(), p.fwd_pd.dst_desc()));
    });
  }

  absl::Status Conv2DBackwardData(const DeviceTensor& dy, const DeviceTensor& w,
                                  DeviceTensor* dx) override {
    UseThreads();
    constexpr const char* kOp = "Conv2DBackwardData";
    PSC_RETURN_IF_ERROR(WantRank(kOp, "dy", dy, 4));
    PSC_RETURN_IF_ERROR(WantRank(kOp, "w", w, 4));
    const int64_t n = dy.shape()[0], h = dy.shape()[1], wd = dy.shape()[2], k = dy.shape()[3];
    const int64_t c = w.shape()[2];
    PSC_RETURN_IF_ERROR(WantShape(kOp, "w", w, {3, 3, c, k}));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "dx", *dx, {n, h, wd, c}));
    return OneDnn(kOp, [&] {
      ConvPrimitives& p = Conv(n, h, wd, c, k, /*relu=*/false);
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
                                     DeviceTensor* dw, DeviceTensor* db) override {
    UseThreads();
    constexpr const char* kOp = "Conv2DBackwardWeights";
    PSC_RETURN_IF_ERROR(WantRank(kOp, "x", x, 4));
    PSC_RETURN_IF_ERROR(WantRank(kOp, "dy", dy, 4));
    const int64_t n = x.shape()[0], h = x.shape()[1], wd = x.shape()[2], c = x.shape()[3];
    const int64_t k = dy.shape()[3];
    PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, {n, h, wd, k}));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "dw", *dw, {3, 3, c, k}));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "db", *db, {k}));
    return OneDnn(kOp, [&] {
      ConvPrimitives& p = Conv(n, h, wd, c, k, /*relu=*/false);
      memory src = reorder_.As(Cpu(x), p.bwd_weights_pd.src_desc(), stream_, kSlotConvSrc);
      memory diff_dst =
          reorder_.As(Cpu(dy), p.bwd_weights_pd.diff_dst_desc(), stream_, kSlotConvDiffDst);
      memory diff_bias(p.bias, engine_, Data(db));
      p.bwd_weights.execute(stream_, {{DNNL_ARG_SRC, src},
                                      {DNNL_ARG_DIFF_DST, diff_dst},
                                      {DNNL_ARG_DIFF_WEIGHTS, p.diff_weights},
                                      {DNNL_ARG_DIFF_BIAS, diff_bias},
                                      {DNNL_ARG_SCRATCHPAD, Scratch(p.bwd_weights_scratch)}});
      reorder_.Run(p.bwd_weights_pd.diff_weights_desc(), p.diff_weights.get_data_handle(),
                   p.user_weights, Data(dw), stream_);
    });
  }

  absl::Status ReluBackward(const DeviceTensor& y, const DeviceTensor& dy,
                            DeviceTensor* dx) override {
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

  // Elementwise on the raw data, in the input's layout.
  absl::Status Activate(Activation f, float alpha, const DeviceTensor& x,
                        DeviceTensor* y) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantShape("Activation", "y", *y, x.shape()));
    cpu::Activate(f, alpha, Cpu(x).data(), Data(y), x.size());
    Cpu(y).set_layout(Cpu(x).layout());
    return absl::OkStatus();
  }

  absl::Status ActivateBackward(Activation f, float alpha, const DeviceTensor& y,
                                const DeviceTensor& dy, DeviceTensor* dx) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantShape("ActivationBackward", "dy", dy, y.shape()));
    PSC_RETURN_IF_ERROR(WantShape("ActivationBackward", "dx", *dx, y.shape()));
    const CpuTensor& yt = Cpu(y);
    const float* dyv = Data(dy);
    if (Cpu(dy).layout() != yt.layout()) {
      PSC_RETURN_IF_ERROR(OneDnn("ActivationBackward", [&] {
        dyv = static_cast<const float*>(
            reorder_.As(Cpu(dy), yt.desc(), stream_, kSlotElementwise).get_data_handle());
      }));
    }
    cpu::ActivateBackward(f, alpha, yt.data(), dyv, Data(dx), y.size());
    Cpu(dx).set_layout(yt.layout());
    return absl::OkStatus();
  }

  // On the physical layout (below): pooling a blocked tensor's N*C/b images
  // of b channels gives [N, C/b, b], i.e. the plain [N, C].
  absl::Status GlobalPool(GlobalPooling kind, const DeviceTensor& x, DeviceTensor* y) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantRank("GlobalPool", "x", x, 4));
    PSC_RETURN_IF_ERROR(WantShape("GlobalPool", "y", *y, {x.shape()[0], x.shape()[3]}));
    const Shape phys = Cpu(x).PhysicalNhwc();
    cpu::GlobalPool(kind, Cpu(x).data(), phys[0], phys[1] * phys[2], phys[3], Data(y));
    Cpu(y).set_layout(Layout::kPlain);
    return absl::OkStatus();
  }

  absl::Status GlobalPoolBackward(GlobalPooling kind, const DeviceTensor& x, const DeviceTensor& dy,
                                  DeviceTensor* dx) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantRank("GlobalPoolBackward", "x", x, 4));
    PSC_RETURN_IF_ERROR(WantShape("GlobalPoolBackward", "dy", dy, {x.shape()[0], x.shape()[3]}));
    PSC_RETURN_IF_ERROR(WantShape("GlobalPoolBackward", "dx", *dx, x.shape()));
    const float* dyv = nullptr;
    PSC_RETURN_IF_ERROR(OneDnn("GlobalPoolBackward",
                               [&] { dyv = reorder_.Plain(Cpu(dy), stream_, kSlotElementwise); }));
    const Shape phys = Cpu(x).PhysicalNhwc();
    cpu::GlobalPoolBackward(kind, Cpu(x).data(), dyv, phys[0], phys[1] * phys[2], phys[3],
                            Data(dx));
    Cpu(dx).set_layout(Cpu(x).layout());
    return absl::OkStatus();
  }

  // On the physical layout, as MaxPool2x2.
  absl::Status AvgPool2x2(const DeviceTensor& x, DeviceTensor* y) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantRank("AvgPool2x2", "x", x, 4));
    PSC_RETURN_IF_ERROR(WantShape(
        "AvgPool2x2", "y", *y, {x.shape()[0], x.shape()[1] / 2, x.shape()[2] / 2, x.shape()[3]}));
    const Shape phys = Cpu(x).PhysicalNhwc();
    cpu::AvgPool2x2(Cpu(x).data(), phys[0], phys[1], phys[2], phys[3], Data(y));
    Cpu(y).set_layout(Cpu(x).layout());
    return absl::OkStatus();
  }

  absl::Status AvgPool2x2Backward(const DeviceTensor& x, const DeviceTensor& dy,
                                  DeviceTensor* dx) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantRank("AvgPool2x2Backward", "x", x, 4));
    PSC_RETURN_IF_ERROR(
        WantShape("AvgPool2x2Backward", "dy", dy,
                  {x.shape()[0], x.shape()[1] / 2, x.shape()[2] / 2, x.shape()[3]}));
    PSC_RETURN_IF_ERROR(WantShape("AvgPool2x2Backward", "dx", *dx, x.shape()));
    const CpuTensor& xt = Cpu(x);
    const float* dyv = Data(dy);
    if (Cpu(dy).layout() != xt.layout()) {
      PSC_RETURN_IF_ERROR(OneDnn("AvgPool2x2Backward", [&] {
        dyv = static_cast<const float*>(
            reorder_.As(Cpu(dy), DescFor(dy.shape(), xt.layout()), stream_, kSlotElementwise)
                .get_data_handle());
      }));
    }
    const Shape phys = xt.PhysicalNhwc();
    cpu::AvgPool2x2Backward(dyv, phys[0], phys[1], phys[2], phys[3], Data(dx));
    Cpu(dx).set_layout(xt.layout());
    return absl::OkStatus();
  }

  // In the plain layout (a mask is made on the host).
  absl::Status Multiply(const DeviceTensor& a, const DeviceTensor& b, DeviceTensor* y) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantShape("Multiply", "b", b, a.shape()));
    PSC_RETURN_IF_ERROR(WantShape("Multiply", "y", *y, a.shape()));
    const float *av = nullptr, *bv = nullptr;
    PSC_RETURN_IF_ERROR(OneDnn("Multiply", [&] {
      av = reorder_.Plain(Cpu(a), stream_, kSlotElementwise);
      bv = reorder_.Plain(Cpu(b), stream_, kSlotSecond);
    }));
    cpu::Multiply(av, bv, Data(y), a.size());
    Cpu(y).set_layout(Layout::kPlain);
    return absl::OkStatus();
  }

  // Pooling runs on the physical layout: a blocked tensor is an NHWC tensor
  // of N*C/b images with b channels, and pooling treats channels alike.
  absl::Status MaxPool2x2(const DeviceTensor& x, DeviceTensor* y) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantRank("MaxPool2x2", "x", x, 4));
    PSC_RETURN_IF_ERROR(WantShape(
        "MaxPool2x2", "y", *y, {x.shape()[0], x.shape()[1] / 2, x.shape()[2] / 2, x.shape()[3]}));
    const Shape phys = Cpu(x).PhysicalNhwc();
    const int64_t n = phys[0], h = phys[1], w = phys[2], c = phys[3];
    const int64_t oh = h / 2, ow = w / 2;
    const float* xv = Data(x);
    float* yv = Data(y);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          const float* p00 = xv + ((b * h + 2 * i) * w + 2 * j) * c;
          const float* p01 = p00 + c;
          const float* p10 = p00 + w * c;
          const float* p11 = p10 + c;
          float* out = yv + ((b * oh + i) * ow + j) * c;
          for (int64_t ch = 0; ch < c; ++ch) {
            out[ch] = std::max(std::max(p00[ch], p01[ch]), std::max(p10[ch], p11[ch]));
          }
        }
      }
    }
    Cpu(y).set_layout(Cpu(x).layout());
    return absl::OkStatus();
  }

  absl::Status MaxPool2x2Backward(const DeviceTensor& x, const DeviceTensor& dy,
                                  DeviceTensor* dx) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantRank("MaxPool2x2Backward", "x", x, 4));
    PSC_RETURN_IF_ERROR(
        WantShape("MaxPool2x2Backward", "dy", dy,
                  {x.shape()[0], x.shape()[1] / 2, x.shape()[2] / 2, x.shape()[3]}));
    PSC_RETURN_IF_ERROR(WantShape("MaxPool2x2Backward", "dx", *dx, x.shape()));
    const CpuTensor& xt = Cpu(x);
    const float* dyv = Data(dy);
    if (Cpu(dy).layout() != xt.layout()) {
      PSC_RETURN_IF_ERROR(OneDnn("MaxPool2x2Backward", [&] {
        dyv = static_cast<const float*>(
            reorder_.As(Cpu(dy), DescFor(dy.shape(), xt.layout()), stream_, kSlotElementwise)
                .get_data_handle());
      }));
    }
    const Shape phys = xt.PhysicalNhwc();
    const int64_t n = phys[0], h = phys[1], w = phys[2], c = phys[3];
    const int64_t oh = h / 2, ow = w / 2;
    const float* xv = xt.data();
    float* dxv = Data(dx);
    // One pass: every window writes all four of its elements (dy at its
    // maximum, 0 elsewhere); only the row and column the floor cuts off are
    // zeroed apart.
    if (h % 2 != 0 || w % 2 != 0) std::memset(dxv, 0, x.size() * sizeof(float));
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t base = ((b * h + 2 * i) * w + 2 * j) * c;
          const float* x00 = xv + base;
          const float* x01 = x00 + c;
          const float* x10 = x00 + w * c;
          const float* x11 = x10 + c;
          float* d00 = dxv + base;
          float* d01 = d00 + c;
          float* d10 = d00 + w * c;
          float* d11 = d10 + c;
          const float* g = dyv + ((b * oh + i) * ow + j) * c;
#pragma omp simd
          for (int64_t ch = 0; ch < c; ++ch) {
            // The first maximum in row-major window order wins ties.
            const float a = x00[ch], bb = x01[ch], cc = x10[ch], dd = x11[ch];
            const bool first = a >= bb && a >= cc && a >= dd;
            const bool second = !first && bb >= cc && bb >= dd;
            const bool third = !first && !second && cc >= dd;
            const bool fourth = !first && !second && !third;
            d00[ch] = first ? g[ch] : 0.0f;
            d01[ch] = second ? g[ch] : 0.0f;
            d10[ch] = third ? g[ch] : 0.0f;
            d11[ch] = fourth ? g[ch] : 0.0f;
          }
        }
      }
    }
    Cpu(dx).set_layout(xt.layout());
    return absl::OkStatus();
  }

  absl::Status Dense(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& b, bool relu,
                     DeviceTensor* y) override {
    UseThreads();
    constexpr const char* kOp = "Dense";
    int64_t n = 0, k = 0, m = 0;
    PSC_RETURN_IF_ERROR(DenseDims(kOp, x, w, &n, &k, &m));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "b", b, {m}));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "y", *y, {n, m}));
    return OneDnn(kOp, [&] {
      DensePrims& p = DenseFor(n, k, m, relu);
      memory src(p.src, engine_, const_cast<float*>(reorder_.Plain(Cpu(x), stream_, kSlotDense)));
      memory weights(p.weights, engine_, const_cast<float*>(Data(w)));
      memory bias(p.bias, engine_, const_cast<float*>(Data(b)));
      memory dst(p.dst, engine_, Data(y));
      p.fwd.execute(stream_, {{DNNL_ARG_SRC, src},
                              {DNNL_ARG_WEIGHTS, weights},
                              {DNNL_ARG_BIAS, bias},
                              {DNNL_ARG_DST, dst},
                              {DNNL_ARG_SCRATCHPAD, Scratch(p.fwd_scratch)}});
    });
  }

  absl::Status DenseBackwardData(const DeviceTensor& dy, const DeviceTensor& w,
                                 DeviceTensor* dx) override {
    UseThreads();
    constexpr const char* kOp = "DenseBackwardData";
    int64_t n = 0, k = 0, m = 0;
    PSC_RETURN_IF_ERROR(DenseDims(kOp, *dx, w, &n, &k, &m));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, {n, m}));
    return OneDnn(kOp, [&] {
      DensePrims& p = DenseFor(n, k, m, false);
      memory diff_dst(p.dst, engine_, const_cast<float*>(Data(dy)));
      memory weights(p.weights, engine_, const_cast<float*>(Data(w)));
      memory diff_src(p.src, engine_, Data(dx));
      p.bwd_data.execute(stream_, {{DNNL_ARG_DIFF_DST, diff_dst},
                                   {DNNL_ARG_WEIGHTS, weights},
                                   {DNNL_ARG_DIFF_SRC, diff_src},
                                   {DNNL_ARG_SCRATCHPAD, Scratch(p.bwd_data_scratch)}});
      Cpu(dx).set_layout(Layout::kPlain);
    });
  }

  absl::Status DenseBackwardWeights(const DeviceTensor& x, const DeviceTensor& dy, DeviceTensor* dw,
                                    DeviceTensor* db) override {
    UseThreads();
    constexpr const char* kOp = "DenseBackwardWeights";
    int64_t n = 0, k = 0, m = 0;
    PSC_RETURN_IF_ERROR(DenseDims(kOp, x, *dw, &n, &k, &m));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "dy", dy, {n, m}));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "db", *db, {m}));
    return OneDnn(kOp, [&] {
      DensePrims& p = DenseFor(n, k, m, false);
      memory src(p.src, engine_, const_cast<float*>(reorder_.Plain(Cpu(x), stream_, kSlotDense)));
      memory diff_dst(p.dst, engine_, const_cast<float*>(Data(dy)));
      memory diff_weights(p.weights, engine_, Data(dw));
      memory diff_bias(p.bias, engine_, Data(db));
      p.bwd_weights.execute(stream_, {{DNNL_ARG_SRC, src},
                                      {DNNL_ARG_DIFF_DST, diff_dst},
                                      {DNNL_ARG_DIFF_WEIGHTS, diff_weights},
                                      {DNNL_ARG_DIFF_BIAS, diff_bias},
                                      {DNNL_ARG_SCRATCHPAD, Scratch(p.bwd_weights_scratch)}});
    });
  }

  absl::Status SoftmaxCrossEntropy(const DeviceTensor& logits, absl::Span<const int32_t> labels,
                                   float grad_scale, DeviceTensor* dlogits, double* loss_sum,
                                   int64_t* correct) override {
    constexpr const char* kOp = "SoftmaxCrossEntropy";
    PSC_RETURN_IF_ERROR(WantRank(kOp, "logits", logits, 2));
    PSC_RETURN_IF_ERROR(WantShape(kOp, "dlogits", *dlogits, logits.shape()));
    const int64_t n = logits.shape()[0], m = logits.shape()[1];
    if (static_cast<int64_t>(labels.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": ", labels.size(), " labels for ", n, " examples"));
    }
    for (int64_t i = 0; i < n; ++i) {
      if (labels[i] < 0 || labels[i] >= m) {
        return absl::InvalidArgumentError(absl::StrCat(kOp, ": label ", labels[i], " of example ",
                                                       i, " out of range [0, ", m, ")"));
      }
    }
    const float* z = Data(logits);
    float* g = Data(dlogits);
    double loss = 0;
    int64_t right = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* zi = z + i * m;
      float* gi = g + i * m;
      int64_t argmax = 0;
      for (int64_t j = 1; j < m; ++j) {
        if (zi[j] > zi[argmax]) argmax = j;
      }
      const float top = zi[argmax];
      double sum = 0;
      for (int64_t j = 0; j < m; ++j) sum += std::exp(static_cast<double>(zi[j] - top));
      const double log_sum = std::log(sum);
      loss += log_sum - static_cast<double>(zi[labels[i]] - top);
      for (int64_t j = 0; j < m; ++j) {
        const double p = std::exp(static_cast<double>(zi[j] - top) - log_sum);
        gi[j] = static_cast<float>((p - (j == labels[i] ? 1.0 : 0.0)) * grad_scale);
      }
      right += argmax == labels[i];
    }
    *loss_sum = loss;
    *correct = right;
    return absl::OkStatus();
  }

 private:
  absl::Status DenseDims(const char* op, const DeviceTensor& x, const DeviceTensor& w, int64_t* n,
                         int64_t* k, int64_t* m) {
    if (x.shape().size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": input has shape ", ShapeText(x.shape()),
                                                     ", want [N,K] or [N,H,W,C]"));
    }
    PSC_RETURN_IF_ERROR(WantRank(op, "w", w, 2));
    *n = x.shape()[0];
    *k = x.size() / std::max<int64_t>(*n, 1);
    *m = w.shape()[1];
    if (w.shape()[0] != *k) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": kernel ", ShapeText(w.shape()), " does not take ", *k, " inputs"));
    }
    return absl::OkStatus();
  }

  ConvPrimitives& Conv(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, bool relu) {
    auto key = std::make_tuple(n, h, w, c, k, relu);
    auto it = convs_.find(key);
    if (it != convs_.end()) return it->second;
    return convs_.emplace(key, ConvPrimitives::Create(engine_, n, h, w, c, k, relu, conv_))
        .first->second;
  }

  DensePrims& DenseFor(int64_t n, int64_t k, int64_t m, bool relu) {
    auto key = std::make_tuple(n, k, m, relu);
    auto it = denses_.find(key);
    if (it != denses_.end()) return it->second;
    DensePrims p;
    p.src = memory::desc({n, k}, dt::f32, tag::nc);
    p.weights = memory::desc({m, k}, dt::f32, tag::io);  // Keras (in, out)
    p.bias = memory::desc({m}, dt::f32, tag::x);
    p.dst = memory::desc({n, m}, dt::f32, tag::nc);
    dnnl::inner_product_forward::desc fwd_desc(dnnl::prop_kind::forward_training, p.src, p.weights,
                                               p.bias, p.dst);
    p.fwd_pd =
        dnnl::inner_product_forward::primitive_desc(fwd_desc, cpu::PrimitiveAttr(relu), engine_);
    p.fwd = dnnl::inner_product_forward(p.fwd_pd);
    p.fwd_scratch = p.fwd_pd.scratchpad_desc();
    dnnl::inner_product_backward_data::desc bwd_data_desc(p.src, p.weights, p.dst);
    dnnl::inner_product_backward_data::primitive_desc bwd_data_pd(
        bwd_data_desc, cpu::PrimitiveAttr(false), engine_, p.fwd_pd);
    p.bwd_data = dnnl::inner_product_backward_data(bwd_data_pd);
    p.bwd_data_scratch = bwd_data_pd.scratchpad_desc();
    dnnl::inner_product_backward_weights::desc bwd_w_desc(p.src, p.weights, p.bias, p.dst);
    dnnl::inner_product_backward_weights::primitive_desc bwd_w_pd(
        bwd_w_desc, cpu::PrimitiveAttr(false), engine_, p.fwd_pd);
    p.bwd_weights = dnnl::inner_product_backward_weights(bwd_w_pd);
    p.bwd_weights_scratch = bwd_w_pd.scratchpad_desc();
    return denses_.emplace(key, std::move(p)).first->second;
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

  // OpenMP's thread count is a per-thread setting: apply ours in whichever
  // thread runs the op (a worker computes on a thread of its own).
  void UseThreads() const {
    if (threads_ > 0 && omp_get_max_threads() != threads_) omp_set_num_threads(threads_);
  }

  // Reorderer slots (cpu_tensor.h): one per input an op may convert.
  static constexpr int kSlotConvSrc = 0, kSlotConvDiffDst = 1, kSlotElementwise = 2, kSlotDense = 3,
                       kSlotSecond = 4;

  const int threads_;  // 0 = OpenMP's default (all cores)
  const ConvAlgorithm conv_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  Reorderer reorder_;
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> scratch_;
  size_t scratch_bytes_ = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool>, ConvPrimitives> convs_;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, DensePrims> denses_;
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
    return std::unique_ptr<ComputeBackend>(std::make_unique<CpuBackend>(threads, options.conv));
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
