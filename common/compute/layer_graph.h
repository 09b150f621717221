// A model's dataflow graph: the tensors its layers take and make, each with
// the dtype and shape its producer's shape rule infers, and who consumes
// them. Tensor 0 is the model's input; tensor i + 1 is layer i's output.
// Layers are in a topological order (each takes only earlier tensors): the
// order the forward pass runs them, reversed by the backward pass. A chain
// (Sequential) is the special case where layer i takes tensor i.
//
// This is the one place an activation's shape is decided: Model::Build, the
// executor's buffers, ModelOpSpecs and the placement log ask it.
#ifndef PSC_COMMON_COMPUTE_LAYER_GRAPH_H_
#define PSC_COMMON_COMPUTE_LAYER_GRAPH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/compute/backend.h"
#include "common/compute/dtype.h"
#include "common/compute/layer_spec.h"

namespace psc {
namespace compute {

struct TensorType {
  DType dtype = DType::kFloat32;
  Shape shape;  // one example's, without the batch: {H, W, C} or {F}
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
};
// "(8, 8, 32) float32", as Keras prints a shape (without the batch).
std::string TensorTypeText(const TensorType& t);

// The shape rule of `layer`: its output's type from its inputs' (one per
// source). INVALID_ARGUMENT naming `what` (the layer) when they do not
// fit it: a Conv2D of the wrong channels, a window that leaves no output,
// a spatial layer on a (features,) tensor, an Add of different shapes, ...
absl::StatusOr<TensorType> InferOutput(const LayerSpec& layer, absl::Span<const TensorType> inputs,
                                       absl::string_view what);

// A kConvTranspose layer's output height and width from its input's
// (H, W, C): Window::Transposed*, or with output_padding (`pads`) Keras's
// (in - 1) x stride + span - 2 x pad + output_padding (pad: span / 2 for
// "same", 0 for "valid"). INVALID_ARGUMENT for an extent below 1 or past
// the tensor limit.
absl::StatusOr<Shape> ConvTransposeExtent(const LayerSpec& layer, const Shape& in);

// A kDot layer as the batched product of its sources' examples
// (matmul_ops.h): a is the first source ([M,K], or stored [K,M]:
// transpose_a), b the second ([K,N], or stored [N,K]: transpose_b).
struct DotGeometry {
  int64_t m = 1, k = 1, n = 1;
  bool transpose_a = false, transpose_b = false;
  bool normalize = false;  // LayerSpec::dot_normalize
};
// From the sources' example shapes a and b and the layer's dot_axes:
// INVALID_ARGUMENT for other ranks than both 1, 2 or 3, an axis out of
// range, or summed axes of different sizes. Rank 3 (the executor's
// attention, never Keras's Dot, whose batch_dot means another thing there)
// is a product per index of the equal first axes over the last two, and
// never normalized.
absl::StatusOr<DotGeometry> DotOf(const LayerSpec& layer, const Shape& a, const Shape& b);

// How the executor holds n examples of `example`'s shape: {n, ...}, but a
// (steps, channels) sequence as [n, 1, steps, channels], an image of one
// row, so that the window ops (Conv2D, pooling) run Conv1D and the 1-D
// pooling layers on it as it is, and the ops that read rows (Dense on the
// last axis, LayerNorm, softmax) see the same memory.
Shape DeviceShape(const Shape& example, int64_t n);

// Immutable once built; thread-safe.
class LayerGraph {
 public:
  // The graph of `layers` (their sources resolved: empty means the previous
  // layer's output) on examples of `input`, every output inferred and
  // checked. The model's output is the last layer's; it must have no
  // consumer, and every other tensor at least one. INVALID_ARGUMENT naming
  // `model` and the layer (an Add of two shapes names both sources).
  static absl::StatusOr<LayerGraph> Build(absl::string_view model, TensorType input,
                                          const std::vector<LayerSpec>& layers);

  int num_layers() const { return static_cast<int>(sources_.size()); }
  int num_tensors() const { return static_cast<int>(tensors_.size()); }
  static int OutputOf(int layer) { return layer + 1; }
  // The layer that makes tensor `t`, -1 for the model's input.
  static int ProducerOf(int t) { return t - 1; }
  const TensorType& tensor(int t) const { return tensors_[t]; }
  // The tensors layer `layer` takes, in order.
  const std::vector<int>& sources(int layer) const { return sources_[layer]; }
  // The layers that take tensor `t`, ascending (a layer taking it twice is
  // listed twice).
  const std::vector<int>& consumers(int t) const { return consumers_[t]; }
  // The tensor a layer's input gradient goes to has several consumers:
  // its gradient is the sum of their contributions.
  bool IsShared(int t) const { return consumers_[t].size() > 1; }
  // The same with the batch, as the executor holds it (DeviceShape).
  Shape BatchShape(int t, int64_t n) const;

 private:
  std::vector<TensorType> tensors_;
  std::vector<std::vector<int>> sources_;
  std::vector<std::vector<int>> consumers_;
};

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_LAYER_GRAPH_H_
