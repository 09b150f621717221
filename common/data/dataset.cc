#include "common/data/dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/data/idx_reader.h"

namespace psc::data {
namespace {

constexpr int32_t kNumClasses = 10;

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// `dir`/`name` if it exists, else `dir`/`name` without its ".gz" if that exists, else NOT_FOUND.
absl::StatusOr<std::string> FindFile(const std::string& dir, const std::string& name) {
  const std::string gz = absl::StrCat(dir, "/", name);
  if (Exists(gz)) return gz;
  const std::string raw = gz.substr(0, gz.size() - 3);
  if (absl::EndsWith(gz, ".gz") && Exists(raw)) return raw;
  return absl::NotFoundError(absl::StrCat("Fashion-MNIST file ", gz, " not found (nor ", raw,
                                          "); install it with `apt-get install "
                                          "dataset-fashion-mnist` or pass another --data_dir"));
}

// The images and labels of one IDX pair, raw, with their shapes checked against each other.
struct RawSplit {
  IdxArray images;  // count x height x width.
  std::vector<int32_t> labels;
  std::string images_path;
};

absl::StatusOr<RawSplit> ReadPair(const std::string& dir, const std::string& images_name,
                                  const std::string& labels_name) {
  RawSplit out;
  PSC_ASSIGN_OR_RETURN(out.images_path, FindFile(dir, images_name));
  PSC_ASSIGN_OR_RETURN(const std::string labels_path, FindFile(dir, labels_name));
  PSC_ASSIGN_OR_RETURN(out.images, ReadIdxFile(out.images_path));
  if (out.images.dims.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image file ", out.images_path, " must be 3-D (count x height x width), but has shape ",
        absl::StrJoin(out.images.dims, "x")));
  }
  PSC_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));
  if (labels.dims.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("label file ", labels_path,
                                                   " must be 1-D, but has shape ",
                                                   absl::StrJoin(labels.dims, "x")));
  }
  if (labels.dims[0] != out.images.dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(out.images_path, " has ", out.images.dims[0],
                                                   " images but ", labels_path, " has ",
                                                   labels.dims[0], " labels"));
  }
  out.labels.reserve(labels.data.size());
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kNumClasses) {
      return absl::InvalidArgumentError(absl::StrCat("label file ", labels_path, ": label ", i,
                                                     " is ", labels.data[i], ", want 0 to ",
                                                     kNumClasses - 1));
    }
    out.labels.push_back(labels.data[i]);
  }
  return out;
}

// Examples [begin, end) of `raw`, with pixel value v mapped to table[v].
Split Slice(const RawSplit& raw, int64_t begin, int64_t end, const std::array<float, 256>& table) {
  Split out;
  out.height = raw.images.dims[1];
  out.width = raw.images.dims[2];
  out.count = end - begin;
  const int64_t pixels = int64_t{out.height} * out.width;
  const uint8_t* src = raw.images.data.data() + begin * pixels;
  out.pixels.assign(src, src + out.count * pixels);
  out.table = table;
  out.labels.assign(raw.labels.begin() + begin, raw.labels.begin() + end);
  return out;
}

}  // namespace

bool Split::Consistent() const {
  if (count < 0 || height < 0 || width < 0 || labels.size() != static_cast<size_t>(count) ||
      !(weights.empty() || weights.size() == labels.size()) || target_width < 0 ||
      !(targets.empty() ? target_width == 0
                        : target_width > 0 && targets.size() / target_width == labels.size() &&
                              targets.size() % target_width == 0)) {
    return false;
  }
  if (array.has_value()) {
    const std::vector<int64_t>& s = array->header().shape;
    return !s.empty() && ExampleElements(*array) == pixels_per_example() && array_first >= 0 &&
           array_first + count <= s[0];
  }
  return pixels.size() == static_cast<size_t>(count * pixels_per_example());
}

void Split::DropExamples() {
  std::vector<uint8_t>().swap(pixels);
  array.reset();
}

void Split::Standardize(int64_t first, int64_t n, float* out) const {
  if (array.has_value()) {
    ReadExamples(*array, preprocessing, array_first + first, n, out);
    // Read once per epoch at most: the pages go back to the page cache.
    const uint64_t bytes =
        static_cast<uint64_t>(pixels_per_example()) * NpyTypeSize(array->header().type);
    array->ReleasePages(static_cast<uint64_t>(array_first + first) * bytes,
                        static_cast<uint64_t>(n) * bytes);
    return;
  }
  const int64_t per = pixels_per_example();
  const uint8_t* src = pixels.data() + first * per;
  for (int64_t i = 0; i < n * per; ++i) out[i] = table[src[i]];
}

absl::StatusOr<FashionMnist> LoadFashionMnist(const DatasetOptions& options) {
  if (options.validation_examples < 0 || options.max_train_examples < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Fashion-MNIST options must not be negative: validation_examples ",
        options.validation_examples, ", max_train_examples ", options.max_train_examples));
  }
  struct stat st;
  if (stat(options.data_dir.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(
        "Fashion-MNIST data_dir ", options.data_dir,
        " does not exist; install the data with `apt-get install dataset-fashion-mnist` (it lands "
        "in /usr/share/datasets/fashion-mnist) or pass another --data_dir"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Fashion-MNIST data_dir ", options.data_dir, " is not a directory"));
  }

  PSC_ASSIGN_OR_RETURN(RawSplit train, ReadPair(options.data_dir, "train-images-idx3-ubyte.gz",
                                                "train-labels-idx1-ubyte.gz"));
  PSC_ASSIGN_OR_RETURN(RawSplit test, ReadPair(options.data_dir, "t10k-images-idx3-ubyte.gz",
                                               "t10k-labels-idx1-ubyte.gz"));
  if (test.images.dims[1] != train.images.dims[1] || test.images.dims[2] != train.images.dims[2]) {
    return absl::InvalidArgumentError(
        absl::StrCat("image file ", test.images_path, " holds ", test.images.dims[1], "x",
                     test.images.dims[2], " images but ", train.images_path, " holds ",
                     train.images.dims[1], "x", train.images.dims[2]));
  }

  const int64_t num_train_images = train.images.dims[0];
  if (options.validation_examples >= num_train_images) {
    return absl::InvalidArgumentError(absl::StrCat(
        "validation_examples ", options.validation_examples,
        " leaves no training examples: ", train.images_path, " has ", num_train_images, " images"));
  }
  const int64_t train_begin = options.validation_examples;
  int64_t train_end = num_train_images;
  if (options.max_train_examples > 0) {
    train_end = std::min(train_end, train_begin + options.max_train_examples);
  }

  // Mean and population standard deviation of the training pixels, in double. Pixels are bytes,
  // so a histogram gives the exact mean and a two-pass variance in one pass over the data.
  const int64_t pixels = int64_t{train.images.dims[1]} * train.images.dims[2];
  std::array<int64_t, 256> histogram{};
  for (int64_t i = train_begin * pixels; i < train_end * pixels; ++i) {
    ++histogram[train.images.data[i]];
  }
  const double n = static_cast<double>((train_end - train_begin) * pixels);
  int64_t sum = 0;
  for (int v = 0; v < 256; ++v) sum += histogram[v] * v;
  FashionMnist out;
  out.mean = static_cast<double>(sum) / n;
  double squares = 0;
  for (int v = 0; v < 256; ++v) squares += histogram[v] * (v - out.mean) * (v - out.mean);
  out.std = std::sqrt(squares / n);
  if (out.std == 0) out.std = 1;

  // (x - float(mean)) / float(std) in float32, for each of the 256 possible pixel values.
  const float mean = static_cast<float>(out.mean);
  const float scale = static_cast<float>(out.std);
  std::array<float, 256> table;
  for (int v = 0; v < 256; ++v) table[v] = (static_cast<float>(v) - mean) / scale;

  out.validation = Slice(train, 0, train_begin, table);
  out.train = Slice(train, train_begin, train_end, table);
  out.test = Slice(test, 0, test.images.dims[0], table);
  return out;
}

}  // namespace psc::data
