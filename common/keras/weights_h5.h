// A model's variables as Keras 3's .weights.h5 holds them (what
// model.save_weights() writes and model.load_weights() reads, and the
// model.weights.h5 inside a .keras archive): one float32 dataset per
// variable at keras_paths.h's path, an empty "vars" group for each layer
// without variables and for the model itself. Written to a file a row chunk
// at a time from a WeightsSource, and read in memory, with Debian's
// libhdf5. libhdf5 is not thread-safe here
// (Debian's serial build): every call into it holds one process-wide lock.
#ifndef PSC_COMMON_KERAS_WEIGHTS_H5_H_
#define PSC_COMMON_KERAS_WEIGHTS_H5_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/compute/model.h"
#include "common/keras/weights_source.h"

namespace psc {
namespace keras {

// Writes `model`'s variables, and `optimizer`'s state when given, from
// `source` to a .weights.h5 file at `path`, atomically and durably (a
// temporary file beside it, fsync'ed and renamed, then the directory
// fsync'ed, as io::FileSystem::WriteFileAtomically writes): each dataset is
// made at its full shape and filled `chunk_bytes` at a time (at least a
// row), so the writer holds one chunk, never a whole table. `source` is
// called with the process's HDF5 lock held (other HDF5 users of the process
// wait for the whole write): it must not call into libhdf5. INVALID_ARGUMENT for an
// optimizer slot of no variable; a source's error as it is, prefixed with
// the file and dataset; INTERNAL when libhdf5 fails. Nothing is left at
// `path` (or its temporary) on an error.
absl::Status WriteWeightsH5(const std::string& path, const compute::Model& model,
                            WeightsSource* source, const OptimizerState* optimizer = nullptr,
                            int64_t chunk_bytes = int64_t{64} << 20);

// The bytes of a .weights.h5 file holding `params` (model.variables()
// order), made in memory. INVALID_ARGUMENT if the count or a size does not
// match the model.
absl::StatusOr<std::string> WeightsH5Bytes(const compute::Model& model,
                                           const std::vector<std::vector<float>>& params);

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
