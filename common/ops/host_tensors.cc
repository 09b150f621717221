#include "common/ops/host_tensors.h"

#include <utility>

#include "common/compute/reference/reference_ops.h"

namespace psc {
namespace ops {

HostTensor RandomTensor(std::mt19937* rng, const Shape& shape, double lo, double hi) {
  return {shape, compute::reference::RandomUniform(
                     rng, static_cast<size_t>(compute::ShapeSize(shape)), lo, hi)};
}

HostTensor DistinctTensor(std::mt19937* rng, const Shape& shape) {
  return {shape, compute::reference::RandomDistinct(
                     rng, static_cast<size_t>(compute::ShapeSize(shape)), -1, 1)};
}

HostTensor RoundedToFloat(HostTensor t) {
  for (double& v : t.values) v = static_cast<float>(v);
  return t;
}

}  // namespace ops
}  // namespace psc
