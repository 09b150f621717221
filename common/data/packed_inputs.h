// The examples of a model of several inputs (keras.Input x N), from an
// .npz: one array per input, named "<prefix>/<input name>" (np.savez(...,
// **{"x_train/image": xi, "x_train/features": xf})), each (N, <the input's
// shape>) of uint8 or float32, packed into one float32 array of (N, total):
// example i holds every input's values in the model's input order, where
// the model's kInput layers take them apart (compute/layer_spec.h). Pure;
// thread-safe.
#ifndef PSC_COMMON_DATA_PACKED_INPUTS_H_
#define PSC_COMMON_DATA_PACKED_INPUTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data/numpy_file.h"

namespace psc::data {

// One input: its name, its example shape ({H, W, C} or {F}) and where its
// values start in a packed example (compute::ModelInput's); for an input of
// ids, their bound and the table that reads them (id_inputs.h).
struct PackedInput {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t id_limit = 0;  // 0: values
  std::string table;
  bool mask = false;  // an attention mask: every value 0 or 1
};

// The array "<prefix>/<name>" of `arrays` for every input, packed (one
// input may also be the array "<prefix>" itself); an input of ids read
// through CheckIds and ReadIds.
// NOT_FOUND when none of them is there (an optional split). INVALID_ARGUMENT
// naming `what` (the archive) and the array for: some inputs' arrays there
// and others missing (naming them), an array whose examples are not its
// input's shape or type, a NaN or infinity, example counts that differ, a
// packed array over kMaxNumpyArrayBytes (checked before it is allocated), a
// mask input's value other than 0 or 1 (naming the row and element);
// and for a "<prefix>" array alone (one array for a model of several
// inputs).
absl::StatusOr<NumpyArray> PackInputs(const std::map<std::string, NumpyArray>& arrays,
                                      const std::string& prefix,
                                      const std::vector<PackedInput>& inputs,
                                      absl::string_view what);

// "x_train/features, x_train/image": the arrays PackInputs reads.
std::string PackedArrayNames(const std::string& prefix, const std::vector<PackedInput>& inputs);

}  // namespace psc::data

#endif  // PSC_COMMON_DATA_PACKED_INPUTS_H_
