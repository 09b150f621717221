// What an op means, apart from any backend: its tensors, its shape rule, its
// double-precision reference and the cases the conformance suite runs. A
// backend's kernel for the op (compute/kernel_registry.h) is checked
// against this, on every backend, by one loop over the registry
// (compute/backend_conformance.cc), with no test of its own.
#ifndef PSC_COMMON_OPS_OP_DEF_H_
#define PSC_COMMON_OPS_OP_DEF_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compute/backend.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace ops {

using compute::OpAttrs;
using compute::Shape;

// A tensor on the host, in doubles, in the logical (row-major) layout, of
// the dtype it has on a backend (float32 but for ids, a loss's labels and
// totals).
struct HostTensor {
  Shape shape;
  std::vector<double> values;
  compute::DType dtype = compute::DType::kFloat32;
};

// One run of an op in the conformance suite.
struct OpCase {
  std::string name;  // for failure messages: "relu [2,3,4,5]"
  OpAttrs attrs;
  std::vector<HostTensor> inputs;  // each value representable in float
  // How close a float32 kernel must come to the reference: exactly (the
  // reference rounded to float, for ops whose float result is the correctly
  // rounded exact one), or within 1e-5 * sqrt(terms) + 1e-4 * |want|, for an
  // output that sums `terms` products.
  bool exact = false;
  int64_t terms = 1;
  // Whether the op is differentiable at these inputs (no input at or within
  // a central-difference step of a kink or tie), so a gradient op's
  // reference can be checked against central differences here.
  bool differentiable = true;
  // Tensors the case leaves out (bit i for tensor i), which the op's
  // kernels take as null: an absent input is an empty HostTensor (its
  // shape, for the shape rule, empty); an absent output is not compared.
  uint32_t absent_inputs = 0;
  uint32_t absent_outputs = 0;
  // The shapes to allocate the outputs with, when not the shape rule's
  // (the same element counts): a dense layer's dx of an image x.
  std::vector<Shape> output_shapes;
};

// For an op that is another op's gradient: which one, with respect to
// which of its inputs, and how this op's inputs are made from the forward's.
struct GradientOf {
  const char* forward = nullptr;
  int wrt = 0;
  // This op's inputs from the forward's inputs, its reference outputs and
  // the gradient dy of its first output.
  std::vector<HostTensor> (*inputs)(absl::Span<const HostTensor> forward_in,
                                    absl::Span<const HostTensor> forward_out, const HostTensor& dy,
                                    const OpAttrs& attrs) = nullptr;
  // Whether its kernels must match the reference exactly (as OpCase).
  bool exact = false;
  // The central-difference step its reference is checked with.
  double step = 1e-3;
  // What else the forward's case decides for this op's case (absent
  // tensors, output shapes); null: nothing.
  void (*adjust)(const OpCase& forward, OpCase* gradient) = nullptr;
};

// The output shapes from the input shapes and attributes, or
// INVALID_ARGUMENT naming the op and the shapes that do not agree.
using ShapeRule = absl::StatusOr<std::vector<Shape>> (*)(absl::Span<const Shape> in,
                                                         const OpAttrs& attrs);
// The outputs, in double, from inputs that satisfy the shape rule.
using Reference = std::vector<HostTensor> (*)(absl::Span<const HostTensor> in,
                                              const OpAttrs& attrs);

struct OpDef {
  const char* name = nullptr;  // as registered: "Add"
  int inputs = 0;
  int outputs = 1;
  ShapeRule shapes = nullptr;
  Reference reference = nullptr;
  // The op's own cases, drawn from `rng`; a gradient op may have none and
  // run on its forward's (below).
  std::vector<OpCase> (*cases)(std::mt19937* rng) = nullptr;
  // Which input an output may be written over ("y may be a"): the suite
  // runs each case once more with output 0 in that input's tensor.
  std::vector<int> in_place;
  // Set for a gradient op.
  GradientOf gradient;
  // Whether its first two inputs' shapes are independent (an embedding's
  // ids and table): any pair of ranks the rule takes agrees.
  bool independent_inputs = false;
  // The tensors (bit i for tensor i) a mixed-precision model keeps in
  // float32 when the others are bfloat16 or float16: variables and their
  // gradients, normalization statistics. The low-precision cases
  // (CasesOf's `precision`) leave them float32.
  uint32_t float32_inputs = 0;
  uint32_t float32_outputs = 0;
};

// An OpDef of these; the cases, in_place and gradient set after.
OpDef Define(const char* name, int inputs, int outputs, ShapeRule shapes, Reference reference);

// Every op with a reference, in name order.
std::vector<OpDef> AllOpDefs();
// The elementwise ops' (elementwise_op_defs.cc) and the pooling ops'
// (pooling_op_defs.cc).
std::vector<OpDef> ElementwiseOpDefs();
std::vector<OpDef> PoolingOpDefs();
std::vector<OpDef> BatchNormOpDefs();  // batch_norm_op_defs.cc
std::vector<OpDef> LayerNormOpDefs();  // layer_norm_op_defs.cc
std::vector<OpDef> DenseOpDefs();      // dense_op_defs.cc
std::vector<OpDef> ConvOpDefs();       // conv_op_defs.cc
std::vector<OpDef> LossOpDefs();       // loss_op_defs.cc
std::vector<OpDef> EmbeddingOpDefs();  // embedding_op_defs.cc
std::vector<OpDef> MatMulOpDefs();     // matmul_op_defs.cc
std::vector<OpDef> RnnOpDefs();        // rnn_op_defs.cc
std::vector<OpDef> MaskOpDefs();       // mask_op_defs.cc
// The OpDef named `name` in `defs`, or null.
const OpDef* FindOpDef(const std::vector<OpDef>& defs, absl::string_view name);

// The cases an op runs on: its own, and for a gradient op those made from
// its forward's differentiable and non-differentiable cases alike (a
// random dy each), with the forward's terms and GradientOf's exactness.
// With `precision` bfloat16 or float16, the cases a mixed-precision model
// runs: every float32 input not in float32_inputs rounded to it and held in
// it (a gradient op's made from its forward's case rounded so, and dy, so
// that the statistics among its inputs are exactly those of the rounded
// values).
std::vector<OpCase> CasesOf(const std::vector<OpDef>& defs, const OpDef& def, std::mt19937* rng,
                            compute::DType precision = compute::DType::kFloat32);
// `v` (representable in float) rounded to `dtype`: float32 (itself),
// bfloat16 or float16.
double RoundTo(compute::DType dtype, double v);

}  // namespace ops
}  // namespace psc

#endif  // PSC_COMMON_OPS_OP_DEF_H_
