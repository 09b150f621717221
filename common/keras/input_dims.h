// A model whose inputs leave a dimension open (keras.Input(shape=(None,)):
// a batch_shape of [null, null]), fixed from the data before it is read.
// pscluster runs one shape per job, as it runs one batch size, so an open
// length becomes the length of the data the job (or `pscluster predict`)
// was given, written into the config every task then reads, and into the
// job's export. Pure; thread-safe.
#ifndef PSC_COMMON_KERAS_INPUT_DIMS_H_
#define PSC_COMMON_KERAS_INPUT_DIMS_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/compute/backend.h"

namespace psc {
namespace keras {

// The example shape of the data for the input `name` (`only`: the model's
// only input, which the data's one array feeds whatever its name).
using InputDataShape =
    std::function<absl::StatusOr<compute::Shape>(const std::string& name, bool only)>;

// `config_json` (a whole model config, as ModelFromKerasConfig takes) with
// every open dimension of its inputs' declared shapes set to the data's:
// a Sequential's build_input_shape and its first layer's batch_shape (or
// Keras 2's batch_input_shape), a functional model's InputLayers'. The
// config as it is when no input has an open dimension (`data` is not
// called then). INVALID_ARGUMENT naming `what` and the input: an open
// dimension and no `data` (null: the caller has no data, as `pscluster
// describe`); the data's rank not the input's, or a declared dimension
// that is not the data's (both shapes named); `data`'s own errors.
absl::StatusOr<std::string> FixOpenInputDims(absl::string_view config_json, absl::string_view what,
                                             const InputDataShape& data);

}  // namespace keras
}  // namespace psc

#endif  // PSC_COMMON_KERAS_INPUT_DIMS_H_
