#include "common/compute/layer_graph.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/checked_size.h"
#include "common/base/status_macros.h"
#include "common/compute/embedding_ops.h"

namespace psc {
namespace compute {
namespace {

// The largest one tensor may be (per example): what a push or a checkpoint
// carries.
constexpr int64_t kMaxElements = static_cast<int64_t>(base::kMaxTensorBytes / sizeof(float));
// A window dimension or stride may not exceed this.
constexpr int64_t kMaxWindow = int64_t{1} << 20;
// The most rows a table may have: its ids travel as float32 (embedding_ops.h).
constexpr int64_t kMaxEmbeddingRows = embedding::kMaxRows;

std::string Tuple(const Shape& shape) {
  return shape.size() == 1 ? absl::StrCat("(", shape[0], ",)")
                           : absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

absl::Status Invalid(absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, why));
}

// The window layers, which also take a (steps, channels) sequence.
bool TakesSteps(LayerSpec::Kind kind) {
  return kind == LayerSpec::kConv || kind == LayerSpec::kPool || kind == LayerSpec::kGlobalPool ||
         kind == LayerSpec::kZeroPad || kind == LayerSpec::kCrop;
}

}  // namespace

absl::StatusOr<Shape> ConvTransposeExtent(const LayerSpec& l, const Shape& in) {
  const Window& win = l.window;
  if (l.pads.empty()) return Shape{win.TransposedRows(in[0]), win.TransposedCols(in[1])};
  if (l.pads.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("output_padding ", Tuple(l.pads), " is not (rows, columns)"));
  }
  // Each term is below 2^20 x 2^40 (the graph checks the window and the
  // input before), so none overflows.
  const auto along = [&](int64_t n, int64_t span, int64_t stride, int64_t padding) {
    const int64_t pad = win.padding == Padding::kSame ? span / 2 : 0;
    return (n - 1) * stride + span - 2 * pad + padding;
  };
  const Shape out = {along(in[0], win.SpanRows(), win.stride_h, l.pads[0]),
                     along(in[1], win.SpanCols(), win.stride_w, l.pads[1])};
  if (out[0] < 1 || out[1] < 1 || out[0] > kMaxElements || out[1] > kMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrCat("output_padding ", Tuple(l.pads), " makes an output of ", Tuple(out)));
  }
  return out;
}

absl::StatusOr<DotGeometry> DotOf(const LayerSpec& l, const Shape& a, const Shape& b) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("Dot of ", Tuple(a), " and ", Tuple(b),
                                                   " over axes (", absl::StrJoin(l.dot_axes, ", "),
                                                   ") (counted from 0 after the batch): ", why));
  };
  if (l.dot_axes.size() != 2) return bad("two axes, one per input, are needed");
  if (a.size() != b.size() || a.size() < 1 || a.size() > 3) {
    return bad("its inputs must be both (K,) or both of rank 2 (or of rank 3: attention's heads)");
  }
  const int rank = static_cast<int>(a.size());
  // Rank 3: a product per index of the first axis (MultiHeadAttention's
  // heads), over the last two.
  const int lead = rank == 3 ? 1 : 0;
  if (lead == 1 && (a[0] != b[0] || l.dot_normalize)) {
    return bad("rank-3 inputs need the same first axis, and no normalize");
  }
  const int ax = l.dot_axes[0], bx = l.dot_axes[1];
  if (ax < lead || ax >= rank || bx < lead || bx >= rank) return bad("an axis out of range");
  if (a[ax] != b[bx]) return bad("the summed axes differ in size");
  DotGeometry g;
  g.k = a[ax];
  g.normalize = l.dot_normalize;
  if (rank >= 2) {
    g.m = a[2 * lead + 1 - ax];
    g.n = b[2 * lead + 1 - bx];
    g.transpose_a = ax == lead;      // a stored [K,M]
    g.transpose_b = bx == lead + 1;  // b stored [N,K]
  }
  return g;
}

std::string TensorTypeText(const TensorType& t) {
  return absl::StrCat(Tuple(t.shape), " ", DTypeName(t.dtype));
}

absl::StatusOr<TensorType> InferOutput(const LayerSpec& l, absl::Span<const TensorType> inputs,
                                       absl::string_view what) {
  const bool merge = IsMergeKind(l.kind);
  const bool masked_sources = l.kind == LayerSpec::kMaskRows || l.kind == LayerSpec::kMaskedMean;
  const size_t want = l.kind == LayerSpec::kDot || masked_sources ? 2 : 1;
  const size_t masks = l.query_mask + l.value_mask;
  const bool mask =
      (l.kind == LayerSpec::kMask && (inputs.size() == 1 + masks || inputs.size() == 2 + masks)) ||
      (IsRecurrentKind(l.kind) && (inputs.size() == 1 || inputs.size() == 2));
  if (!mask && (merge ? inputs.size() < 2 : inputs.size() != want)) {
    return Invalid(what, absl::StrCat(" takes ", inputs.size(), " inputs; it needs ",
                                      merge       ? "two or more"
                                      : want == 2 ? "two"
                                                  : "one"));
  }
  if ((l.kind == LayerSpec::kSubtract || l.kind == LayerSpec::kMaximum ||
       l.kind == LayerSpec::kMinimum) &&
      inputs.size() != 2) {
    return Invalid(what, absl::StrCat(" merges ", inputs.size(), " inputs; it takes two"));
  }
  for (const TensorType& in : inputs) {
    if (!IsActivationFloat(in.dtype)) {
      return Invalid(what, absl::StrCat(" gets a ", TensorTypeText(in),
                                        " input; it needs float32, bfloat16 or float16"));
    }
  }
  // A window layer on a (steps, channels) sequence runs on it as on a
  // (1, steps, channels) image (Conv1D, MaxPooling1D, ...), which is how
  // the executor holds it (LayerGraph::BatchShape), and makes a sequence.
  const bool steps = inputs[0].shape.size() == 2 && TakesSteps(l.kind);
  const Shape in = steps ? Shape{1, inputs[0].shape[0], inputs[0].shape[1]} : inputs[0].shape;
  // In its policy's compute dtype (LayerSpec::compute).
  TensorType out{IsActivationFloat(l.compute) ? l.compute : DType::kFloat32, in};
  auto need_spatial = [&]() -> absl::Status {
    if (in.size() == 3) return absl::OkStatus();
    return Invalid(what, absl::StrCat(" needs a (height, width, channels)",
                                      TakesSteps(l.kind) ? " or (steps, channels)" : "",
                                      " input; it gets ", Tuple(in)));
  };
  switch (l.kind) {
    case LayerSpec::kActivation:
      if (!l.activation) return Invalid(what, ": no activation");
      break;
    case LayerSpec::kDropout:
      if (!(l.rate > 0 && l.rate < 1)) {
        return Invalid(what, absl::StrCat(": dropout rate ", l.rate, " is not in (0, 1)"));
      }
      break;
    case LayerSpec::kGlobalPool:
      PSC_RETURN_IF_ERROR(need_spatial());
      out.shape = {in[2]};
      break;
    case LayerSpec::kDot: {
      absl::StatusOr<DotGeometry> g = DotOf(l, in, inputs[1].shape);
      if (!g.ok()) return Invalid(what, absl::StrCat(": ", g.status().message()));
      out.shape = in.size() == 1   ? Shape{1}
                  : in.size() == 2 ? Shape{g->m, g->n}
                                   : Shape{in[0], g->m, g->n};
      break;
    }
    case LayerSpec::kEmbedding:
      if (l.inputs < 1 || l.inputs > kMaxEmbeddingRows || l.outputs < 1) {
        return Invalid(what, absl::StrCat(": a table of ", l.inputs, " rows of ", l.outputs,
                                          " values (input_dim in [1, ", kMaxEmbeddingRows,
                                          "], output_dim >= 1)"));
      }
      out.shape.push_back(l.outputs);
      break;
    case LayerSpec::kConv:
    case LayerSpec::kPool: {
      PSC_RETURN_IF_ERROR(need_spatial());
      const Window& win = l.window;
      if (win.height < 1 || win.width < 1 || win.stride_h < 1 || win.stride_w < 1 ||
          win.height > kMaxWindow || win.width > kMaxWindow || win.stride_h > kMaxWindow ||
          win.stride_w > kMaxWindow || win.dilation_h < 1 || win.dilation_w < 1 ||
          win.dilation_h > kMaxWindow || win.dilation_w > kMaxWindow || win.groups < 1) {
        return Invalid(what, absl::StrCat(": window ", win.Text(),
                                          " needs sizes, strides and dilations in [1, ", kMaxWindow,
                                          "] and groups >= 1"));
      }
      if (l.kind == LayerSpec::kPool &&
          (win.dilation_h != 1 || win.dilation_w != 1 || win.groups != 1)) {
        return Invalid(what, ": a pooling window has no dilation or groups");
      }
      const int64_t oh = win.Rows(in[0]).out, ow = win.Cols(in[1]).out;
      if (oh < 1 || ow < 1) {
        return Invalid(
            what, absl::StrCat(": its ", win.height, "x", win.width, " window with padding \"",
                               PaddingName(win.padding), "\" leaves no output of its ", in[0], "x",
                               in[1], " input"));
      }
      int64_t c = in[2];
      if (l.kind == LayerSpec::kConv) {
        if (l.inputs != c || l.outputs < 1) {
          return Invalid(what, absl::StrCat(" takes ", l.inputs, " channels and makes ", l.outputs,
                                            "; its input has ", c));
        }
        if (c % win.groups != 0 || l.outputs % win.groups != 0) {
          return Invalid(
              what, absl::StrCat("'s ", c, " input and ", l.outputs,
                                 " output channels do not split into ", win.groups, " groups"));
        }
        c = l.outputs;
      }
      out.shape = {oh, ow, c};
      break;
    }
    case LayerSpec::kDense: {
      if (!l.target.empty()) {
        // On the last axes: those whose product is `inputs` are contracted
        // (at least the last), the others stay and begin the target.
        size_t d = in.size();
        int64_t tail = 1;
        if (l.axis > 0) {  // the reader's count (an axis of 1 among them is no guess)
          if (static_cast<size_t>(l.axis) > in.size()) {
            return Invalid(what, absl::StrCat(" contracts ", l.axis, " axes of ", Tuple(in)));
          }
          for (int k = 0; k < l.axis; ++k) tail *= in[--d];  // in's sizes: no overflow
        } else {
          do {
            tail *= in[--d];
          } while (d > 0 && tail < l.inputs);
        }
        const Shape kept(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(d));
        bool fits = tail == l.inputs && l.outputs >= 1 && l.target.size() > kept.size() &&
                    std::equal(kept.begin(), kept.end(), l.target.begin());
        if (fits) {
          const Shape made(l.target.begin() + static_cast<std::ptrdiff_t>(d), l.target.end());
          const absl::StatusOr<int64_t> count = base::ElementCount(made, kMaxElements, "output");
          fits = count.ok() && *count == l.outputs;
        }
        if (!fits) {
          return Invalid(what,
                         absl::StrCat(" contracts ", l.inputs, " of its input ", Tuple(in),
                                      "'s last axes to ", l.outputs, " in ", Tuple(l.target)));
        }
        out.shape = Shape(l.target);
        break;
      }
      const int64_t features = ShapeSize(in);  // a spatial input is flattened (HWC order)
      if (l.inputs != features || l.outputs < 1) {
        return Invalid(what, absl::StrCat(" takes ", l.inputs, " features and makes ", l.outputs,
                                          "; its input has ", features));
      }
      out.shape = {l.outputs};
      break;
    }
    case LayerSpec::kBatchNorm: {
      const int64_t c = in.back();
      if (l.inputs != c || l.outputs != c) {
        return Invalid(what,
                       absl::StrCat(" normalizes ", l.inputs, " channels; its input has ", c));
      }
      if (!(l.epsilon > 0) || !std::isfinite(l.epsilon) || !(l.momentum >= 0) ||
          !(l.momentum < 1)) {
        return Invalid(what, absl::StrCat(": epsilon ", l.epsilon, " must be > 0 and momentum ",
                                          l.momentum, " in [0, 1)"));
      }
      break;
    }
    case LayerSpec::kAdd:
    case LayerSpec::kMultiply:
    case LayerSpec::kAverage:
    case LayerSpec::kSubtract:
    case LayerSpec::kMaximum:
    case LayerSpec::kMinimum:
      for (const TensorType& t : inputs) {
        if (t.shape != in) {
          return Invalid(what, absl::StrCat(l.kind == LayerSpec::kAdd ? " adds" : " merges",
                                            " inputs of shapes ", Tuple(in), " and ",
                                            Tuple(t.shape), "; they must be equal"));
        }
      }
      break;
    case LayerSpec::kInput: {
      // Counted with a bound, so no product wraps.
      const absl::StatusOr<int64_t> count =
          base::ElementCount(l.target, ShapeSize(in), "the input");
      if (l.target.empty() || !count.ok() || l.offset < 0 || l.offset > ShapeSize(in) - *count) {
        return Invalid(what, absl::StrCat(" takes ", Tuple(l.target), " from element ", l.offset,
                                          " of the packed inputs ", Tuple(in)));
      }
      out.shape = Shape(l.target);
      break;
    }
    case LayerSpec::kZeroPad:
    case LayerSpec::kCrop: {
      PSC_RETURN_IF_ERROR(need_spatial());
      bool fits = l.pads.size() == 4;
      for (int64_t p : l.pads) fits = fits && p >= 0 && p <= kMaxElements;
      const int sign = l.kind == LayerSpec::kZeroPad ? 1 : -1;
      if (fits) {
        out.shape = {in[0] + sign * (l.pads[0] + l.pads[1]), in[1] + sign * (l.pads[2] + l.pads[3]),
                     in[2]};
        fits = out.shape[0] >= 1 && out.shape[1] >= 1;
      }
      if (!fits) {
        return Invalid(what,
                       absl::StrCat(l.kind == LayerSpec::kZeroPad ? " pads " : " crops ", Tuple(in),
                                    " by ", Tuple(l.pads), " (top, bottom, left, right): ",
                                    l.kind == LayerSpec::kCrop ? "nothing is left" : "bad"));
      }
      break;
    }
    case LayerSpec::kConvTranspose: {
      PSC_RETURN_IF_ERROR(need_spatial());
      const Window& win = l.window;
      const bool fits =
          win.height >= 1 && win.width >= 1 && win.stride_h >= 1 && win.stride_w >= 1 &&
          win.dilation_h >= 1 && win.dilation_w >= 1 && win.height <= kMaxWindow &&
          win.width <= kMaxWindow && win.stride_h <= kMaxWindow && win.stride_w <= kMaxWindow &&
          win.dilation_h <= kMaxWindow && win.dilation_w <= kMaxWindow && win.groups == 1 &&
          in[0] <= kMaxElements / win.stride_h && in[1] <= kMaxElements / win.stride_w;
      if (!fits) {
        return Invalid(what, absl::StrCat(": transposed window ", win.Text(),
                                          " needs sizes, strides and dilations in [1, ", kMaxWindow,
                                          "] and one group"));
      }
      if (l.inputs != in[2] || l.outputs < 1) {
        return Invalid(what, absl::StrCat(" takes ", l.inputs, " channels and makes ", l.outputs,
                                          "; its input has ", in[2]));
      }
      absl::StatusOr<Shape> extent = ConvTransposeExtent(l, in);
      if (!extent.ok()) return Invalid(what, absl::StrCat(": ", extent.status().message()));
      out.shape = {(*extent)[0], (*extent)[1], l.outputs};
      // The window's convolution takes the output back to the input.
      if (win.Rows(out.shape[0]).out != in[0] || win.Cols(out.shape[1]).out != in[1]) {
        return Invalid(
            what, absl::StrCat(": transposed window ", win.Text(), " makes ", Tuple(out.shape),
                               " of ", Tuple(in), ", which its convolution does not take back"));
      }
      break;
    }
    case LayerSpec::kBiasAdd:
      PSC_RETURN_IF_ERROR(need_spatial());
      if (!(l.window == Window{1, 1, 1, 1, Padding::kValid, 1, 1, in[2]})) {
        return Invalid(what, absl::StrCat(": a bias of ", in[2], " channels takes the window ",
                                          Window{1, 1, 1, 1, Padding::kValid, 1, 1, in[2]}.Text(),
                                          ", not ", l.window.Text()));
      }
      break;
    case LayerSpec::kUpSample: {
      PSC_RETURN_IF_ERROR(need_spatial());
      const Window& win = l.window;
      const bool fits = win.height >= 1 && win.width >= 1 && win.height <= kMaxWindow &&
                        win.width <= kMaxWindow && in[0] <= kMaxElements / win.height &&
                        in[1] <= kMaxElements / win.width;
      if (!fits || win.stride_h != win.height || win.stride_w != win.width ||
          win.padding != Padding::kValid || win.groups != in[2] || win.dilation_h != 1 ||
          win.dilation_w != 1) {
        return Invalid(what, absl::StrCat(" repeats ", Tuple(in), " by ", win.Text(),
                                          ": not an upsampling of its input"));
      }
      out.shape = {in[0] * win.height, in[1] * win.width, in[2]};
      break;
    }
    case LayerSpec::kFlatten:
      if (!l.target.empty()) {
        // Counted with a bound (the input's size), so no product wraps.
        const absl::StatusOr<int64_t> count =
            base::ElementCount(l.target, ShapeSize(in), "the target");
        if (!count.ok() || *count != ShapeSize(in)) {
          return Invalid(what, absl::StrCat(" reshapes ", Tuple(in), " (", ShapeSize(in),
                                            " values) to ", Tuple(l.target)));
        }
      }
      out.shape = l.target.empty() ? Shape{ShapeSize(in)} : Shape(l.target);
      break;
    case LayerSpec::kLayerNorm: {
      const int rank = static_cast<int>(in.size());
      if (l.axis < 1 || l.axis > rank || !(l.epsilon > 0) || !std::isfinite(l.epsilon)) {
        return Invalid(what, absl::StrCat(" normalizes the last ", l.axis, " axes of ", Tuple(in),
                                          " with epsilon ", l.epsilon,
                                          ": want 1 to its rank, and epsilon > 0"));
      }
      break;
    }
    case LayerSpec::kPermute: {
      std::vector<bool> seen(in.size(), false);
      bool fits = l.perm.size() == in.size() && in.size() <= 5;
      for (size_t i = 0; fits && i < l.perm.size(); ++i) {
        const int p = l.perm[i];
        fits = p >= 0 && p < static_cast<int>(in.size()) && !seen[p];
        if (fits) {
          seen[p] = true;
          out.shape[i] = in[p];
        }
      }
      if (!fits) {
        return Invalid(what, absl::StrCat(": (", absl::StrJoin(l.perm, ", "),
                                          ") is not a permutation of the axes of ", Tuple(in),
                                          " (counted from 0 after the batch, rank <= 5)"));
      }
      break;
    }
    case LayerSpec::kScale:
      if (!std::isfinite(l.alpha)) return Invalid(what, ": its factor is not finite");
      break;
    case LayerSpec::kLSTM:
    case LayerSpec::kGRU:
    case LayerSpec::kSimpleRNN:
      if (in.size() != 2 || l.inputs != in[1] || l.outputs < 1 || l.outputs > (int64_t{1} << 20)) {
        return Invalid(what, absl::StrCat(" of ", l.outputs, " units takes (steps, ", l.inputs,
                                          ") sequences; it gets ", Tuple(in)));
      }
      if (inputs.size() == 2 && inputs[1].shape != Shape{in[0]}) {
        return Invalid(
            what, absl::StrCat(" gets a mask ", Tuple(inputs[1].shape), "; its steps are ", in[0]));
      }
      out.shape = l.return_sequences ? Shape{in[0], l.outputs} : Shape{l.outputs};
      break;
    case LayerSpec::kSequenceMask: {
      const bool ids = in.size() == 1 && l.inputs == 1;
      if (!ids && (in.size() != 2 || l.inputs != in[1])) {
        return Invalid(what,
                       absl::StrCat(" masks the steps of ", Tuple(in),
                                    ": want ids (steps,) or a (steps, ", l.inputs, ") sequence"));
      }
      out.shape = {in[0]};
      break;
    }
    case LayerSpec::kMaskRows:
    case LayerSpec::kMaskedMean:
      if (in.size() != 2 || inputs[1].shape != Shape{in[0]}) {
        return Invalid(what, absl::StrCat(" takes a (steps, features) sequence and its mask; it "
                                          "gets ",
                                          Tuple(in), " and ", Tuple(inputs[1].shape)));
      }
      if (l.kind == LayerSpec::kMaskedMean) out.shape = {in[1]};
      break;
    case LayerSpec::kMask: {
      const size_t first_mask = inputs.size() - masks;  // the query's, then the value's
      bool fits = in.size() == 3 && (l.causal || inputs.size() >= 2) &&
                  (first_mask == 1 || inputs[1].shape == Shape{in[1], in[2]});
      if (fits && l.query_mask) fits = inputs[first_mask].shape == Shape{in[1]};
      if (fits && l.value_mask) fits = inputs.back().shape == Shape{in[2]};
      if (!fits) {
        return Invalid(
            what, absl::StrCat(" masks scores ", Tuple(in),
                               inputs.size() == 2 ? absl::StrCat(" by ", Tuple(inputs[1].shape))
                                                  : std::string(" (no mask)"),
                               ": want (heads, T, S) scores, a (T, S) mask, and the query's (T,) "
                               "and the value's (S,) masks"));
      }
      break;
    }
    case LayerSpec::kRepeat:
      if (in.size() != 1 || l.outputs < 1) {
        return Invalid(what, absl::StrCat(" repeats ", Tuple(in), " ", l.outputs,
                                          " times: it takes a (features,) input, n >= 1"));
      }
      out.shape = {l.outputs, in[0]};
      break;
    case LayerSpec::kConcat: {
      const int rank = static_cast<int>(in.size());
      if (l.axis < 0 || l.axis >= rank) {
        return Invalid(what, absl::StrCat(": axis ", l.axis, " of a rank-", rank, " example"));
      }
      int64_t total = 0;
      for (const TensorType& t : inputs) {
        bool fits = t.shape.size() == in.size();
        for (int d = 0; fits && d < rank; ++d) fits = d == l.axis || t.shape[d] == in[d];
        if (!fits) {
          return Invalid(
              what, absl::StrCat(" concatenates ", Tuple(in), " and ", Tuple(t.shape),
                                 " along axis ", l.axis + 1, "; the other axes must be equal"));
        }
        total += t.shape[l.axis];  // each bounded by kMaxElements: no overflow
      }
      out.shape[l.axis] = total;
      break;
    }
  }
  if (steps && out.shape.size() == 3) {  // back to (steps, channels)
    const bool windowed = l.kind == LayerSpec::kConv || l.kind == LayerSpec::kPool;
    if (out.shape[0] != 1 || (windowed && l.window.height != 1)) {
      return Invalid(what, absl::StrCat(" works along the steps of its ", Tuple(inputs[0].shape),
                                        " input only: a window or padding of one row"));
    }
    out.shape.erase(out.shape.begin());
  }
  PSC_RETURN_IF_ERROR(
      base::ElementCount(out.shape, kMaxElements, absl::StrCat(what, ": output")).status());
  return out;
}

absl::StatusOr<LayerGraph> LayerGraph::Build(absl::string_view model, TensorType input,
                                             const std::vector<LayerSpec>& layers) {
  LayerGraph g;
  g.tensors_.push_back(std::move(input));
  g.consumers_.emplace_back();
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    const std::string what = absl::StrCat(model, ": layer ", l.name);
    std::vector<int> sources = l.sources;
    if (sources.empty()) sources.push_back(static_cast<int>(i));  // the previous tensor
    if (l.kind == LayerSpec::kInput && (sources.size() != 1 || sources[0] != 0)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is an input: it takes the model's"));
    }
    // Ids come from the data, whose check keeps them in range.
    if (l.kind == LayerSpec::kEmbedding &&
        (sources.size() != 1 ||
         (sources[0] != 0 && (sources[0] < 1 || sources[0] > static_cast<int>(i) ||
                              layers[sources[0] - 1].kind != LayerSpec::kInput)))) {
      return absl::InvalidArgumentError(
          absl::StrCat(what,
                       " is an Embedding: it takes one of the model's inputs of ids, not another "
                       "layer's output"));
    }
    std::vector<TensorType> in;
    for (int t : sources) {
      if (t < 0 || t > static_cast<int>(i)) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " takes tensor ", t, ", which is not the input or an earlier layer's output"));
      }
      in.push_back(g.tensors_[t]);
    }
    absl::StatusOr<TensorType> out = InferOutput(l, in, what);
    if (!out.ok() && IsMergeKind(l.kind)) {
      // Name the layers whose shapes disagree.
      std::vector<std::string> parts;
      for (int t : sources) {
        parts.push_back(absl::StrCat(t == 0 ? "the input" : layers[t - 1].name, " ",
                                     Tuple(g.tensors_[t].shape)));
      }
      return absl::InvalidArgumentError(
          absl::StrCat(out.status().message(), " (", absl::StrJoin(parts, ", "), ")"));
    }
    PSC_RETURN_IF_ERROR(out.status());
    for (int t : sources) g.consumers_[t].push_back(static_cast<int>(i));
    g.tensors_.push_back(*std::move(out));
    g.consumers_.emplace_back();
    g.sources_.push_back(std::move(sources));
  }
  for (int t = 0; t + 1 < g.num_tensors(); ++t) {
    if (g.consumers_[t].empty() && (t == 0 || !layers[t - 1].keras_mask)) {
      return absl::InvalidArgumentError(absl::StrCat(
          model, ": ",
          t == 0 ? "the input" : absl::StrCat("the output of layer ", layers[t - 1].name),
          " is not used: every layer but the last must feed another"));
    }
  }
  return g;
}

Shape DeviceShape(const Shape& example, int64_t n) {
  Shape s = {n};
  if (example.size() == 2) s.push_back(1);  // (steps, channels): [n, 1, steps, channels]
  s.insert(s.end(), example.begin(), example.end());
  return s;
}

Shape LayerGraph::BatchShape(int t, int64_t n) const { return DeviceShape(tensors_[t].shape, n); }

}  // namespace compute
}  // namespace psc
