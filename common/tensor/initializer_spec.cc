#include "common/tensor/initializer_spec.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace psc {
namespace tensor {

// The enums list the same kinds in the same order.
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
  if (!std::isfinite(spec.a()) || !std::isfinite(spec.b())) {
    return absl::InvalidArgumentError("an initializer's bounds must be finite");
  }
  init->kind = static_cast<Initializer::Kind>(spec.kind());
  init->a = spec.a();
  init->b = spec.b();
  return absl::OkStatus();
}

}  // namespace tensor
}  // namespace psc
