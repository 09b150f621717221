// Class labels from a NumPy array, in the forms Keras's classification
// losses take them: integer class ids, shape (N,) or (N, 1), of any integer
// type (sparse_categorical_crossentropy); or one-hot rows, shape
// (N, classes), of floats or integers with a single 1 and zeros elsewhere
// (categorical_crossentropy). Pure; thread-safe.
#ifndef PSC_COMMON_DATA_NUMPY_LABELS_H_
#define PSC_COMMON_DATA_NUMPY_LABELS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data/numpy_file.h"

namespace psc::data {

// The N class ids in [0, classes). INVALID_ARGUMENT naming `what` (e.g.
// "data.npz: y_train"), the example and the value for: a label outside
// [0, classes) (a negative one included); floats that are not one-hot rows;
// a one-hot row without exactly one 1 (or with another nonzero); a row width
// other than `classes`; any other shape. `classes` >= 1.
absl::StatusOr<std::vector<int32_t>> LabelsFromArray(const NumpyArray& array, int64_t classes,
                                                     absl::string_view what);

// The N labels of a binary classifier (binary_crossentropy): shape (N,) or
// (N, 1), any numeric type, each exactly 0 or 1 (soft targets are not
// taken). INVALID_ARGUMENT naming `what`, the example and the value
// otherwise.
absl::StatusOr<std::vector<int32_t>> BinaryLabelsFromArray(const NumpyArray& array,
                                                           absl::string_view what);

// The N float targets of a regression (mean_squared_error and the like)
// of an output of `units` units: shape (N, units), or (N,) when units is 1,
// any numeric type, row-major into N x units floats. INVALID_ARGUMENT
// naming `what`, the example and the value for a NaN, an infinity or a
// value beyond float's range, and for another shape.
absl::StatusOr<std::vector<float>> TargetsFromArray(const NumpyArray& array, int64_t units,
                                                    absl::string_view what);

// One weight per example (fit's sample_weight): shape (N,) or (N, 1), any
// numeric type, as floats. INVALID_ARGUMENT naming `what` and the row for a
// NaN or an infinity (or a value beyond float's range), or another shape.
absl::StatusOr<std::vector<float>> WeightsFromArray(const NumpyArray& array,
                                                    absl::string_view what);

}  // namespace psc::data

#endif  // PSC_COMMON_DATA_NUMPY_LABELS_H_
