#include "common/data/dataset.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/data/idx_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::data {
namespace {

using ::testing::HasSubstr;

constexpr char kRealDataDir[] = "/usr/share/datasets/fashion-mnist";

// Every pixel of `split`, standardized.
std::vector<float> Floats(const Split& split) {
  std::vector<float> out(split.pixels.size());
  split.Standardize(0, split.count, out.data());
  return out;
}

struct Moments {
  double mean;
  double std;
};

Moments MomentsOf(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  double squares = 0;
  for (float x : v) squares += (x - mean) * (x - mean);
  return {mean, std::sqrt(squares / static_cast<double>(v.size()))};
}

bool DirExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Loads the real data once for the whole suite.
class RealFashionMnistTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!DirExists(kRealDataDir)) return;
    const absl::Time start = absl::Now();
    absl::StatusOr<FashionMnist> loaded = LoadFashionMnist(DatasetOptions{});
    load_time_ = new absl::Duration(absl::Now() - start);
    if (loaded.ok()) {
      data_ = new FashionMnist(*std::move(loaded));
    } else {
      load_status_ = new absl::Status(loaded.status());
    }
  }
  static void TearDownTestSuite() {
    delete data_;
    delete load_status_;
    delete load_time_;
    data_ = nullptr;
    load_status_ = nullptr;
    load_time_ = nullptr;
  }
  void SetUp() override {
    if (!DirExists(kRealDataDir)) {
      GTEST_SKIP() << kRealDataDir << " is absent: apt-get install dataset-fashion-mnist";
    }
    ASSERT_EQ(load_status_, nullptr) << *load_status_;
    ASSERT_NE(data_, nullptr);
    RecordProperty("load_ms", static_cast<int>(absl::ToInt64Milliseconds(*load_time_)));
  }

  static FashionMnist* data_;
  static absl::Status* load_status_;
  static absl::Duration* load_time_;
};

FashionMnist* RealFashionMnistTest::data_ = nullptr;
absl::Status* RealFashionMnistTest::load_status_ = nullptr;
absl::Duration* RealFashionMnistTest::load_time_ = nullptr;

TEST_F(RealFashionMnistTest, SplitSizes) {
  for (const Split* s : {&data_->train, &data_->validation, &data_->test}) {
    EXPECT_EQ(s->height, 28);
    EXPECT_EQ(s->width, 28);
    EXPECT_EQ(s->pixels.size(), static_cast<size_t>(s->count * 28 * 28));
    EXPECT_EQ(s->labels.size(), static_cast<size_t>(s->count));
  }
  EXPECT_EQ(data_->train.count, 55000);
  EXPECT_EQ(data_->validation.count, 5000);
  EXPECT_EQ(data_->test.count, 10000);
}

TEST_F(RealFashionMnistTest, MeanAndStdMatchTheAnchors) {
  EXPECT_NEAR(data_->mean, 72.9379, 1e-3);
  EXPECT_NEAR(data_->std, 89.9897, 1e-3);
}

TEST_F(RealFashionMnistTest, StandardizedTrainingPixelsHaveZeroMeanAndUnitStd) {
  const Moments m = MomentsOf(Floats(data_->train));
  EXPECT_NEAR(m.mean, 0.0, 1e-3);
  EXPECT_NEAR(m.std, 1.0, 1e-3);
}

TEST_F(RealFashionMnistTest, LabelsAreInRangeAndAllClassesOccur) {
  for (const Split* s : {&data_->train, &data_->validation, &data_->test}) {
    std::vector<int64_t> per_class(10, 0);
    for (int32_t label : s->labels) {
      ASSERT_GE(label, 0);
      ASSERT_LE(label, 9);
      ++per_class[label];
    }
    for (int c = 0; c < 10; ++c) EXPECT_GT(per_class[c], 0) << "class " << c;
  }
  // The test split of Fashion-MNIST is balanced: 1000 per class.
  std::vector<int64_t> test_per_class(10, 0);
  for (int32_t label : data_->test.labels) ++test_per_class[label];
  EXPECT_EQ(test_per_class, std::vector<int64_t>(10, 1000));
}

TEST_F(RealFashionMnistTest, ValidationIsTheFirstTrainingImages) {
  absl::StatusOr<IdxArray> raw =
      ReadIdxFile(std::string(kRealDataDir) + "/train-images-idx3-ubyte.gz");
  ASSERT_TRUE(raw.ok()) << raw.status();
  const float mean = static_cast<float>(data_->mean);
  const float scale = static_cast<float>(data_->std);
  const int64_t pixels = 28 * 28;
  for (int64_t p = 0; p < 2 * pixels; ++p) {
    // Validation examples 0 and 1 are training images 0 and 1.
    EXPECT_EQ(data_->validation.Pixel(p), (static_cast<float>(raw->data[p]) - mean) / scale);
    // Training example 0 is training image 5000.
    EXPECT_EQ(data_->train.Pixel(p),
              (static_cast<float>(raw->data[5000 * pixels + p]) - mean) / scale);
  }
}

TEST_F(RealFashionMnistTest, SubsetRefitsMeanAndStd) {
  DatasetOptions options;
  options.max_train_examples = 6400;
  absl::StatusOr<FashionMnist> subset = LoadFashionMnist(options);
  ASSERT_TRUE(subset.ok()) << subset.status();
  EXPECT_EQ(subset->train.count, 6400);
  EXPECT_EQ(subset->validation.count, 5000);
  EXPECT_EQ(subset->test.count, 10000);
  EXPECT_GT(std::abs(subset->mean - data_->mean), 1e-3);
  const Moments m = MomentsOf(Floats(subset->train));
  EXPECT_NEAR(m.mean, 0.0, 1e-3);
  EXPECT_NEAR(m.std, 1.0, 1e-3);
  // Same examples as the first 6400 of the full training split.
  EXPECT_EQ(std::vector<int32_t>(data_->train.labels.begin(), data_->train.labels.begin() + 6400),
            subset->train.labels);
}

// A small dataset in a temporary directory.
class SmallDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "dataset_test_" + info->name();
    mkdir(dir_.c_str(), 0755);
    for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
      unlink((dir_ + "/" + name).c_str());
      unlink((dir_ + "/" + name + ".gz").c_str());
    }
    options_.data_dir = dir_;
    options_.validation_examples = 2;
  }

  // Writes an IDX file named `name` (gzip-compressed if it ends in .gz).
  void Write(const std::string& name, const std::vector<uint32_t>& dims,
             const std::vector<uint8_t>& data) {
    std::string bytes = {0, 0, 8, static_cast<char>(dims.size())};
    for (uint32_t d : dims) {
      for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(d >> shift));
    }
    bytes.append(data.begin(), data.end());
    const std::string path = dir_ + "/" + name;
    if (name.size() > 3 && name.substr(name.size() - 3) == ".gz") {
      gzFile f = gzopen(path.c_str(), "wb");
      ASSERT_NE(f, nullptr);
      ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
                static_cast<int>(bytes.size()));
      ASSERT_EQ(gzclose(f), Z_OK);
    } else {
      std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    }
  }

  static std::vector<uint8_t> Pixels(int n) {
    std::vector<uint8_t> v(n);
    for (int i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 37) % 256);
    return v;
  }
  static std::vector<uint8_t> Labels(int n) {
    std::vector<uint8_t> v(n);
    for (int i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i % 10);
    return v;
  }

  // 8 training and 3 test images of 3x2 pixels, gzip'd (suffix ".gz") or raw (suffix "").
  void WriteAll(const std::string& suffix) {
    Write("train-images-idx3-ubyte" + suffix, {8, 3, 2}, Pixels(48));
    Write("train-labels-idx1-ubyte" + suffix, {8}, Labels(8));
    Write("t10k-images-idx3-ubyte" + suffix, {3, 3, 2}, Pixels(18));
    Write("t10k-labels-idx1-ubyte" + suffix, {3}, Labels(3));
  }

  void ExpectError(absl::StatusCode code, const std::string& fragment1,
                   const std::string& fragment2 = "") {
    absl::StatusOr<FashionMnist> d = LoadFashionMnist(options_);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), code) << d.status();
    EXPECT_THAT(d.status().message(), HasSubstr(fragment1));
    EXPECT_THAT(d.status().message(), HasSubstr(fragment2));
  }

  std::string dir_;
  DatasetOptions options_;
};

TEST_F(SmallDatasetTest, LoadsGzipFilesAndStandardizes) {
  WriteAll(".gz");
  absl::StatusOr<FashionMnist> d = LoadFashionMnist(options_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->validation.count, 2);
  EXPECT_EQ(d->train.count, 6);
  EXPECT_EQ(d->test.count, 3);
  EXPECT_EQ(d->train.height, 3);
  EXPECT_EQ(d->train.width, 2);
  EXPECT_EQ(d->train.labels, (std::vector<int32_t>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(d->validation.labels, (std::vector<int32_t>{0, 1}));

  // Mean and population std of training pixels 12..47, in double.
  const std::vector<uint8_t> raw = Pixels(48);
  double sum = 0;
  for (int i = 12; i < 48; ++i) sum += raw[i];
  const double mean = sum / 36;
  double squares = 0;
  for (int i = 12; i < 48; ++i) squares += (raw[i] - mean) * (raw[i] - mean);
  const double sd = std::sqrt(squares / 36);
  EXPECT_NEAR(d->mean, mean, 1e-12);
  EXPECT_NEAR(d->std, sd, 1e-12);
  for (int i = 0; i < 36; ++i) {
    EXPECT_EQ(d->train.Pixel(i), (static_cast<float>(raw[12 + i]) - static_cast<float>(mean)) /
                                     static_cast<float>(sd));
  }
  EXPECT_EQ(d->validation.Pixel(0), (0.0f - static_cast<float>(mean)) / static_cast<float>(sd));
  EXPECT_EQ(d->test.Pixel(1),
            (static_cast<float>(raw[1]) - static_cast<float>(mean)) / static_cast<float>(sd));
}

TEST_F(SmallDatasetTest, ReadsUncompressedFilesWhenGzipIsAbsent) {
  WriteAll("");
  absl::StatusOr<FashionMnist> raw = LoadFashionMnist(options_);
  ASSERT_TRUE(raw.ok()) << raw.status();
  WriteAll(".gz");
  absl::StatusOr<FashionMnist> gz = LoadFashionMnist(options_);
  ASSERT_TRUE(gz.ok()) << gz.status();
  EXPECT_EQ(raw->train.pixels, gz->train.pixels);
  EXPECT_EQ(raw->train.table, gz->train.table);
  EXPECT_EQ(raw->test.labels, gz->test.labels);
  EXPECT_EQ(raw->mean, gz->mean);
}

TEST_F(SmallDatasetTest, PrefersTheGzipFile) {
  WriteAll(".gz");
  // A raw file that would fail if it were read.
  Write("train-labels-idx1-ubyte", {8}, std::vector<uint8_t>(8, 12));
  absl::StatusOr<FashionMnist> d = LoadFashionMnist(options_);
  EXPECT_TRUE(d.ok()) << d.status();
}

TEST_F(SmallDatasetTest, MaxTrainExamplesKeepsTheFirstOnes) {
  WriteAll(".gz");
  options_.max_train_examples = 4;
  absl::StatusOr<FashionMnist> d = LoadFashionMnist(options_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.count, 4);
  EXPECT_EQ(d->train.labels, (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(d->train.pixels.size(), 24u);
  const Moments m = MomentsOf(Floats(d->train));
  EXPECT_NEAR(m.mean, 0.0, 1e-6);
  EXPECT_NEAR(m.std, 1.0, 1e-6);

  options_.max_train_examples = 1000;  // More than there are: all of them.
  d = LoadFashionMnist(options_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.count, 6);
}

TEST_F(SmallDatasetTest, NoValidationExamples) {
  WriteAll(".gz");
  options_.validation_examples = 0;
  absl::StatusOr<FashionMnist> d = LoadFashionMnist(options_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->validation.count, 0);
  EXPECT_TRUE(d->validation.pixels.empty());
  EXPECT_EQ(d->train.count, 8);
}

TEST_F(SmallDatasetTest, ConstantImagesUseStdOne) {
  Write("train-images-idx3-ubyte.gz", {8, 3, 2}, std::vector<uint8_t>(48, 9));
  Write("train-labels-idx1-ubyte.gz", {8}, Labels(8));
  Write("t10k-images-idx3-ubyte.gz", {3, 3, 2}, Pixels(18));
  Write("t10k-labels-idx1-ubyte.gz", {3}, Labels(3));
  absl::StatusOr<FashionMnist> d = LoadFashionMnist(options_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->mean, 9.0);
  EXPECT_EQ(d->std, 1.0);
  EXPECT_EQ(d->train.Pixel(0), 0.0f);
}

TEST_F(SmallDatasetTest, MismatchedCountsAreInvalid) {
  WriteAll(".gz");
  Write("train-labels-idx1-ubyte.gz", {7}, Labels(7));
  ExpectError(absl::StatusCode::kInvalidArgument,
              dir_ + "/train-images-idx3-ubyte.gz has 8 images but " + dir_ +
                  "/train-labels-idx1-ubyte.gz has 7 labels");
}

TEST_F(SmallDatasetTest, MissingFileIsNotFoundAndNamed) {
  WriteAll(".gz");
  unlink((dir_ + "/t10k-labels-idx1-ubyte.gz").c_str());
  ExpectError(absl::StatusCode::kNotFound, dir_ + "/t10k-labels-idx1-ubyte.gz");
}

TEST_F(SmallDatasetTest, LabelAboveNineIsInvalid) {
  WriteAll(".gz");
  std::vector<uint8_t> labels = Labels(3);
  labels[2] = 12;
  Write("t10k-labels-idx1-ubyte.gz", {3}, labels);
  ExpectError(absl::StatusCode::kInvalidArgument, dir_ + "/t10k-labels-idx1-ubyte.gz",
              "label 2 is 12");
}

TEST_F(SmallDatasetTest, ImagesThatAreNotThreeDimensionalAreInvalid) {
  WriteAll(".gz");
  Write("train-images-idx3-ubyte.gz", {8, 6}, Pixels(48));
  ExpectError(absl::StatusCode::kInvalidArgument, dir_ + "/train-images-idx3-ubyte.gz",
              "must be 3-D");
}

TEST_F(SmallDatasetTest, LabelsThatAreNotOneDimensionalAreInvalid) {
  WriteAll(".gz");
  Write("train-labels-idx1-ubyte.gz", {8, 1}, Labels(8));
  ExpectError(absl::StatusCode::kInvalidArgument, dir_ + "/train-labels-idx1-ubyte.gz",
              "must be 1-D");
}

TEST_F(SmallDatasetTest, TestImagesOfAnotherSizeAreInvalid) {
  WriteAll(".gz");
  Write("t10k-images-idx3-ubyte.gz", {3, 2, 3}, Pixels(18));
  ExpectError(absl::StatusCode::kInvalidArgument, dir_ + "/t10k-images-idx3-ubyte.gz",
              "holds 2x3 images");
}

TEST_F(SmallDatasetTest, CorruptFileErrorNamesTheFile) {
  WriteAll(".gz");
  std::ofstream(dir_ + "/t10k-images-idx3-ubyte.gz", std::ios::binary | std::ios::trunc) << "xx";
  ExpectError(absl::StatusCode::kInvalidArgument, dir_ + "/t10k-images-idx3-ubyte.gz",
              "header too short");
}

TEST_F(SmallDatasetTest, ValidationExamplesMustLeaveTrainingExamples) {
  WriteAll(".gz");
  options_.validation_examples = 8;
  ExpectError(absl::StatusCode::kInvalidArgument, "validation_examples 8",
              dir_ + "/train-images-idx3-ubyte.gz has 8 images");
}

TEST_F(SmallDatasetTest, NegativeOptionsAreInvalid) {
  WriteAll(".gz");
  options_.validation_examples = -1;
  ExpectError(absl::StatusCode::kInvalidArgument, "validation_examples -1");
  options_.validation_examples = 0;
  options_.max_train_examples = -5;
  ExpectError(absl::StatusCode::kInvalidArgument, "max_train_examples -5");
}

TEST_F(SmallDatasetTest, MissingDataDirIsNotFoundWithAHint) {
  options_.data_dir = dir_ + "/no_such_dir";
  ExpectError(absl::StatusCode::kNotFound, dir_ + "/no_such_dir",
              "apt-get install dataset-fashion-mnist");
}

}  // namespace
}  // namespace psc::data
