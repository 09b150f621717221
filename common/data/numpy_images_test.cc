#include "common/data/numpy_images.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/data/dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::data {
namespace {

using ::testing::HasSubstr;
using Kind = Preprocessing::Kind;

template <typename T>
NumpyArray Array(NpyType type, std::vector<int64_t> shape, const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  auto a = NumpyArray::FromElements(type, std::move(shape), std::move(bytes));
  EXPECT_TRUE(a.ok()) << a.status();
  return *std::move(a);
}

TEST(NumpyImagesTest, ExampleShapesAsAModelTakesThem) {
  const std::vector<uint8_t> px(2 * 28 * 28, 3);
  EXPECT_TRUE(CheckExamples(Array(NpyType::kUint8, {2, 28, 28}, px), {28, 28, 1}, "x").ok());
  EXPECT_TRUE(CheckExamples(Array(NpyType::kUint8, {2, 28, 28, 1}, px), {28, 28, 1}, "x").ok());
  EXPECT_TRUE(CheckExamples(Array(NpyType::kUint8, {2, 784}, px), {784}, "x").ok());
  // A (28, 28) input (a sequence of 28 steps of 28, or Flatten's) takes
  // (N, 28, 28) and, as Keras squeezes them, (N, 28, 28, 1) arrays.
  EXPECT_TRUE(CheckExamples(Array(NpyType::kUint8, {2, 28, 28}, px), {28, 28}, "x").ok());
  EXPECT_TRUE(CheckExamples(Array(NpyType::kUint8, {2, 28, 28, 1}, px), {28, 28}, "x").ok());
  EXPECT_FALSE(CheckExamples(Array(NpyType::kUint8, {2, 28, 14, 2}, px), {28, 28}, "x").ok());
  const absl::Status flat =
      CheckExamples(Array(NpyType::kUint8, {2, 784}, px), {28, 28, 1}, "d.npz: x_train");
  EXPECT_EQ(flat.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(flat.message(),
              HasSubstr("d.npz: x_train: examples of shape (784) for a model whose input is "
                        "(28, 28, 1)"));
  const absl::Status f64 =
      CheckExamples(Array<double>(NpyType::kFloat64, {1, 2}, {1, 2}), {2}, "x");
  EXPECT_THAT(f64.message(), HasSubstr("float64 inputs; want uint8 or float32"));
  EXPECT_EQ(ExampleElements(Array(NpyType::kUint8, {2, 28, 28}, px)), 784);
}

// The same pixels from an .npz and from the IDX files give the same mean,
// std and floats, bit for bit.
TEST(NumpyImagesTest, StandardizesExactlyAsTheFashionMnistLoader) {
  DatasetOptions o;
  o.max_train_examples = 3000;
  auto fm = LoadFashionMnist(o);
  ASSERT_TRUE(fm.ok()) << fm.status();
  const Split& train = fm->train;
  auto x = NumpyArray::FromElements(
      NpyType::kUint8, {train.count, train.height, train.width},
      std::string(reinterpret_cast<const char*>(train.pixels.data()), train.pixels.size()));
  ASSERT_TRUE(x.ok());
  auto p = FitPreprocessing(*x, Kind::kStandardize, 1, "x_train");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mean, fm->mean);
  EXPECT_EQ(p->std, fm->std);
  std::vector<float> ours(5 * 784), theirs(5 * 784);
  ReadExamples(*x, *p, 17, 5, ours.data());
  train.Standardize(17, 5, theirs.data());
  EXPECT_EQ(ours, theirs);
  EXPECT_THAT(p->Text(), HasSubstr("standardize (mean "));
}

TEST(NumpyImagesTest, FloatInputsRescaleAndNone) {
  const NumpyArray f = Array<float>(NpyType::kFloat32, {2, 2}, {1, 3, 5, 7});
  auto s = FitPreprocessing(f, Kind::kStandardize, 1, "x");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->mean, 4.0);
  EXPECT_DOUBLE_EQ(s->std, std::sqrt(5.0));
  std::vector<float> out(4);
  ReadExamples(f, *s, 0, 2, out.data());
  EXPECT_FLOAT_EQ(out[0], (1.0f - 4.0f) / static_cast<float>(std::sqrt(5.0)));
  const NumpyArray u = Array<uint8_t>(NpyType::kUint8, {1, 3}, {0, 51, 255});
  auto r = FitPreprocessing(u, Kind::kRescale, 1.0 / 255, "x");
  ASSERT_TRUE(r.ok());
  std::vector<float> scaled(3);
  ReadExamples(u, *r, 0, 1, scaled.data());
  EXPECT_EQ(scaled[0], 0.0f);
  EXPECT_FLOAT_EQ(scaled[1], 0.2f);
  EXPECT_FLOAT_EQ(scaled[2], 1.0f);
  auto none = FitPreprocessing(f, Kind::kNone, 1, "x");
  ASSERT_TRUE(none.ok());
  ReadExamples(f, *none, 1, 1, out.data());
  EXPECT_EQ(out[0], 5.0f);
  EXPECT_EQ(out[1], 7.0f);
  // All equal: std 1, as StandardScaler does for a zero variance.
  auto flat =
      FitPreprocessing(Array<uint8_t>(NpyType::kUint8, {2, 1}, {9, 9}), Kind::kStandardize, 1, "x");
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->std, 1.0);
}

TEST(NumpyImagesTest, BadPreprocessingIsInvalidArgument) {
  const NumpyArray f =
      Array<float>(NpyType::kFloat32, {1, 2}, {1.0f, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_THAT(FitPreprocessing(f, Kind::kStandardize, 1, "x").status().message(),
              HasSubstr("x row 0 is nan"));
  EXPECT_EQ(FitPreprocessing(f, Kind::kRescale, 0, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitPreprocessing(f, Kind::kRescale, std::nan(""), "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      FitPreprocessing(Array<uint8_t>(NpyType::kUint8, {0, 4}, {}), Kind::kStandardize, 1, "x")
          .status()
          .message(),
      HasSubstr("nothing to standardize on"));
}

}  // namespace
// Per feature (the last axis), as scikit-learn's StandardScaler: each
// column its own population mean and std; a constant column's std is 1.
TEST(NumpyImagesTest, StandardizePerFeatureFitsEachColumn) {
  const NumpyArray x =
      Array<float>(NpyType::kFloat32, {4, 3}, {1, 10, 5, 3, 20, 5, 5, 30, 5, 7, 40, 5});
  auto p = FitPreprocessing(x, 0, 4, Kind::kStandardize, 1, "x", /*features=*/3);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->feature_mean, (std::vector<double>{4, 25, 5}));
  EXPECT_DOUBLE_EQ(p->feature_std[0], std::sqrt(5.0));
  EXPECT_DOUBLE_EQ(p->feature_std[1], std::sqrt(125.0));
  EXPECT_EQ(p->feature_std[2], 1.0);
  std::vector<float> out(6);
  ReadExamples(x, *p, 2, 2, out.data());
  EXPECT_FLOAT_EQ(out[0], (5 - 4) / static_cast<float>(std::sqrt(5.0)));
  EXPECT_FLOAT_EQ(out[1], (30 - 25) / static_cast<float>(std::sqrt(125.0)));
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], Preprocess(*p, 7, 0));
  // uint8 the same way; a count that does not divide an example is refused.
  const NumpyArray u = Array<uint8_t>(NpyType::kUint8, {2, 2}, {0, 4, 2, 4});
  auto pu = FitPreprocessing(u, 0, 2, Kind::kStandardize, 1, "u", 2);
  ASSERT_TRUE(pu.ok());
  EXPECT_EQ(pu->feature_mean, (std::vector<double>{1, 4}));
  EXPECT_FALSE(FitPreprocessing(x, 0, 4, Kind::kStandardize, 1, "x", 2).ok());
}

}  // namespace psc::data
