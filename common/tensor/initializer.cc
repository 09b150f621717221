#include "common/tensor/initializer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/splitmix64.h"

namespace psc {
namespace tensor {
namespace {

// The initializers' draws from `state`.
class Draws {
 public:
  explicit Draws(uint64_t state) : rng_(state) {}
  double Uniform() { return rng_.UnitDouble(); }  // [0, 1)
  double Normal() {                               // Box-Muller
    const double u1 = 1.0 - Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double Truncated() {  // redrawn beyond 2 standard deviations, as Keras does
    for (;;) {
      const double z = Normal();
      if (std::fabs(z) <= 2.0) return z;
    }
  }

 private:
  base::SplitMix64 rng_;
};

uint64_t VariableState(uint64_t seed, int index) {
  return seed * 0x9e3779b97f4a7c15ULL + (static_cast<uint64_t>(index) + 1) * 0xd1b54a32d192ed03ULL;
}

// Fills `out` from `draws` as `init` over a variable of `shape`.
void Fill(const Initializer& init, absl::Span<const int64_t> shape, Draws* draws,
          absl::Span<float> out) {
  const int64_t receptive = shape.size() == 4 ? shape[0] * shape[1] : 1;
  const double fan_in = static_cast<double>(shape.size() > 1 ? receptive * shape[shape.size() - 2]
                                                             : (shape.empty() ? 1 : shape[0]));
  const double fan_out = static_cast<double>(receptive * (shape.empty() ? 1 : shape.back()));
  constexpr double kTruncatedStd = .87962566103423978;  // std of N(0,1) truncated at 2
  for (float& v : out) {
    double x = 0;
    switch (init.kind) {
      case Initializer::Kind::kGlorotUniform:
        x = (2 * draws->Uniform() - 1) * std::sqrt(6.0 / (fan_in + fan_out));
        break;
      case Initializer::Kind::kHeUniform:
        x = (2 * draws->Uniform() - 1) * std::sqrt(6.0 / fan_in);
        break;
      case Initializer::Kind::kGlorotNormal:
        x = draws->Truncated() * std::sqrt(2.0 / (fan_in + fan_out)) / kTruncatedStd;
        break;
      case Initializer::Kind::kHeNormal:
        x = draws->Truncated() * std::sqrt(2.0 / fan_in) / kTruncatedStd;
        break;
      case Initializer::Kind::kZeros:
        x = 0;
        break;
      case Initializer::Kind::kOnes:
        x = 1;
        break;
      case Initializer::Kind::kConstant:
        x = init.a;
        break;
      case Initializer::Kind::kRandomNormal:
        x = init.a + init.b * draws->Normal();
        break;
      case Initializer::Kind::kRandomUniform:
        x = init.a + (init.b - init.a) * draws->Uniform();
        break;
      case Initializer::Kind::kOrthogonal:  // whole matrices: Orthogonal() below
      case Initializer::Kind::kUnitForgetBias:
        x = 0;
        break;
    }
    v = static_cast<float>(x);
  }
  if (init.kind == Initializer::Kind::kUnitForgetBias) {
    const int64_t units = static_cast<int64_t>(init.a);
    for (int64_t i = units; i < 2 * units && i < static_cast<int64_t>(out.size()); ++i) {
      out[i] = 1.0f;
    }
  }
}

// Keras's Orthogonal: the variable as rows x cols (cols its last axis); a
// normal matrix of max x min, its QR decomposition by modified Gram-Schmidt
// in double (R's diagonal, the columns' norms, is positive: Keras's sign
// correction leaves Q as it is), Q transposed when rows < cols, times the
// gain.
void Orthogonal(double gain, absl::Span<const int64_t> shape, Draws* draws, absl::Span<float> out) {
  const int64_t cols = shape.empty() ? 1 : shape.back();
  const int64_t rows = cols > 0 ? static_cast<int64_t>(out.size()) / cols : 0;
  const int64_t m = std::max(rows, cols), k = std::min(rows, cols);  // a: m x k
  if (m == 0 || k == 0) return;
  std::vector<double> a(static_cast<size_t>(m * k));
  for (double& v : a) v = draws->Normal();
  for (int64_t j = 0; j < k; ++j) {  // column j against the earlier ones, then normalized
    for (int64_t p = 0; p < j; ++p) {
      double dot = 0;
      for (int64_t i = 0; i < m; ++i) dot += a[i * k + p] * a[i * k + j];
      for (int64_t i = 0; i < m; ++i) a[i * k + j] -= dot * a[i * k + p];
    }
    double norm = 0;
    for (int64_t i = 0; i < m; ++i) norm += a[i * k + j] * a[i * k + j];
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < m; ++i) a[i * k + j] = norm > 0 ? a[i * k + j] / norm : 0;
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      // Q is m x k: rows x cols itself, or its transpose when rows < cols.
      const double q = rows >= cols ? a[r * k + c] : a[c * k + r];
      out[r * cols + c] = static_cast<float>(gain * q);
    }
  }
}

}  // namespace

std::string Initializer::Text() const {
  switch (kind) {
    case Kind::kGlorotUniform:
      return "glorot_uniform";
    case Kind::kGlorotNormal:
      return "glorot_normal";
    case Kind::kHeUniform:
      return "he_uniform";
    case Kind::kHeNormal:
      return "he_normal";
    case Kind::kZeros:
      return "zeros";
    case Kind::kOnes:
      return "ones";
    case Kind::kConstant:
      return absl::StrCat("constant(", a, ")");
    case Kind::kRandomNormal:
      return absl::StrCat("random_normal(mean ", a, ", stddev ", b, ")");
    case Kind::kRandomUniform:
      return absl::StrCat("random_uniform(", a, ", ", b, ")");
    case Kind::kOrthogonal:
      return absl::StrCat("orthogonal(gain ", a, ")");
    case Kind::kUnitForgetBias:
      return absl::StrCat("unit_forget_bias(", a, " units)");
  }
  return "unknown";
}

void InitializeVariable(const Initializer& init, absl::Span<const int64_t> shape, uint64_t seed,
                        int index, absl::Span<float> out) {
  Draws draws(VariableState(seed, index));
  if (init.kind == Initializer::Kind::kOrthogonal) {
    Orthogonal(init.a, shape, &draws, out);
    return;
  }
  Fill(init, shape, &draws, out);
}

void InitializeRows(const Initializer& init, absl::Span<const int64_t> shape, uint64_t seed,
                    int index, int64_t first, absl::Span<float> out) {
  int64_t width = 1;
  for (size_t d = 1; d < shape.size(); ++d) width *= shape[d];
  if (width < 1) return;
  const uint64_t first_state = VariableState(seed, index);
  for (size_t done = 0; done + width <= out.size(); done += width) {
    const uint64_t row = static_cast<uint64_t>(first) + done / width;
    Draws draws(base::Mix64(first_state + (row + 1) * 0x94d049bb133111ebULL));
    Fill(init, shape, &draws, out.subspan(done, width));
  }
}

}  // namespace tensor
}  // namespace psc
