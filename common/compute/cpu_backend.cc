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
#include "dnnl.hpp"

namespace psc {
namespace compute {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// Host memory, 64-byte aligned, zero-filled.
class CpuTensor : public DeviceTensor {
 public:
  explicit CpuTensor(Shape shape) : DeviceTensor(std::move(shape)) {
    const size_t bytes = ((std::max<int64_t>(size(), 1) * sizeof(float) + 63) / 64) * 64;
    data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (data_ != nullptr) std::memset(data_, 0, bytes);
  }
  ~CpuTensor() override { std::free(data_); }
  bool ok() const { return data_ != nullptr; }
  float* data() { return data_; }
  const float* data() const { return data_; }

 private:
  float* data_ = nullptr;
};

const float* Data(const DeviceTensor& t) { return static_cast<const CpuTensor&>(t).data(); }
float* Data(DeviceTensor* t) { return static_cast<CpuTensor*>(t)->data(); }

// The cached primitives of one conv shape.
struct ConvPrims {
  memory::desc src, dst, user_weights, bias;
  memory fwd_scratch, bwd_data_scratch, bwd_weights_scratch;  // allocated once
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  memory fwd_weights;  // oneDNN's layout, reordered into per call
  dnnl::reorder to_fwd_weights;
  bool fwd_reorder = false;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_data bwd_data;
  memory bwd_data_weights;
  dnnl::reorder to_bwd_data_weights;
  bool bwd_data_reorder = false;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_backward_weights bwd_weights;
  memory diff_weights;  // oneDNN's layout, reordered out of per call
  dnnl::reorder from_diff_weights;
  bool bwd_weights_reorder = false;
};

struct DensePrims {
  memory fwd_scratch, bwd_data_scratch, bwd_weights_scratch;  // allocated once
  dnnl::inner_product_forward::primitive_desc fwd_pd;
  dnnl::inner_product_forward fwd;
  dnnl::inner_product_backward_data bwd_data;
  dnnl::inner_product_backward_weights bwd_weights;
  memory::desc src, weights, bias, dst;
};

class CpuBackend : public ComputeBackend {
 public:
  explicit CpuBackend(int threads)
      : threads_(threads), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  std::string name() const override { return "cpu:onednn"; }

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
        return spec.input.size() == 4;
      default:
        return !spec.input.empty();
    }
  }

  absl::StatusOr<std::unique_ptr<DeviceTensor>> Allocate(const Shape& shape) override {
    if (ShapeSize(shape) < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Allocate: bad shape ", ShapeText(shape)));
    }
    auto t = std::make_unique<CpuTensor>(shape);
    if (!t->ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("Allocate: out of host memory for ", ShapeText(shape)));
    }
    return std::unique_ptr<DeviceTensor>(std::move(t));
  }

  absl::Status CopyFromHost(absl::Span<const float> src, DeviceTensor* dst) override {
    if (static_cast<int64_t>(src.size()) != dst->size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CopyFromHost: ", src.size(), " floats for shape ", ShapeText(dst->shape())));
    }
    std::memcpy(Data(dst), src.data(), src.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status CopyToHost(const DeviceTensor& src, absl::Span<float> dst) override {
    if (static_cast<int64_t>(dst.size()) != src.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("CopyToHost: ", dst.size(), " floats for shape ", ShapeText(src.shape())));
    }
    std::memcpy(dst.data(), Data(src), dst.size() * sizeof(float));
    return absl::OkStatus();
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
      ConvPrims& p = Conv(n, h, wd, c, k, relu);
      memory src(p.src, engine_, const_cast<float*>(Data(x)));
      memory user_w(p.user_weights, engine_, const_cast<float*>(Data(w)));
      memory bias(p.bias, engine_, const_cast<float*>(Data(b)));
      memory dst(p.dst, engine_, Data(y));
      memory weights = user_w;
      if (p.fwd_reorder) {
        p.to_fwd_weights.execute(stream_, user_w, p.fwd_weights);
        weights = p.fwd_weights;
      }
      p.fwd.execute(stream_, {{DNNL_ARG_SRC, src},
                              {DNNL_ARG_WEIGHTS, weights},
                              {DNNL_ARG_BIAS, bias},
                              {DNNL_ARG_DST, dst},
                              {DNNL_ARG_SCRATCHPAD, p.fwd_scratch}});
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
      ConvPrims& p = Conv(n, h, wd, c, k, /*relu=*/false);
      memory diff_dst(p.dst, engine_, const_cast<float*>(Data(dy)));
      memory user_w(p.user_weights, engine_, const_cast<float*>(Data(w)));
      memory diff_src(p.src, engine_, Data(dx));
      memory weights = user_w;
      if (p.bwd_data_reorder) {
        p.to_bwd_data_weights.execute(stream_, user_w, p.bwd_data_weights);
        weights = p.bwd_data_weights;
      }
      p.bwd_data.execute(stream_, {{DNNL_ARG_DIFF_DST, diff_dst},
                                   {DNNL_ARG_WEIGHTS, weights},
                                   {DNNL_ARG_DIFF_SRC, diff_src},
                                   {DNNL_ARG_SCRATCHPAD, p.bwd_data_scratch}});
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
      ConvPrims& p = Conv(n, h, wd, c, k, /*relu=*/false);
      memory src(p.src, engine_, const_cast<float*>(Data(x)));
      memory diff_dst(p.dst, engine_, const_cast<float*>(Data(dy)));
      memory user_dw(p.user_weights, engine_, Data(dw));
      memory diff_bias(p.bias, engine_, Data(db));
      memory diff_weights = p.bwd_weights_reorder ? p.diff_weights : user_dw;
      p.bwd_weights.execute(stream_, {{DNNL_ARG_SRC, src},
                                      {DNNL_ARG_DIFF_DST, diff_dst},
                                      {DNNL_ARG_DIFF_WEIGHTS, diff_weights},
                                      {DNNL_ARG_DIFF_BIAS, diff_bias},
                                      {DNNL_ARG_SCRATCHPAD, p.bwd_weights_scratch}});
      if (p.bwd_weights_reorder) p.from_diff_weights.execute(stream_, p.diff_weights, user_dw);
    });
  }

  absl::Status ReluBackward(const DeviceTensor& y, const DeviceTensor& dy,
                            DeviceTensor* dx) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantShape("ReluBackward", "dy", dy, y.shape()));
    PSC_RETURN_IF_ERROR(WantShape("ReluBackward", "dx", *dx, y.shape()));
    const float* __restrict yv = Data(y);
    const int64_t size = y.size();
    if (Data(dx) == Data(dy)) {  // in place: one stream fewer
      float* __restrict d = Data(dx);
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < size; ++i) d[i] = yv[i] > 0.0f ? d[i] : 0.0f;
    } else {
      const float* __restrict dyv = Data(dy);
      float* __restrict dxv = Data(dx);
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < size; ++i) dxv[i] = yv[i] > 0.0f ? dyv[i] : 0.0f;
    }
    return absl::OkStatus();
  }

  absl::Status MaxPool2x2(const DeviceTensor& x, DeviceTensor* y) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantRank("MaxPool2x2", "x", x, 4));
    const int64_t n = x.shape()[0], h = x.shape()[1], w = x.shape()[2], c = x.shape()[3];
    const int64_t oh = h / 2, ow = w / 2;
    PSC_RETURN_IF_ERROR(WantShape("MaxPool2x2", "y", *y, {n, oh, ow, c}));
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
    return absl::OkStatus();
  }

  absl::Status MaxPool2x2Backward(const DeviceTensor& x, const DeviceTensor& dy,
                                  DeviceTensor* dx) override {
    UseThreads();
    PSC_RETURN_IF_ERROR(WantRank("MaxPool2x2Backward", "x", x, 4));
    const int64_t n = x.shape()[0], h = x.shape()[1], w = x.shape()[2], c = x.shape()[3];
    const int64_t oh = h / 2, ow = w / 2;
    PSC_RETURN_IF_ERROR(WantShape("MaxPool2x2Backward", "dy", dy, {n, oh, ow, c}));
    PSC_RETURN_IF_ERROR(WantShape("MaxPool2x2Backward", "dx", *dx, x.shape()));
    const float* xv = Data(x);
    const float* dyv = Data(dy);
    float* dxv = Data(dx);
    std::memset(dxv, 0, x.size() * sizeof(float));
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t base = ((b * h + 2 * i) * w + 2 * j) * c;
          const int64_t offsets[4] = {0, c, w * c, w * c + c};
          const float* g = dyv + ((b * oh + i) * ow + j) * c;
          for (int64_t ch = 0; ch < c; ++ch) {
            int best = 0;
            float best_v = xv[base + ch];
            for (int q = 1; q < 4; ++q) {
              const float v = xv[base + offsets[q] + ch];
              if (v > best_v) {
                best_v = v;
                best = q;
              }
            }
            dxv[base + offsets[best] + ch] = g[ch];
          }
        }
      }
    }
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
      memory src(p.src, engine_, const_cast<float*>(Data(x)));
      memory weights(p.weights, engine_, const_cast<float*>(Data(w)));
      memory bias(p.bias, engine_, const_cast<float*>(Data(b)));
      memory dst(p.dst, engine_, Data(y));
      p.fwd.execute(stream_, {{DNNL_ARG_SRC, src},
                              {DNNL_ARG_WEIGHTS, weights},
                              {DNNL_ARG_BIAS, bias},
                              {DNNL_ARG_DST, dst},
                              {DNNL_ARG_SCRATCHPAD, p.fwd_scratch}});
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
                                   {DNNL_ARG_SCRATCHPAD, p.bwd_data_scratch}});
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
      memory src(p.src, engine_, const_cast<float*>(Data(x)));
      memory diff_dst(p.dst, engine_, const_cast<float*>(Data(dy)));
      memory diff_weights(p.weights, engine_, Data(dw));
      memory diff_bias(p.bias, engine_, Data(db));
      p.bwd_weights.execute(stream_, {{DNNL_ARG_SRC, src},
                                      {DNNL_ARG_DIFF_DST, diff_dst},
                                      {DNNL_ARG_DIFF_WEIGHTS, diff_weights},
                                      {DNNL_ARG_DIFF_BIAS, diff_bias},
                                      {DNNL_ARG_SCRATCHPAD, p.bwd_weights_scratch}});
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

  // Fused ReLU when asked; scratch memory owned by us and allocated once per
  // primitive, never per call (a per-call allocation page-faults every step).
  static dnnl::primitive_attr Attr(bool relu) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    return attr;
  }

  ConvPrims& Conv(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, bool relu) {
    auto key = std::make_tuple(n, h, w, c, k, relu);
    auto it = convs_.find(key);
    if (it != convs_.end()) return it->second;
    ConvPrims p;
    const memory::dims strides = {1, 1}, pad = {1, 1};
    p.src = memory::desc({n, c, h, w}, dt::f32, tag::nhwc);
    p.dst = memory::desc({n, k, h, w}, dt::f32, tag::nhwc);
    p.user_weights = memory::desc({k, c, 3, 3}, dt::f32, tag::hwio);
    p.bias = memory::desc({k}, dt::f32, tag::x);
    const memory::desc any_weights({k, c, 3, 3}, dt::f32, tag::any);
    dnnl::convolution_forward::desc fwd_desc(dnnl::prop_kind::forward_training,
                                             dnnl::algorithm::convolution_direct, p.src,
                                             any_weights, p.bias, p.dst, strides, pad, pad);
    dnnl::primitive_attr attr = Attr(relu);
    p.fwd_pd = dnnl::convolution_forward::primitive_desc(fwd_desc, attr, engine_);
    p.fwd = dnnl::convolution_forward(p.fwd_pd);
    p.fwd_scratch = memory(p.fwd_pd.scratchpad_desc(), engine_);
    if (p.fwd_pd.weights_desc() != p.user_weights) {
      p.fwd_reorder = true;
      p.fwd_weights = memory(p.fwd_pd.weights_desc(), engine_);
      p.to_fwd_weights = dnnl::reorder(memory(p.user_weights, engine_), p.fwd_weights);
    }
    dnnl::convolution_backward_data::desc bwd_data_desc(dnnl::algorithm::convolution_direct, p.src,
                                                        any_weights, p.dst, strides, pad, pad);
    p.bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(bwd_data_desc, Attr(false),
                                                                    engine_, p.fwd_pd);
    p.bwd_data = dnnl::convolution_backward_data(p.bwd_data_pd);
    p.bwd_data_scratch = memory(p.bwd_data_pd.scratchpad_desc(), engine_);
    if (p.bwd_data_pd.weights_desc() != p.user_weights) {
      p.bwd_data_reorder = true;
      p.bwd_data_weights = memory(p.bwd_data_pd.weights_desc(), engine_);
      p.to_bwd_data_weights = dnnl::reorder(memory(p.user_weights, engine_), p.bwd_data_weights);
    }
    dnnl::convolution_backward_weights::desc bwd_w_desc(
        dnnl::algorithm::convolution_direct, p.src, any_weights, p.bias, p.dst, strides, pad, pad);
    p.bwd_weights_pd = dnnl::convolution_backward_weights::primitive_desc(bwd_w_desc, Attr(false),
                                                                          engine_, p.fwd_pd);
    p.bwd_weights = dnnl::convolution_backward_weights(p.bwd_weights_pd);
    p.bwd_weights_scratch = memory(p.bwd_weights_pd.scratchpad_desc(), engine_);
    if (p.bwd_weights_pd.diff_weights_desc() != p.user_weights) {
      p.bwd_weights_reorder = true;
      p.diff_weights = memory(p.bwd_weights_pd.diff_weights_desc(), engine_);
      p.from_diff_weights = dnnl::reorder(p.diff_weights, memory(p.user_weights, engine_));
    }
    return convs_.emplace(key, std::move(p)).first->second;
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
    p.fwd_pd = dnnl::inner_product_forward::primitive_desc(fwd_desc, Attr(relu), engine_);
    p.fwd = dnnl::inner_product_forward(p.fwd_pd);
    p.fwd_scratch = memory(p.fwd_pd.scratchpad_desc(), engine_);
    dnnl::inner_product_backward_data::desc bwd_data_desc(p.src, p.weights, p.dst);
    dnnl::inner_product_backward_data::primitive_desc bwd_data_pd(bwd_data_desc, Attr(false),
                                                                  engine_, p.fwd_pd);
    p.bwd_data = dnnl::inner_product_backward_data(bwd_data_pd);
    p.bwd_data_scratch = memory(bwd_data_pd.scratchpad_desc(), engine_);
    dnnl::inner_product_backward_weights::desc bwd_w_desc(p.src, p.weights, p.bias, p.dst);
    dnnl::inner_product_backward_weights::primitive_desc bwd_w_pd(bwd_w_desc, Attr(false), engine_,
                                                                  p.fwd_pd);
    p.bwd_weights = dnnl::inner_product_backward_weights(bwd_w_pd);
    p.bwd_weights_scratch = memory(bwd_w_pd.scratchpad_desc(), engine_);
    return denses_.emplace(key, std::move(p)).first->second;
  }

  // Runs oneDNN work and waits for it; oneDNN throws, we return INTERNAL
  // naming the op.
  template <typename F>
  absl::Status OneDnn(const char* op, F&& work) {
    try {
      work();
      stream_.wait();
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat(op, ": oneDNN: ", e.what()));
    }
    return absl::OkStatus();
  }

  // OpenMP's thread count is a per-thread setting: apply ours in whichever
  // thread runs the op (a worker computes on a thread of its own).
  void UseThreads() const {
    if (threads_ > 0 && omp_get_max_threads() != threads_) omp_set_num_threads(threads_);
  }

  const int threads_;  // 0 = OpenMP's default (all cores)
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool>, ConvPrims> convs_;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, DensePrims> denses_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCpuBackend(int threads) {
  if (threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("intra-op threads must be >= 0 (0 = all cores), not ", threads));
  }
  if (threads > 0) omp_set_num_threads(threads);
  try {
    return std::unique_ptr<ComputeBackend>(std::make_unique<CpuBackend>(threads));
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN CPU engine: ", e.what()));
  }
}

int CpuBackendThreads() { return omp_get_max_threads(); }

}  // namespace compute
}  // namespace psc
