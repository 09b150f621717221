// How a variable's first values are drawn, as Keras's initializers of the
// same names define them (fans count a kernel's receptive field). The
// numbers come from our generator, seeded by --seed, not Keras's.
//
// A variable is one stream of draws, but an embedding table is one stream
// per row (InitializeRows), so that each parameter server makes the rows it
// owns from the seed and no process holds a whole table (issue 38). Both
// are fully specified here (SplitMix64), the same on every platform. Free
// of protos (the GPU plugin links it with the models); the wire form is
// initializer_spec.h.
#ifndef PSC_COMMON_TENSOR_INITIALIZER_H_
#define PSC_COMMON_TENSOR_INITIALIZER_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace psc {
namespace tensor {

struct Initializer {
  enum class Kind {
    kGlorotUniform,  // U(-l, l), l = sqrt(6 / (fan_in + fan_out))
    kGlorotNormal,   // N(0, s) truncated at 2s, s = sqrt(2 / (fan_in + fan_out)) / .8796
    kHeUniform,      // U(-l, l), l = sqrt(6 / fan_in)
    kHeNormal,       // N(0, s) truncated at 2s, s = sqrt(2 / fan_in) / .8796
    kZeros,
    kOnes,
    kConstant,       // a
    kRandomNormal,   // N(a, b)
    kRandomUniform,  // U(a, b)
    // a x Q, Q with orthonormal rows or columns (whichever are fewer) of the
    // variable seen as a matrix (its last axis the columns): a normal
    // matrix's QR decomposition, Q's columns signed by R's diagonal, as
    // Keras's Orthogonal (gain a). A recurrent kernel's default. Not for an
    // embedding table's rows (each row is its own stream).
    kOrthogonal,
    // An LSTM's bias with unit_forget_bias=True: zeros, but ones over [a,
    // 2a) (the forget gate of a units).
    kUnitForgetBias,
  };
  Kind kind = Kind::kGlorotUniform;
  double a = 0, b = 0;
  // "glorot_uniform", "constant(0.5)", ...
  std::string Text() const;
};

// Model variable `index`'s values under `seed` (`out`: every element of
// `shape`), drawn from one stream.
void InitializeVariable(const Initializer& init, absl::Span<const int64_t> shape, uint64_t seed,
                        int index, absl::Span<float> out);

// Rows [first, first + out.size() / row size) of table `index` of `shape`
// (its fans from the whole shape) under `seed`, each row drawn from its own
// stream: the same values whichever range a caller asks for.
void InitializeRows(const Initializer& init, absl::Span<const int64_t> shape, uint64_t seed,
                    int index, int64_t first, absl::Span<float> out);

}  // namespace tensor
}  // namespace psc

#endif  // PSC_COMMON_TENSOR_INITIALIZER_H_
