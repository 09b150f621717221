#include "common/records/record_files.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/io/testing/scratch_dir.h"
#include "common/tfrecord/framing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/tf_example.pb.h"

namespace psc::records {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An Example of a 3-float "x", an int64 "y" and (unless < 0) a float "w".
std::string ExampleRecord(float base, int64_t y, float w = -1) {
  tfexample::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  for (int i = 0; i < 3; ++i) f["x"].mutable_float_list()->add_value(base + i);
  f["y"].mutable_int64_list()->add_value(y);
  if (w >= 0) f["w"].mutable_float_list()->add_value(w);
  return tfrecord::EncodeRecord(e.SerializeAsString());
}

constexpr char kXywSpec[] = R"({
  "inputs": {"x": {"kind": "float", "shape": [3]}},
  "label": {"feature": "y", "kind": "int64"},
  "weight": {"feature": "w", "kind": "float", "default": 1}})";

class RecordFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = ParseFeatureSpec(kXywSpec, "spec.json");
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto layout = ResolveLayout(*spec, {}, {3}, {5, 0}, "spec.json");
    ASSERT_TRUE(layout.ok()) << layout.status();
    layout_ = *layout;
  }

  std::string Write(const std::string& name, const std::string& bytes) {
    return dir_.Write(name, bytes);
  }

  static std::vector<float> Floats(const data::NumpyArray& a) {
    std::vector<float> v(a.header().count);
    std::memcpy(v.data(), a.data(), v.size() * 4);
    return v;
  }
  static std::vector<int64_t> Ints(const data::NumpyArray& a) {
    std::vector<int64_t> v(a.header().count);
    std::memcpy(v.data(), a.data(), v.size() * 8);
    return v;
  }

  io::testing::ScratchDir dir_{"record_files_test"};
  RowLayout layout_;
};

TEST_F(RecordFilesTest, ReadsTheFilesInOrderThroughTheSpec) {
  const std::string a = Write("a.tfrecord", ExampleRecord(0, 1, 0.5f) + ExampleRecord(10, 2));
  const std::string b = Write("b.tfrecord", ExampleRecord(20, 4, 2));
  auto read = ReadSplit(io::LocalFileSystem(), {a, b}, layout_, {}, "train");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->records, 3);
  EXPECT_EQ(read->skipped, 0);
  ASSERT_EQ(read->files.size(), 2u);
  EXPECT_EQ(read->files[0].records, 2);
  EXPECT_EQ(read->arrays.at("x_train").header().Text(), "(3, 3) float32");
  EXPECT_THAT(Floats(read->arrays.at("x_train")), ElementsAre(0, 1, 2, 10, 11, 12, 20, 21, 22));
  EXPECT_THAT(Ints(read->arrays.at("y_train")), ElementsAre(1, 2, 4));
  EXPECT_THAT(Floats(read->arrays.at("w_train")), ElementsAre(0.5, 1, 2)) << "the default: 1";
}

// A varlen feature a record lacks is an empty list (VarLenFeature's),
// padded; a list of features is for CSV, not TFRecord.
TEST_F(RecordFilesTest, AMissingVarlenFeatureIsEmptyAndFeatureListsAreForCsv) {
  auto spec = ParseFeatureSpec(
      R"({"inputs": {"x": {"kind": "float", "varlen": true, "pad": 9}},
          "label": {"feature": "y", "kind": "int64"}})",
      "spec.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto layout = ResolveLayout(*spec, {}, {4}, {5, 0}, "spec.json");
  ASSERT_TRUE(layout.ok()) << layout.status();
  tfexample::Example no_x;
  (*no_x.mutable_features()->mutable_feature())["y"].mutable_int64_list()->add_value(2);
  const std::string path = Write(
      "varlen.tfrecord", ExampleRecord(1, 3) + tfrecord::EncodeRecord(no_x.SerializeAsString()));
  auto read = ReadSplit(io::LocalFileSystem(), {path}, *layout, {}, "train");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(Floats(read->arrays.at("x_train")), ElementsAre(1, 2, 3, 9, 9, 9, 9, 9));

  auto columns = ParseFeatureSpec(
      R"({"inputs": {"x": {"feature": ["a", "b", "c"], "kind": "float"}},
          "label": {"feature": "y", "kind": "int64"}})",
      "spec.json");
  ASSERT_TRUE(columns.ok());
  auto by_columns = ResolveLayout(*columns, {}, {3}, {5, 0}, "spec.json");
  ASSERT_TRUE(by_columns.ok());
  auto refused = ReadSplit(io::LocalFileSystem(), {path}, *by_columns, {}, "train");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("a list of columns is for CSV"));
}

TEST_F(RecordFilesTest, ABadRecordNamesTheFileTheRecordAndTheFeature) {
  tfexample::Example no_x;
  (*no_x.mutable_features()->mutable_feature())["y"].mutable_int64_list()->add_value(1);
  tfexample::Example int_x = no_x;
  (*int_x.mutable_features()->mutable_feature())["x"].mutable_int64_list()->add_value(1);
  const std::string good = ExampleRecord(0, 1);
  const struct {
    std::string bad;
    absl::StatusCode code;
    std::string message;
  } cases[] = {
      {ExampleRecord(0, 7), absl::StatusCode::kInvalidArgument,
       absl::StrCat("record 1 at offset ", good.size(),
                    ": feature \"y\" (label): class 7 is not one of the model's 5 classes")},
      {tfrecord::EncodeRecord(no_x.SerializeAsString()), absl::StatusCode::kInvalidArgument,
       "record 1 at offset 53: the record has no feature \"x\" and the spec gives \"x\" no "
       "\"default\""},
      {tfrecord::EncodeRecord(int_x.SerializeAsString()), absl::StatusCode::kInvalidArgument,
       "feature \"x\" (x) is int64; the spec says float"},
      {tfrecord::EncodeRecord("\xff\xff\xff"), absl::StatusCode::kDataLoss,
       "record 1 at offset 53: the record is not a tf.train.Example"},
  };
  ASSERT_EQ(good.size(), 53u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    const std::string path = Write("bad.tfrecord", good + c.bad + good);
    auto read = ReadSplit(io::LocalFileSystem(), {path}, layout_, {}, "train");
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), c.code) << read.status();
    EXPECT_THAT(read.status().message(), HasSubstr(path));
    EXPECT_THAT(read.status().message(), HasSubstr(c.message));

    // Skipped and counted instead, the good records read.
    ReadOptions skip;
    skip.skip_corrupt = true;
    auto skipped = ReadSplit(io::LocalFileSystem(), {path}, layout_, skip, "train");
    ASSERT_TRUE(skipped.ok()) << skipped.status();
    EXPECT_EQ(skipped->records, 2);
    EXPECT_EQ(skipped->skipped, 1);
    EXPECT_EQ(skipped->files[0].skipped, 1);
    EXPECT_THAT(Ints(skipped->arrays.at("y_train")), ElementsAre(1, 1));
  }
}

TEST_F(RecordFilesTest, DamageIsDataLossOrSkippedWithWhatItLoses) {
  const std::string good = ExampleRecord(0, 1);
  std::string crc = good + good + good;
  crc[good.size() + good.size() - 1] ^= 1;  // the second record's data CRC
  const std::string crc_path = Write("crc.tfrecord", crc);
  auto read = ReadSplit(io::LocalFileSystem(), {crc_path}, layout_, {}, "train");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("bad data CRC in the record at offset 53"));
  ReadOptions skip;
  skip.skip_corrupt = true;
  auto skipped = ReadSplit(io::LocalFileSystem(), {crc_path}, layout_, skip, "train");
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->records, 2) << "the record after it is read";
  EXPECT_EQ(skipped->skipped, 1);

  // A truncated file: the rest of it is lost, counted as one record; the next file is read.
  const std::string cut = Write("cut.tfrecord", good + good.substr(0, 20));
  const std::string next = Write("next.tfrecord", good);
  skipped = ReadSplit(io::LocalFileSystem(), {cut, next}, layout_, skip, "train");
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->records, 2);
  EXPECT_EQ(skipped->files[0].skipped, 1);
  EXPECT_EQ(skipped->files[1].skipped, 0);
  // A missing file is never skipped.
  auto missing = ReadSplit(io::LocalFileSystem(), {absl::StrCat(dir_.path(), "/none")}, layout_,
                           skip, "train");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RecordFilesTest, ReadsCsvThroughTheHeaderStrictly) {
  auto spec = ParseFeatureSpec(
      R"({"inputs": {"x": {"feature": ["a", "b", "c"], "kind": "float", "default": [0, 0, 9]}},
          "label": {"feature": "label", "kind": "int64"}})",
      "spec.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto layout = ResolveLayout(*spec, {}, {3}, {5, 0}, "spec.json");
  ASSERT_TRUE(layout.ok()) << layout.status();
  ReadOptions csv;
  csv.format = FileFormat::kCsv;
  const std::string path =
      Write("a.csv", "\xEF\xBB\xBFlabel,c,b,a,note\n1,3,2,1,\"x, y\"\n4,,-2.5e1,0.5,\n");
  auto read = ReadSplit(io::LocalFileSystem(), {path}, *layout, csv, "test");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(Floats(read->arrays.at("x_test")), ElementsAre(1, 2, 3, 0.5, -25, 9));
  EXPECT_THAT(Ints(read->arrays.at("y_test")), ElementsAre(1, 4));

  const struct {
    const char* bytes;
    const char* message;
  } cases[] = {
      {"label,a,b\n1,1,2\n", "the header has no column \"c\" (x; it has: label, a, b)"},
      {"label,a,b,c\n1,1,2\n", "line 2: 3 fields; the header has 4"},
      {"label,a,b,c\n1,1,2x,3\n", "line 2, column 3 (\"b\"): \"2x\" is not a number"},
      {"label,a,b,c\n1.0,1,2,3\n", "line 2, column 1 (\"label\"): \"1.0\" is not an integer"},
      {"label,a,b,c\n,1,2,3\n",
       "line 2, column 1 (\"label\"): an empty cell and the spec gives "
       "\"label\" no \"default\""},
      {"label,a,b,c\n1,nan,2,3\n", "line 2: feature columns a, b, c (x): value 0 is nan"},
      {"label,a,b,c\n1,1,1e300,3\n", "value 1 is 1e+300, beyond float32's range"},
      {"label,a,a\n", "the header names the column \"a\" twice"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.bytes);
    const std::string bad = Write("bad.csv", c.bytes);
    auto got = ReadSplit(io::LocalFileSystem(), {bad}, *layout, csv, "train");
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(got.status().message(), HasSubstr(bad));
    EXPECT_THAT(got.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace psc::records
