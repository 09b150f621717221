#include "common/compute/cpu_conv.h"

#include <initializer_list>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compute/cpu_tensor.h"

namespace psc {
namespace compute {

absl::StatusOr<ConvAlgorithm> ParseConvAlgorithm(std::string_view text) {
  if (text == "auto") return ConvAlgorithm::kAuto;
  if (text == "direct") return ConvAlgorithm::kDirect;
  return absl::InvalidArgumentError(absl::StrCat("unknown convolution algorithm \"",
                                                 std::string(text), "\"; expected auto or direct"));
}

const char* ConvAlgorithmName(ConvAlgorithm algorithm) {
  return algorithm == ConvAlgorithm::kDirect ? "direct" : "auto";
}

bool WinogradAvailable() {
  // cpu_isa values are sets of bits, not an order (avx2_vnni's is above
  // avx512_core's).
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (isa & avx512) == avx512;
}

std::string DescribeConvAlgorithm(ConvAlgorithm algorithm) {
  if (algorithm == ConvAlgorithm::kDirect) return "direct convolution on NHWC";
  if (WinogradAvailable()) {
    return "Winograd F(4x4,3x3) where both channel counts are multiples of 16, direct elsewhere";
  }
  return "direct convolution: this CPU has no AVX-512, and oneDNN 2.6 has Winograd kernels only "
         "for AVX-512";
}

namespace cpu {

dnnl::primitive_attr PrimitiveAttr(bool relu) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// One way to run a direction: an algorithm and whether oneDNN picks the
// activation layouts (else plain NHWC).
struct Candidate {
  dnnl::algorithm alg;
  bool blocked;
};

struct Descs {
  Shape x_shape, y_shape;
  memory::desc src, dst, weights, diff_weights, bias;
  memory::dims strides, dilates, pad_l, pad_r;
};

// A kernel's dimensions as oneDNN orders them: [K, C, KH, KW], or with
// groups [G, K / G, C / G, KH, KW].
memory::dims WeightDims(const ConvKey& key) {
  const Window& win = key.window;
  if (win.groups == 1) return {key.k, key.c, win.height, win.width};
  return {win.groups, key.k / win.groups, key.c / win.groups, win.height, win.width};
}

Descs DescsFor(const ConvKey& key, bool blocked) {
  const int64_t n = key.n, c = key.c, k = key.k;
  const WindowExtent rows = key.window.Rows(key.h), cols = key.window.Cols(key.w);
  Descs d;
  d.x_shape = {n, key.h, key.w, c};
  d.y_shape = {n, rows.out, cols.out, k};
  d.strides = {key.window.stride_h, key.window.stride_w};
  d.dilates = {key.window.dilation_h - 1, key.window.dilation_w - 1};  // oneDNN's 0 is none
  d.pad_l = {rows.before, cols.before};
  d.pad_r = {rows.after, cols.after};
  const int64_t h = key.h, w = key.w, oh = rows.out, ow = cols.out;
  const dt type = OneDnnType(key.dtype);
  // With `blocked`, oneDNN picks the source layout and the output is blocked
  // by 16 where 16 divides K (oneDNN's own choice for a 1-channel input is
  // NHWC, which the Winograd layer after it would have to reorder); checked
  // below against what cpu_tensor.h can hold.
  d.src = blocked ? memory::desc({n, c, h, w}, type, tag::any)
                  : DescFor(d.x_shape, Layout::kPlain, key.dtype);
  d.dst = !blocked      ? DescFor(d.y_shape, Layout::kPlain, key.dtype)
          : k % 16 == 0 ? DescFor(d.y_shape, Layout::kBlocked16, key.dtype)
                        : memory::desc({n, k, oh, ow}, type, tag::any);
  d.weights = memory::desc(WeightDims(key), type, tag::any);
  // The weight gradient in float32 whatever the activations' dtype.
  d.diff_weights = memory::desc(WeightDims(key), dt::f32, tag::any);
  // No bias: a zero descriptor, which oneDNN reads as "none".
  d.bias = key.bias ? memory::desc({k}, dt::f32, tag::x) : memory::desc();
  return d;
}

// Throws unless the primitive is a JIT kernel (never oneDNN's reference
// loops) and its activations are in layouts cpu_tensor.h can hold.
void Check(const char* impl, std::initializer_list<std::pair<Shape, memory::desc>> acts) {
  if (std::string_view(impl).substr(0, 3) == "ref") {
    throw dnnl::error(dnnl_unimplemented, "only oneDNN's reference kernel");
  }
  for (const auto& [shape, desc] : acts) {
    if (!LayoutOf(shape, desc).has_value()) {
      throw dnnl::error(dnnl_unimplemented, "activation layout the CPU backend cannot hold");
    }
  }
}

// oneDNN's 1x1 JIT convolutions (jit_1x1:avx2, jit_1x1:avx512_core) book
// too little "reduce to unit stride" workspace for a strided 1x1
// convolution over an NHWC source with fewer channels than their block
// (uxlfoundation/oneDNN#6035, open; in Debian's 2.6.3 too): per thread for
// the channels, while they write the whole block, so threads overwrite each
// other's and the last writes past the scratchpad (found here as a heap
// corruption on an AVX2 CPU, 8-channel blocks; AVX-512's are 16). Such a
// primitive takes oneDNN's next implementation instead.
template <typename PrimitiveDesc>
void AvoidRtusOverflow(const ConvKey& key, PrimitiveDesc* pd) {
  const Window& w = key.window;
  if (w.height != 1 || w.width != 1 || (w.stride_h == 1 && w.stride_w == 1) ||
      key.c / w.groups >= 16) {
    return;
  }
  while (std::string_view(pd->impl_info_str()).substr(0, 7) == "jit_1x1") {
    if (!pd->next_impl()) {
      throw dnnl::error(dnnl_unimplemented, "only oneDNN's 1x1 kernel, which overflows here");
    }
  }
}

// The forward primitive of `key` (also the backward ones' hint), past the
// 1x1 kernels AvoidRtusOverflow avoids: next_impl reads the op descriptor,
// so it runs here, where `desc` lives.
dnnl::convolution_forward::primitive_desc Forward(const dnnl::engine& engine, const ConvKey& key,
                                                  const Descs& d, Candidate cand, bool relu) {
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, cand.alg, d.src,
                                       d.weights, d.bias, d.dst, d.strides, d.dilates, d.pad_l,
                                       d.pad_r);
  dnnl::convolution_forward::primitive_desc pd(desc, PrimitiveAttr(relu), engine);
  AvoidRtusOverflow(key, &pd);
  return pd;
}

}  // namespace

bool ConvKey::operator<(const ConvKey& o) const {
  return std::tie(n, h, w, c, k, window, bias, relu, dtype) <
         std::tie(o.n, o.h, o.w, o.c, o.k, o.window, o.bias, o.relu, o.dtype);
}

ConvPrimitives ConvPrimitives::Create(const dnnl::engine& engine, const ConvKey& key,
                                      ConvAlgorithm algorithm) {
  const int64_t c = key.c, k = key.k;
  const dnnl::algorithm direct = dnnl::algorithm::convolution_direct;
  const dnnl::algorithm winograd = dnnl::algorithm::convolution_winograd;
  // The rule (cpu_conv.h), then fallbacks: each direction takes the first
  // candidate oneDNN has a JIT kernel for; the last always exists.
  std::vector<Candidate> order;
  if (algorithm == ConvAlgorithm::kAuto) {
    if (c % 16 == 0 && k % 16 == 0 && key.window == kConv3x3Same && key.dtype == DType::kFloat32) {
      order.push_back({winograd, true});
    }
    order.push_back({direct, true});
  }
  order.push_back({direct, false});
  auto first = [&](auto make) {
    for (size_t i = 0;; ++i) {
      try {
        return make(order[i]);
      } catch (const dnnl::error&) {
        if (i + 1 == order.size()) throw;
      }
    }
  };

  ConvPrimitives p;
  // Keras's [KH, KW, C / G, K] with K = G x (K / G): HWIO, or HWIGO grouped.
  p.user_weights =
      memory::desc(WeightDims(key), dt::f32, key.window.groups == 1 ? tag::hwio : tag::hwigo);
  p.bias = key.bias ? memory::desc({k}, dt::f32, tag::x) : memory::desc();
  const bool relu = key.relu;
  Candidate fwd_cand{}, data_cand{}, weights_cand{};
  p.fwd_pd = first([&](Candidate cand) {
    const Descs d = DescsFor(key, cand.blocked);
    auto pd = Forward(engine, key, d, cand, relu);
    // The last candidate is today's plain path whatever kernel it gets.
    if (cand.blocked) {
      Check(pd.impl_info_str(), {{d.x_shape, pd.src_desc()}, {d.y_shape, pd.dst_desc()}});
    }
    fwd_cand = cand;
    return pd;
  });
  p.bwd_data_pd = first([&](Candidate cand) {
    const Descs d = DescsFor(key, cand.blocked);
    dnnl::convolution_backward_data::desc desc(cand.alg, d.src, d.weights, d.dst, d.strides,
                                               d.dilates, d.pad_l, d.pad_r);
    // The hint outlives the iterator (next_impl reads it).
    const auto hint = Forward(engine, key, d, cand, false);
    dnnl::convolution_backward_data::primitive_desc pd(desc, PrimitiveAttr(false), engine, hint);
    AvoidRtusOverflow(key, &pd);
    if (cand.blocked) {
      Check(pd.impl_info_str(), {{d.x_shape, pd.diff_src_desc()}, {d.y_shape, pd.diff_dst_desc()}});
    }
    data_cand = cand;
    return pd;
  });
  p.bwd_weights_pd = first([&](Candidate cand) {
    const Descs d = DescsFor(key, cand.blocked);
    dnnl::convolution_backward_weights::desc desc(cand.alg, d.src, d.diff_weights, d.bias, d.dst,
                                                  d.strides, d.dilates, d.pad_l, d.pad_r);
    const auto hint = Forward(engine, key, d, cand, false);
    dnnl::convolution_backward_weights::primitive_desc pd(desc, PrimitiveAttr(false), engine, hint);
    AvoidRtusOverflow(key, &pd);
    if (cand.blocked) {
      Check(pd.impl_info_str(), {{d.x_shape, pd.src_desc()}, {d.y_shape, pd.diff_dst_desc()}});
    }
    weights_cand = cand;
    return pd;
  });
  p.fwd = dnnl::convolution_forward(p.fwd_pd);
  p.fwd_scratch = p.fwd_pd.scratchpad_desc();
  p.fwd_weights = memory(p.fwd_pd.weights_desc(), engine);
  p.bwd_data = dnnl::convolution_backward_data(p.bwd_data_pd);
  p.bwd_data_scratch = p.bwd_data_pd.scratchpad_desc();
  p.bwd_data_weights = memory(p.bwd_data_pd.weights_desc(), engine);
  p.bwd_weights = dnnl::convolution_backward_weights(p.bwd_weights_pd);
  p.bwd_weights_scratch = p.bwd_weights_pd.scratchpad_desc();
  p.diff_weights = memory(p.bwd_weights_pd.diff_weights_desc(), engine);
  auto name = [](Candidate cand) { return cand.alg == winograd ? "winograd" : "direct"; };
  p.winograd = fwd_cand.alg == winograd;
  p.algorithms = absl::StrCat(name(fwd_cand), " / ", name(data_cand), " / ", name(weights_cand));
  p.impl = absl::StrCat(p.fwd_pd.impl_info_str(), " / ", p.bwd_data_pd.impl_info_str(), " / ",
                        p.bwd_weights_pd.impl_info_str());
  return p;
}

}  // namespace cpu
}  // namespace compute
}  // namespace psc
