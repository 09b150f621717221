// An .npz made from the first Fashion-MNIST images loads into the same
// splits, bit for bit, as the IDX files do with the matching options.
#include "common/data/numpy_dataset.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "common/data/npy.h"
#include "common/data/npz_test_util.h"
#include "common/data/prefetcher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::data {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::string Npy(NpyType type, const std::vector<int64_t>& shape, const T* data, size_t n) {
  return testing::NpyBytes(type, shape, data, n * sizeof(T));
}

std::string WriteNpz(const std::string& name, const std::vector<testing::NpzMember>& members) {
  const std::string path =
      (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()) + ".npz"))
          .string();
  testing::WriteNpz(path, members);
  return path;
}

void ExpectSameSplit(const Split& a, const Split& b, int64_t count) {
  ASSERT_GE(a.count, count);
  ASSERT_GE(b.count, count);
  ASSERT_EQ(a.pixels_per_example(), b.pixels_per_example());
  std::vector<float> fa(count * a.pixels_per_example()), fb(fa.size());
  a.Standardize(0, count, fa.data());
  b.Standardize(0, count, fb.data());
  EXPECT_EQ(fa, fb);
  EXPECT_EQ(std::vector<int32_t>(a.labels.begin(), a.labels.begin() + count),
            std::vector<int32_t>(b.labels.begin(), b.labels.begin() + count));
}

TEST(NumpyDatasetTest, AnNpzOfFashionMnistLoadsAsTheIdxFilesDo) {
  DatasetOptions raw;
  raw.validation_examples = 0;
  raw.max_train_examples = 4000;
  auto fm = LoadFashionMnist(raw);
  ASSERT_TRUE(fm.ok()) << fm.status();
  // x_train: the IDX rows 1,000..3,999, then 0..999, so that Keras's
  // validation split (the LAST quarter) holds what the IDX loader holds out
  // (its first 1,000).
  std::vector<uint8_t> x_train(fm->train.pixels.begin() + 1000 * 784, fm->train.pixels.end());
  x_train.insert(x_train.end(), fm->train.pixels.begin(), fm->train.pixels.begin() + 1000 * 784);
  std::vector<uint8_t> y_train(fm->train.labels.begin() + 1000, fm->train.labels.end());
  y_train.insert(y_train.end(), fm->train.labels.begin(), fm->train.labels.begin() + 1000);
  std::vector<int64_t> y_test(fm->test.labels.begin(), fm->test.labels.begin() + 1000);
  const std::string path = WriteNpz(
      "fashion",
      {{"x_train.npy", Npy(NpyType::kUint8, {4000, 28, 28}, x_train.data(), 4000 * 784)},
       {"y_train.npy", Npy(NpyType::kUint8, {4000}, y_train.data(), 4000), /*deflate=*/true},
       {"x_test.npy", Npy(NpyType::kUint8, {1000, 28, 28, 1}, fm->test.pixels.data(), 1000 * 784)},
       {"y_test.npy", Npy(NpyType::kInt64, {1000}, y_test.data(), 1000)}});

  NumpyDatasetOptions o;
  o.path = path;
  o.validation_split = 0.25;  // the last 1,000
  auto npz = LoadNumpyDataset(o);
  ASSERT_TRUE(npz.ok()) << npz.status();
  DatasetOptions idx;
  idx.validation_examples = 1000;
  idx.max_train_examples = 3000;
  auto want = LoadFashionMnist(idx);
  ASSERT_TRUE(want.ok()) << want.status();

  EXPECT_EQ(npz->mean, want->mean);
  EXPECT_EQ(npz->std, want->std);
  EXPECT_EQ(npz->train.count, 3000);
  EXPECT_EQ(npz->validation.count, 1000);
  EXPECT_EQ(npz->test.count, 1000);
  EXPECT_TRUE(npz->train.array->mapped());  // stored: the file's pages, not a copy
  ExpectSameSplit(npz->train, want->train, 3000);
  ExpectSameSplit(npz->validation, want->validation, 1000);
  ExpectSameSplit(npz->test, want->test, 1000);
  // Batches gather the same examples.
  auto a = GatherBatch(npz->train, {5, 2999, 17}, 0);
  auto b = GatherBatch(want->train, {5, 2999, 17}, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(a->images, b->images);
  EXPECT_EQ(a->labels, b->labels);
  // Rescale instead, and a training subset.
  o.preprocessing = Preprocessing::Kind::kRescale;
  o.max_train_examples = 100;
  auto rescaled = LoadNumpyDataset(o);
  ASSERT_TRUE(rescaled.ok()) << rescaled.status();
  EXPECT_EQ(rescaled->train.count, 100);
  std::vector<float> first(784);
  rescaled->train.Standardize(0, 1, first.data());
  EXPECT_EQ(first[400], static_cast<float>(fm->train.pixels[1000 * 784 + 400]) * (1.0f / 255));
  std::filesystem::remove(path);
}

TEST(NumpyDatasetTest, BadArchivesNameTheArrayAndWhatIsWrong) {
  const std::vector<uint8_t> px(4 * 784, 1);
  const std::vector<uint8_t> y = {0, 1, 2, 3};
  auto load = [](const std::string& path, double split = 0) {
    NumpyDatasetOptions o;
    o.path = path;
    o.validation_split = split;
    return LoadNumpyDataset(o);
  };
  auto bad = [](const absl::StatusOr<FashionMnist>& r, const std::string& want) {
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(want)) << r.status();
  };
  const std::string x_ok = Npy(NpyType::kUint8, {4, 28, 28}, px.data(), px.size());
  const std::string y_ok = Npy(NpyType::kUint8, {4}, y.data(), 4);
  std::string p = WriteNpz("missing", {{"images.npy", x_ok}, {"labels.npy", y_ok}});
  bad(load(p), "has no array 'x_train' (it has: images, labels)");
  p = WriteNpz("val", {{"x_train.npy", x_ok}, {"y_train.npy", y_ok}, {"x_val.npy", x_ok}});
  bad(load(p), "has no array 'y_val'");
  p = WriteNpz("flat", {{"x_train.npy", Npy(NpyType::kUint8, {4, 784}, px.data(), px.size())},
                        {"y_train.npy", y_ok}});
  bad(load(p), "x_train: examples of shape (784) for a model whose input is (28, 28, 1)");
  p = WriteNpz("short",
               {{"x_train.npy", x_ok}, {"y_train.npy", Npy(NpyType::kUint8, {3}, y.data(), 3)}});
  bad(load(p), "x_train has 4 examples but y_train has 3 labels");
  const std::vector<uint8_t> eleven = {0, 11, 2, 3};
  p = WriteNpz("range", {{"x_train.npy", x_ok},
                         {"y_train.npy", Npy(NpyType::kUint8, {4}, eleven.data(), 4)}});
  bad(load(p), "y_train: label 11 of example 1 is outside [0, 10)");
  p = WriteNpz("ok", {{"x_train.npy", x_ok}, {"y_train.npy", y_ok}});
  EXPECT_TRUE(load(p).ok());
  EXPECT_EQ(load(p)->validation.count, 0);
  bad(load(p, 1.0), "validation_split 1 must be in [0, 1)");
  // Keras's split: train = the first floor(4 * (1 - split)) rows.
  EXPECT_EQ(load(p, 0.5)->train.count, 2);
  EXPECT_EQ(load(p, 0.5)->validation.array_first, 2);
  EXPECT_EQ(load(p, 0.3)->train.count, 2);  // floor(2.8)
  bad(load(p, 0.99), "validation_split 0.99 of 4 examples leaves none to train on");
  // A non-finite input is refused at load, naming the row of the user's
  // array and the position in the example, whatever split the row is in.
  for (const float bad_value : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    std::vector<float> fx(4 * 784, 0.5f);
    fx[3 * 784 + 2 * 28 + 5] = bad_value;  // row 3, (2, 5)
    p = WriteNpz("nan", {{"x_train.npy", Npy(NpyType::kFloat32, {4, 28, 28}, fx.data(), fx.size())},
                         {"y_train.npy", y_ok}});
    bad(load(p, 0.5), std::isnan(bad_value)
                          ? "x_train row 3, element (2, 5) of the example, is nan"
                          : "x_train row 3, element (2, 5) of the example, is inf");
  }
  p = WriteNpz("empty", {{"x_train.npy", Npy(NpyType::kUint8, {0, 28, 28}, px.data(), 0)},
                         {"y_train.npy", Npy(NpyType::kUint8, {0}, y.data(), 0)}});
  bad(load(p), "x_train holds no examples");
  EXPECT_EQ(load("/nonexistent/d.npz").status().code(), absl::StatusCode::kNotFound);
  for (const char* name : {"missing", "val", "flat", "short", "range", "ok", "empty", "nan"}) {
    std::filesystem::remove(std::filesystem::temp_directory_path() /
                            (std::string(name) + "-" + std::to_string(getpid()) + ".npz"));
  }
}

// fit's sample_weight: split with x_train by validation_split (the last
// rows validate with their weights), gathered with each batch; x_val has
// none. Bad weights name the array and the row.
// A regression's float targets split with their rows (validation_split
// takes the last ones), and a batch gathers each example's row.
TEST(NumpyDatasetTest, RegressionTargetsFollowTheirRows) {
  const std::vector<uint8_t> px(4 * 784, 1);
  const std::vector<float> y = {0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f};
  NumpyDatasetOptions o;
  o.path =
      WriteNpz("targets", {{"x_train.npy", Npy(NpyType::kUint8, {4, 28, 28}, px.data(), px.size())},
                           {"y_train.npy", Npy(NpyType::kFloat32, {4, 2}, y.data(), 8)}});
  o.validation_split = 0.25;
  o.target_width = 2;
  auto d = LoadNumpyDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.count, 3);
  EXPECT_EQ(d->train.target_width, 2);
  EXPECT_EQ(d->train.targets, (std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f}));
  EXPECT_EQ(d->train.labels, (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(d->validation.targets, (std::vector<float>{3, 3.5f}));
  EXPECT_TRUE(d->train.Consistent());
  auto b = GatherBatch(d->train, {2, 0}, 0);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->targets, (std::vector<float>{2, 2.5f, 0, 0.5f}));
  // Targets that do not fit the output name the array.
  o.target_width = 3;
  auto bad = LoadNumpyDataset(o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("y_train: targets of shape (4, 2)"));
  std::filesystem::remove(o.path);
}

TEST(NumpyDatasetTest, SampleWeightsFollowTheirRows) {
  const std::vector<uint8_t> px(4 * 784, 1);
  const std::vector<uint8_t> y = {0, 1, 2, 3};
  const std::vector<double> w = {0.5, 1, 2, 4};
  const std::string x_ok = Npy(NpyType::kUint8, {4, 28, 28}, px.data(), px.size());
  const std::string y_ok = Npy(NpyType::kUint8, {4}, y.data(), 4);
  auto load = [](const std::string& path, double split, const std::string& weights) {
    NumpyDatasetOptions o;
    o.path = path;
    o.validation_split = split;
    o.sample_weight = weights;
    return LoadNumpyDataset(o);
  };
  std::string p = WriteNpz("weights", {{"x_train.npy", x_ok},
                                       {"y_train.npy", y_ok},
                                       {"sw.npy", Npy(NpyType::kFloat64, {4, 1}, w.data(), 4)},
                                       {"x_val.npy", x_ok},
                                       {"y_val.npy", y_ok}});
  auto d = load(p, 0, "sw");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.weights, (std::vector<float>{0.5f, 1, 2, 4}));
  EXPECT_TRUE(d->validation.weights.empty()) << "x_val has no weights";
  auto b = GatherBatch(d->train, {3, 0}, 0);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->weights, (std::vector<float>{4, 0.5f}));
  EXPECT_TRUE(load(p, 0, "").value().train.weights.empty());
  std::filesystem::remove(p);
  p = WriteNpz("wsplit", {{"x_train.npy", x_ok},
                          {"y_train.npy", y_ok},
                          {"sw.npy", Npy(NpyType::kFloat64, {4}, w.data(), 4)}});
  d = load(p, 0.5, "sw");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.weights, (std::vector<float>{0.5f, 1}));
  EXPECT_EQ(d->validation.weights, (std::vector<float>{2, 4}));
  auto bad = [](const absl::StatusOr<FashionMnist>& r, const std::string& want) {
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(want)) << r.status();
  };
  bad(load(p, 0.5, "weights"), "has no array 'weights' (it has: sw, x_train, y_train)");
  std::filesystem::remove(p);
  const std::vector<float> nan_w = {1, 1, std::nanf(""), 1};
  p = WriteNpz("wbad", {{"x_train.npy", x_ok},
                        {"y_train.npy", y_ok},
                        {"nan.npy", Npy(NpyType::kFloat32, {4}, nan_w.data(), 4)},
                        {"three.npy", Npy(NpyType::kFloat64, {3}, w.data(), 3)},
                        {"wide.npy", Npy(NpyType::kFloat64, {2, 2}, w.data(), 4)}});
  bad(load(p, 0, "nan"), "nan: the weight of row 2 is nan (weights must be finite)");
  bad(load(p, 0, "three"), "three has 3 weights for the 4 examples of x_train");
  bad(load(p, 0, "wide"), "sample weights of shape (2, 2) float64; want (N,) or (N, 1)");
  std::filesystem::remove(p);
}

// A dataset of several inputs: each split's arrays packed, validation_split
// taking the last rows; a preprocessing is refused.
TEST(PackedInputsTest, ADatasetOfSeveralInputsSplitsThePackedRows) {
  const std::vector<float> f = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::vector<float> g = {-1, -2, -3, -4, -5, -6, -7, -8};
  const std::vector<int64_t> y = {0, 1, 0, 1};
  NumpyDatasetOptions o;
  o.path = WriteNpz("packed", {{"x_train/f.npy", Npy(NpyType::kFloat32, {4, 3}, f.data(), 12)},
                               {"x_train/g.npy", Npy(NpyType::kFloat32, {4, 1, 2}, g.data(), 8)},
                               {"y_train.npy", Npy(NpyType::kInt64, {4}, y.data(), 4)}});
  o.validation_split = 0.25;
  o.classes = 2;
  o.example_shape = {5};
  o.inputs = {{"f", {3}, 0}, {"g", {1, 2, 1}, 3}};
  o.preprocessing = Preprocessing::Kind::kNone;
  auto d = LoadNumpyDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.count, 3);
  EXPECT_EQ(d->validation.count, 1);
  std::vector<float> row(5);
  d->validation.Standardize(0, 1, row.data());
  EXPECT_EQ(row, (std::vector<float>{10, 11, 12, -7, -8}));
  o.preprocessing = Preprocessing::Kind::kStandardize;
  EXPECT_THAT(LoadNumpyDataset(o).status().message(),
              HasSubstr("a model of several inputs reads its arrays as they are"));
  o.preprocessing = Preprocessing::Kind::kNone;
  o.x_train = "x_other";
  EXPECT_THAT(LoadNumpyDataset(o).status().message(),
              HasSubstr("has none of x_other/f, x_other/g"));
  std::filesystem::remove(o.path);
}

}  // namespace
}  // namespace psc::data
