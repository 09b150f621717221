#include "common/compute/model_shapes.h"

#include <string>

namespace psc {
namespace compute {

std::vector<tensor::VariableShape> SeedCnnVariableShapes() {
  std::vector<tensor::VariableShape> out;
  const int filters[] = {32, 32, 64, 64, 128, 128};
  int in = 1;
  for (int i = 0; i < 6; ++i) {
    const std::string name = i == 0 ? "conv2d" : "conv2d_" + std::to_string(i);
    out.push_back({name + "/kernel", {3, 3, in, filters[i]}});
    out.push_back({name + "/bias", {filters[i]}});
    in = filters[i];
  }
  out.push_back({"dense/kernel", {1152, 128}});
  out.push_back({"dense/bias", {128}});
  out.push_back({"dense_1/kernel", {128, 10}});
  out.push_back({"dense_1/bias", {10}});
  return out;
}

}  // namespace compute
}  // namespace psc
