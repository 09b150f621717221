// The variables of the reference models, with Keras names and layouts
// (conv kernels HWIO, dense kernels (in, out)), in model order.
#ifndef PSC_COMMON_COMPUTE_MODEL_SHAPES_H_
#define PSC_COMMON_COMPUTE_MODEL_SHAPES_H_

#include <vector>

#include "common/tensor/tensor.h"

namespace psc {
namespace compute {

// seed_cnn (DESIGN.md): six 3x3 convolutions (32, 32, 64, 64, 128, 128
// filters), Dense 128, Dense 10: 435,306 float32 parameters.
std::vector<tensor::VariableShape> SeedCnnVariableShapes();

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_MODEL_SHAPES_H_
