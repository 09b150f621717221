// The input examples of a NumPy array as a model reads them: x of shape
// (N, ...) whose trailing dimensions are one example, uint8 or float32, and
// the preprocessing a job applies to them (recorded in its result file, and
// written into an exported model as a Keras layer at its input):
//   standardize  x' = (x - mean) / std, population mean and std fitted on
//                the training rows: ONE pair over every element (as the
//                seed's StandardScaler over flattened pixels; Keras's
//                Normalization(axis=None)), or one pair per feature, the
//                example's last axis (as scikit-learn's StandardScaler on
//                (N, features) data; Keras's Normalization(axis=-1)). A std
//                of 0 counts as 1.
//   rescale      x' = x * scale + offset (Keras's Rescaling(1/255))
//   none         x' = x
// The arithmetic is the Fashion-MNIST loader's (dataset.h), so the same
// pixels in an .npz standardize to the same floats, bit for bit. Elements are
// loaded through memcpy (a stored .npz member may sit at any address). Pure;
// thread-safe.
#ifndef PSC_COMMON_DATA_NUMPY_IMAGES_H_
#define PSC_COMMON_DATA_NUMPY_IMAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data/numpy_file.h"

namespace psc::data {

struct Preprocessing {
  enum class Kind { kNone, kStandardize, kRescale };
  Kind kind = Kind::kNone;
  double mean = 0;  // standardize, one pair for every element
  double std = 1;   // never 0
  // Standardize per feature: one pair per index of the example's last axis
  // (its channels, or its features); empty: the pair above.
  std::vector<double> feature_mean, feature_std;
  double scale = 1;   // rescale
  double offset = 0;  // rescale
  // "standardize (mean 72.94, std 90.02)", "rescale (x 0.00392157)", "none".
  std::string Text() const;
};

// OK when `x` holds examples of `example` shape (e.g. {28, 28, 1}); an array
// (N, H, W) counts as (N, H, W, 1), as Keras's Conv2D input needs it. Else
// INVALID_ARGUMENT naming `what` and printing both shapes; also for element
// types other than uint8 and float32.
absl::Status CheckExamples(const NumpyArray& x, const std::vector<int64_t>& example,
                           absl::string_view what);

// OK when every element of `x` is finite (uint8 always is). Else
// INVALID_ARGUMENT naming `what`, the row of the user's array (its first
// index, whatever split it later falls in) and the position inside the
// example: "data.npz: x_train row 1234, element (3, 4, 0) of the example,
// is nan". One streaming pass; a mapped array's pages are released as it
// goes. Every preprocessing mode calls it: a NaN or Inf that reached
// training would make a replica's gradient non-finite, which the servers
// refuse.
absl::Status CheckFinite(const NumpyArray& x, absl::string_view what);

// The preprocessing of `kind` fitted on examples [first, first + n) of
// `train` (mean and std in double over every element, or with `features` >
// 0 over each of the `features` indices of the last axis, which must divide
// an example's elements; `scale` is kRescale's factor and must be finite
// and > 0). The caller checks the range. INVALID_ARGUMENT for no elements
// under kStandardize, a bad scale, or an element type other than uint8 and
// float32.
absl::StatusOr<Preprocessing> FitPreprocessing(const NumpyArray& train, int64_t first, int64_t n,
                                               Preprocessing::Kind kind, double scale,
                                               absl::string_view what, int64_t features = 0);
// The same over every example of `train`.
absl::StatusOr<Preprocessing> FitPreprocessing(const NumpyArray& train, Preprocessing::Kind kind,
                                               double scale, absl::string_view what);

// Writes examples [first, first + n) of `x`, preprocessed, as float32 into
// out[0, n * ExampleElements(x)). The caller checks the range.
void ReadExamples(const NumpyArray& x, const Preprocessing& p, int64_t first, int64_t n,
                  float* out);

// One element `v` of feature `feature` (an index of the example's last
// axis) preprocessed by `p`, in float32 as ReadExamples computes it.
float Preprocess(const Preprocessing& p, float v, size_t feature = 0);

// The elements of one example of `x` (the product of its trailing dims).
int64_t ExampleElements(const NumpyArray& x);

}  // namespace psc::data

#endif  // PSC_COMMON_DATA_NUMPY_IMAGES_H_
