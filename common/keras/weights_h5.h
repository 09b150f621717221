// A model's variables as Keras 3's .weights.h5 holds them (what
// model.save_weights() writes and model.load_weights() reads, and the
// model.weights.h5 inside a .keras archive): one float32 dataset per
// variable at keras_paths.h's path, an empty "vars" group for each layer
// without variables and for the model itself. Written and read in memory
// with Debian's libhdf5 (the core driver). libhdf5 is not thread-safe here
// (Debian's serial build): every call into it holds one process-wide lock.
#ifndef PSC_COMMON_KERAS_WEIGHTS_H5_H_
#define PSC_COMMON_KERAS_WEIGHTS_H5_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/compute/model.h"

namespace psc {
namespace keras {

// Keras 3's optimizer state in a model.weights.h5 ("optimizer/vars/N"):
// the iteration count (int32), the learning rate (float32), then each
// trainable variable's slots in the model's order (Adam: momentum then
// velocity per variable; SGD with momentum: the momentum), so that
// load_model(...).fit(...) continues where the job stopped.
struct OptimizerState {
  int64_t iterations = 0;
  float learning_rate = 0;
  // False under a learning-rate schedule: Keras then keeps no
  // learning_rate variable, and the slots follow the iteration count.
  bool learning_rate_variable = true;
  std::vector<std::vector<float>> slots;  // in Keras's order, each a variable's shape
  std::vector<std::vector<int64_t>> shapes;
};

// The bytes of a .weights.h5 file holding `params` (model.variables()
// order), and `optimizer`'s state when given. INVALID_ARGUMENT if the count
// or a size does not match the model.
absl::StatusOr<std::string> WeightsH5Bytes(const compute::Model& model,
                                           const std::vector<std::vector<float>>& params,
                                           const OptimizerState* optimizer = nullptr);

// `model`'s variables from the .weights.h5 bytes `h5`. INVALID_ARGUMENT
// naming `what` and the dataset when the file is not HDF5, a variable is
// missing, a layer has another number of variables than the config says, or
// a dataset has another shape or is not floating point: the weights do not
// match the config.
absl::StatusOr<std::vector<std::vector<float>>> ReadWeightsH5(absl::string_view h5,
                                                              const compute::Model& model,
                                                              absl::string_view what);

}  // namespace keras
}  // namespace psc

#endif  // PSC_COMMON_KERAS_WEIGHTS_H5_H_
