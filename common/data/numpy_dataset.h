// A training set from an .npz archive as np.savez writes it: arrays x_train
// and y_train, and optionally x_val / y_val and x_test / y_test (names
// overridable), split and preprocessed like the Fashion-MNIST loader
// (dataset.h), into the same Split types. The examples stay in the archive's
// arrays (memory-mapped when stored, see numpy_file.h): a Split refers to a
// range of them. Blocks on file I/O. Thread-safe (no shared state).
#ifndef PSC_COMMON_DATA_NUMPY_DATASET_H_
#define PSC_COMMON_DATA_NUMPY_DATASET_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "common/data/numpy_images.h"
#include "common/data/packed_inputs.h"

namespace psc::data {

struct NumpyDatasetOptions {
  std::string path;  // the .npz archive
  std::string x_train = "x_train", y_train = "y_train";
  std::string x_val = "x_val", y_val = "y_val";
  std::string x_test = "x_test", y_test = "y_test";
  // The array of the training examples' weights (fit's sample_weight),
  // split with x_train by validation_split; empty: none.
  std::string sample_weight;
  // Without a validation array: the LAST N - floor(N * (1 -
  // validation_split)) training examples validate, as Keras's fit takes
  // them (the built-in Fashion-MNIST recipe keeps its first-5,000 hold-out).
  double validation_split = 0;
  // As DatasetOptions::max_train_examples: 0 keeps every training example.
  int64_t max_train_examples = 0;
  // Fitted on the training split, applied to every split.
  Preprocessing::Kind preprocessing = Preprocessing::Kind::kStandardize;
  double rescale = 1.0 / 255;
  // kStandardize: one mean and std per feature (the example's last axis,
  // Keras's Normalization(axis=-1)) instead of one over every element.
  bool standardize_per_feature = false;
  // The model's input (height x width x 1) and its classes.
  int height = 28;
  int width = 28;
  int64_t classes = 10;
  // The labels are 0/1 of a binary classifier (BinaryLabelsFromArray).
  bool binary_labels = false;
  // > 0: the y arrays are a regression's float targets of this many units
  // (TargetsFromArray) into Split::targets, and the labels are 0.
  int64_t target_width = 0;
  // When set, the model's input instead: {H, W, C} or {features} (a Split
  // of 1 x features x 1).
  std::vector<int64_t> example_shape;
  // A model of several inputs: each x array is "<x name>/<input name>" per
  // input, packed (packed_inputs.h) into the {total} examples of
  // example_shape. The preprocessing must be kNone.
  std::vector<PackedInput> inputs;
};

// The splits; `mean` and `std` are the standardization's (0 and 1 under
// another preprocessing). A validation or test split without arrays is empty
// (count 0). Errors: NOT_FOUND for a missing archive; DATA_LOSS for a corrupt
// one (numpy_file.h); INVALID_ARGUMENT, naming the archive and the array,
// for: a missing x_train or y_train (listing the arrays it has), an x without
// its y or the reverse, examples that do not fit the model's input (both
// shapes printed), labels that are not class ids or one-hot rows of the
// model's classes, x and y of different lengths, sample weights missing,
// not one per training example or not finite, a validation_split outside
// [0, 1) or one that leaves no training example, bad preprocessing.
absl::StatusOr<FashionMnist> LoadNumpyDataset(const NumpyDatasetOptions& options);

// The same from arrays already in memory, named as an archive's members
// (the data files' arrays: records/record_files.h); options.path names
// them in messages.
absl::StatusOr<FashionMnist> DatasetFromArrays(std::map<std::string, NumpyArray> arrays,
                                               const NumpyDatasetOptions& options);

}  // namespace psc::data

#endif  // PSC_COMMON_DATA_NUMPY_DATASET_H_
