#include "common/data/numpy_dataset.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/data/numpy_file.h"
#include "common/data/numpy_labels.h"

namespace psc::data {
namespace {

using Arrays = std::map<std::string, NumpyArray>;

std::string Names(const Arrays& arrays) {
  std::vector<std::string> names;
  for (const auto& [name, a] : arrays) names.push_back(name);
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

std::vector<int64_t> ExampleShape(const NumpyDatasetOptions& o) {
  if (!o.example_shape.empty()) return o.example_shape;
  return {o.height, o.width, 1};
}

struct Pair {
  const NumpyArray* x = nullptr;
  std::vector<int32_t> labels;
  std::vector<float> targets;  // a regression's (target_width > 0)
};

// x and y of one split, checked against the model and each other; nullopt
// x when neither is there (an optional split).
absl::StatusOr<Pair> LoadPair(const Arrays& arrays, const NumpyDatasetOptions& o,
                              const std::string& x_name, const std::string& y_name, bool required) {
  const auto x = arrays.find(x_name);
  const auto y = arrays.find(y_name);
  Pair p;
  if (x == arrays.end() && y == arrays.end() && !required) return p;
  for (const std::string& name : {x_name, y_name}) {
    if (arrays.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(o.path, " has no array '", name, "' (it has: ", Names(arrays), ")"));
    }
  }
  const std::string what_x = absl::StrCat(o.path, ": ", x_name);
  PSC_RETURN_IF_ERROR(CheckExamples(x->second, ExampleShape(o), what_x));
  PSC_RETURN_IF_ERROR(CheckFinite(x->second, what_x));
  const std::string what_y = absl::StrCat(o.path, ": ", y_name);
  if (o.target_width > 0) {
    PSC_ASSIGN_OR_RETURN(p.targets, TargetsFromArray(y->second, o.target_width, what_y));
    p.labels.assign(p.targets.size() / o.target_width, 0);
  } else {
    PSC_ASSIGN_OR_RETURN(p.labels, o.binary_labels ? BinaryLabelsFromArray(y->second, what_y)
                                                   : LabelsFromArray(y->second, o.classes, what_y));
  }
  const int64_t n = x->second.header().shape[0];
  if (static_cast<int64_t>(p.labels.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(o.path, ": ", x_name, " has ", n,
                                                   " examples but ", y_name, " has ",
                                                   p.labels.size(), " labels"));
  }
  p.x = &x->second;
  return p;
}

// A split's example geometry for the options.
void Geometry(const NumpyDatasetOptions& o, Split* s) {
  // (H, W, C) images; (steps, features) sequences as one row of steps;
  // (features,) as one row of features.
  const std::vector<int64_t> e = ExampleShape(o);
  s->height = e.size() == 3 ? static_cast<int>(e[0]) : 1;
  s->width = static_cast<int>(e.size() == 3 ? e[1] : e[0]);
  s->channels = e.size() >= 2 ? static_cast<int>(e.back()) : 1;
}

Split Slice(const NumpyArray& x, const Pair& y, const std::vector<float>& weights, int64_t begin,
            int64_t end, const NumpyDatasetOptions& o, const Preprocessing& pre) {
  const std::vector<int32_t>& labels = y.labels;
  Split s;
  Geometry(o, &s);
  s.count = end - begin;
  s.array = x;  // shares the storage
  s.array_first = begin;
  s.preprocessing = pre;
  s.labels.assign(labels.begin() + begin, labels.begin() + end);
  if (!weights.empty()) s.weights.assign(weights.begin() + begin, weights.begin() + end);
  if (o.target_width > 0) {
    s.target_width = o.target_width;
    s.targets.assign(y.targets.begin() + begin * o.target_width,
                     y.targets.begin() + end * o.target_width);
  }
  return s;
}

}  // namespace

absl::StatusOr<FashionMnist> LoadNumpyDataset(const NumpyDatasetOptions& o) {
  if (!(o.validation_split >= 0 && o.validation_split < 1) || o.max_train_examples < 0) {
    return absl::InvalidArgumentError(absl::StrCat("validation_split ", o.validation_split,
                                                   " must be in [0, 1) and max_train_examples ",
                                                   o.max_train_examples, " >= 0"));
  }
  PSC_ASSIGN_OR_RETURN(Arrays arrays, ReadNpzFile(o.path));
  return DatasetFromArrays(std::move(arrays), o);
}

absl::StatusOr<FashionMnist> DatasetFromArrays(std::map<std::string, NumpyArray> arrays,
                                               const NumpyDatasetOptions& o) {
  if (!(o.validation_split >= 0 && o.validation_split < 1) || o.max_train_examples < 0) {
    return absl::InvalidArgumentError(absl::StrCat("validation_split ", o.validation_split,
                                                   " must be in [0, 1) and max_train_examples ",
                                                   o.max_train_examples, " >= 0"));
  }
  if (!o.inputs.empty()) {
    if (o.preprocessing != Preprocessing::Kind::kNone) {
      return absl::InvalidArgumentError(absl::StrCat(
          o.path, ": a model of several inputs reads its arrays as they are (no preprocessing)"));
    }
    // Each split's x is its inputs' arrays packed, under the x name.
    for (const std::string* x : {&o.x_train, &o.x_val, &o.x_test}) {
      absl::StatusOr<NumpyArray> packed = PackInputs(arrays, *x, o.inputs, o.path);
      if (absl::IsNotFound(packed.status())) {  // an optional split, or no training arrays
        if (x != &o.x_train) continue;
        return absl::InvalidArgumentError(packed.status().message());
      }
      PSC_RETURN_IF_ERROR(packed.status());
      arrays.insert_or_assign(*x, *std::move(packed));
    }
  }
  PSC_ASSIGN_OR_RETURN(Pair train, LoadPair(arrays, o, o.x_train, o.y_train, true));
  PSC_ASSIGN_OR_RETURN(Pair val, LoadPair(arrays, o, o.x_val, o.y_val, false));
  PSC_ASSIGN_OR_RETURN(Pair test, LoadPair(arrays, o, o.x_test, o.y_test, false));
  const int64_t n = static_cast<int64_t>(train.labels.size());
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(o.path, ": ", o.x_train, " holds no examples"));
  }
  std::vector<float> weights;
  if (!o.sample_weight.empty()) {
    const auto w = arrays.find(o.sample_weight);
    if (w == arrays.end()) {
      return absl::InvalidArgumentError(absl::StrCat(o.path, " has no array '", o.sample_weight,
                                                     "' (it has: ", Names(arrays), ")"));
    }
    PSC_ASSIGN_OR_RETURN(weights,
                         WeightsFromArray(w->second, absl::StrCat(o.path, ": ", o.sample_weight)));
    if (static_cast<int64_t>(weights.size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat(o.path, ": ", o.sample_weight, " has ",
                                                     weights.size(), " weights for the ", n,
                                                     " examples of ", o.x_train));
    }
  }
  // Keras's fit: the validation rows are the LAST ones, from
  // floor(n * (1 - validation_split)) on, taken before any shuffling.
  const int64_t split_at =
      val.x == nullptr ? static_cast<int64_t>(std::floor(n * (1.0 - o.validation_split))) : n;
  if (split_at <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(o.path, ": validation_split ",
                                                   o.validation_split, " of ", n,
                                                   " examples leaves none to train on"));
  }
  const int64_t begin = 0;
  const int64_t end =
      o.max_train_examples > 0 ? std::min(split_at, o.max_train_examples) : split_at;
  PSC_ASSIGN_OR_RETURN(Preprocessing pre,
                       FitPreprocessing(*train.x, begin, end - begin, o.preprocessing, o.rescale,
                                        absl::StrCat(o.path, ": ", o.x_train),
                                        o.standardize_per_feature ? ExampleShape(o).back() : 0));
  FashionMnist out;
  if (pre.kind == Preprocessing::Kind::kStandardize) {
    out.mean = pre.mean;
    out.std = pre.std;
  }
  out.train = Slice(*train.x, train, weights, begin, end, o, pre);
  if (val.x != nullptr) {
    out.validation = Slice(*val.x, val, {}, 0, static_cast<int64_t>(val.labels.size()), o, pre);
  } else {
    out.validation = Slice(*train.x, train, weights, split_at, n, o, pre);
  }
  if (test.x != nullptr) {
    out.test = Slice(*test.x, test, {}, 0, static_cast<int64_t>(test.labels.size()), o, pre);
  } else {
    Geometry(o, &out.test);
  }
  return out;
}

}  // namespace psc::data
