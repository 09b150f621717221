#include "common/tensor/initializer_spec.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace psc {
namespace tensor {

// The enums list the same kinds in the same order, up to RANDOM_UNIFORM:
// the kinds after it (orthogonal, an LSTM's forget-gate bias) are never a
// table's, the only variables whose initializer travels.
proto::InitializerSpec ToProto(const Initializer& init) {
  proto::InitializerSpec spec;
  spec.set_kind(static_cast<proto::InitializerSpec::Kind>(init.kind));
  spec.set_a(init.a);
  spec.set_b(init.b);
  return spec;
}

absl::Status FromProto(const proto::InitializerSpec& spec, Initializer* init) {
  if (!proto::InitializerSpec::Kind_IsValid(spec.kind()) ||
      spec.kind() > proto::InitializerSpec::RANDOM_UNIFORM) {
    return absl::InvalidArgumentError(absl::StrCat("unknown initializer kind ", spec.kind()));
  }
  // Every value a float32 can hold: the bounds, a uniform range, a normal's
  // standard deviation (>= 0).
  constexpr double kMax = std::numeric_limits<float>::max();
  const double a = spec.a(), b = spec.b();
  if (!(std::fabs(a) <= kMax) || !(std::fabs(b) <= kMax) || !(std::fabs(b - a) <= kMax) ||
      (spec.kind() == proto::InitializerSpec::RANDOM_NORMAL && !(b >= 0 && b <= kMax / 8))) {
    return absl::InvalidArgumentError(absl::StrCat("initializer bounds ", a, " and ", b,
                                                   " do not keep its values finite float32s"));
  }
  init->kind = static_cast<Initializer::Kind>(spec.kind());
  init->a = spec.a();
  init->b = spec.b();
  return absl::OkStatus();
}

}  // namespace tensor
}  // namespace psc
