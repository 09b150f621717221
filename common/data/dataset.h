// Fashion-MNIST as pscluster trains on it: the IDX files from Debian's dataset-fashion-mnist,
// split into train / validation / test, standardized with one mean and one standard deviation
// fitted on the training split (as sklearn's StandardScaler on the flattened pixels).
#ifndef PSC_COMMON_DATA_DATASET_H_
#define PSC_COMMON_DATA_DATASET_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/numpy_file.h"
#include "common/data/numpy_images.h"

namespace psc::data {

// One split of an image-classification dataset, in memory. Pixels stay bytes
// (a quarter of the floats' memory) and are standardized as they are read,
// through a table of the 256 standardized values.
struct Split {
  // count * height * width raw pixels: NHWC with C = 1, i.e. row-major
  // count x height x width. Example i starts at pixels[i * height * width].
  std::vector<uint8_t> pixels;
  // The standardized value of each raw pixel value.
  std::array<float, 256> table{};
  std::vector<int32_t> labels;  // count entries, each in 0..9.
  // A regression's targets (compute/regression_loss.h): count x
  // target_width floats, row-major; the labels are then all 0, one per
  // example. Empty (and target_width 0) for a classifier.
  std::vector<float> targets;
  int64_t target_width = 0;
  // The examples' weights in the loss (fit's sample_weight and
  // class_weight): count entries, or none (each weighs 1).
  std::vector<float> weights;
  int64_t count = 0;
  int height = 0;
  int width = 0;
  int channels = 1;  // an .npz's examples may have several (IDX images: 1)

  // Or, for data from NumPy files (numpy_dataset.h): the examples are
  // `array`'s [array_first, array_first + count), each height x width
  // elements, read through `preprocessing`; `pixels` and `table` are unused.
  // The array's storage (its file's mapped pages) is shared, not copied.
  std::optional<NumpyArray> array;
  int64_t array_first = 0;
  Preprocessing preprocessing;

  int64_t pixels_per_example() const { return int64_t{height} * width * channels; }
  // The standardized pixel at `index` of `pixels` (IDX data only).
  float Pixel(int64_t index) const { return table[pixels[index]]; }
  // Writes examples [first, first + n) standardized to out[0, n * pixels_per_example()).
  // The caller checks the range.
  void Standardize(int64_t first, int64_t n, float* out) const;
  // Whether the storage holds `count` examples of height x width, and there
  // are `count` labels (and no weights or `count`; no targets or
  // count x target_width).
  bool Consistent() const;
  // Gives back the examples' memory (the labels, weights and count stay).
  void DropExamples();
};

struct FashionMnist {
  Split train;
  Split validation;
  Split test;
  // The standardization applied to every split, x' = (x - mean) / std on the raw 0..255 pixel
  // scale: mean and population standard deviation of all pixels of `train`. If those pixels are
  // all equal, std is 1 (as sklearn does for a zero variance).
  double mean = 0;
  double std = 1;
};

struct DatasetOptions {
  // Holds train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
  // t10k-labels-idx1-ubyte.gz. Where a .gz file is absent, the same name without .gz is read.
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  // The first `validation_examples` training images form the validation split; the rest the
  // training split. Must be >= 0 and below the number of training images.
  int64_t validation_examples = 5000;
  // If > 0, the training split keeps only its first `max_train_examples` examples (all of them if
  // it has fewer), and mean / std are fitted on that subset. 0 keeps them all. Must be >= 0.
  int64_t max_train_examples = 0;
};

// Loads, splits and standardizes Fashion-MNIST. Blocks on file I/O and decompression (about half a
// second for the full data). Thread-safe (no shared state).
//
// Errors:
//   NOT_FOUND         `data_dir` does not exist (the message suggests
//                     `apt-get install dataset-fashion-mnist`), or one of the four files is
//                     missing in both forms (the message names it).
//   INVALID_ARGUMENT  negative options; validation_examples >= the number of training images; an
//                     image file that is not 3-D; a label file that is not 1-D; image and label
//                     counts that differ; a label above 9; test images of another size than the
//                     training images; and every ReadIdxFile error. Each names the file.
absl::StatusOr<FashionMnist> LoadFashionMnist(const DatasetOptions& options);

}  // namespace psc::data

#endif  // PSC_COMMON_DATA_DATASET_H_
