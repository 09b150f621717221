#include "launcher/data_commands.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data/npz_test_util.h"
#include "common/records/feature_spec.h"
#include "common/records/record_files.h"
#include "common/tfrecord/framing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/tf_example.pb.h"

namespace psc {
namespace launcher {
namespace {

using ::testing::HasSubstr;

TEST(DataCommandsTest, InspectPrintsTheFirstRecordsFeatures) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/data_commands_test_", getpid());
  std::filesystem::create_directories(dir);
  std::string raw;
  for (int i = 0; i < 3; ++i) {
    tfexample::Example e;
    auto& f = *e.mutable_features()->mutable_feature();
    f["label"].mutable_int64_list()->add_value(i);
    f["pixels"].mutable_bytes_list()->add_value(std::string(784, '\0'));
    tfrecord::AppendRecord(e.SerializeAsString(), &raw);
  }
  for (const char* name : {"train-0.tfrecord", "train-1.tfrecord"}) {
    std::ofstream(absl::StrCat(dir, "/", name), std::ios::binary) << raw;
  }
  auto text = InspectRecords(dir + "/train-*.tfrecord", 2, std::nullopt, 1 << 20);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr(absl::StrCat("2 files, ", 2 * raw.size(), " bytes; the first, ", dir,
                                            "/train-0.tfrecord, is uncompressed")));
  EXPECT_THAT(*text, HasSubstr("record 0 (offset 0, "));
  EXPECT_THAT(*text, HasSubstr("  label   int64[1]  1\n"));
  EXPECT_THAT(*text, HasSubstr("  pixels  bytes[1]  784 bytes\n"));
  EXPECT_THAT(*text, ::testing::Not(HasSubstr("record 2")));

  // Bad input: no file, no Example, --records below 1.
  EXPECT_EQ(InspectRecords(dir + "/none-*", 1, std::nullopt, 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::ofstream(dir + "/junk.tfrecord", std::ios::binary) << tfrecord::EncodeRecord("\xff\xff");
  auto junk = InspectRecords(dir + "/junk.tfrecord", 1, std::nullopt, 1 << 20);
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(junk.status().message(), HasSubstr("junk.tfrecord: the record at offset 0"));
  EXPECT_EQ(InspectRecords(dir + "/train-0.tfrecord", 0, std::nullopt, 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

// The spec inspect suggests reads the records it saw: the label found by
// its name, a bytes feature as uint8 of its size, a list whose length
// varies as varlen, encoded images left out with a note.
TEST(DataCommandsTest, InspectSuggestsASpecThatReadsTheRecords) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/data_commands_spec_", getpid());
  std::filesystem::create_directories(dir);
  std::string raw;
  for (int i = 0; i < 3; ++i) {
    tfexample::Example e;
    auto& f = *e.mutable_features()->mutable_feature();
    f["target"].mutable_float_list()->add_value(0.5f * i);
    f["pixels"].mutable_bytes_list()->add_value(std::string(12, '\1'));
    for (int k = 0; k <= i; ++k) f["tags"].mutable_int64_list()->add_value(k);
    f["photo"].mutable_bytes_list()->add_value("\xff\xd8\xff\xe0jpeg");
    tfrecord::AppendRecord(e.SerializeAsString(), &raw);
  }
  const std::string path = dir + "/a.tfrecord";
  std::ofstream(path, std::ios::binary) << raw;
  auto text = InspectRecords(path, 3, std::nullopt, 1 << 20);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("\"photo\": JPEG images; pscluster reads raw values"));
  EXPECT_THAT(*text, HasSubstr("\"tags\": 1 to 3 values: varlen"));
  EXPECT_THAT(*text, HasSubstr("\"pixels\": 12 bytes, read as uint8"));
  const size_t json = text->find("{\n");
  ASSERT_NE(json, std::string::npos) << *text;
  auto spec = records::ParseFeatureSpec(text->substr(json), "suggested");
  ASSERT_TRUE(spec.ok()) << spec.status() << *text;
  EXPECT_EQ(spec->label.features, std::vector<std::string>{"target"});
  EXPECT_EQ(spec->label.kind, records::ValueKind::kFloat);
  ASSERT_EQ(spec->inputs.size(), 2u);
  EXPECT_EQ(spec->inputs[0].key, "pixels");
  EXPECT_EQ(spec->inputs[0].dtype, data::NpyType::kUint8);
  EXPECT_EQ(spec->inputs[0].shape, std::vector<int64_t>{12});
  EXPECT_EQ(spec->inputs[1].key, "tags");
  EXPECT_TRUE(spec->inputs[1].varlen);
  EXPECT_EQ(spec->inputs[1].shape, std::vector<int64_t>{3});
  std::filesystem::remove_all(dir);
}

// convert writes each split in order over the shards, and its spec reads
// back exactly the archive's arrays: TFRecord plain and gzip, and CSV.
TEST(DataCommandsTest, ConvertWritesFilesItsSpecReadsBack) {
  namespace dt = data::testing;
  const std::string dir = absl::StrCat(::testing::TempDir(), "/data_commands_convert_", getpid());
  std::filesystem::create_directories(dir);
  std::vector<uint8_t> image(7 * 2 * 3);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<uint8_t>(i * 37);
  std::vector<float> dense(7 * 2);
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = 0.1f * static_cast<float>(i) - 0.3f;
  const std::vector<int64_t> labels = {0, 1, 2, 0, 1, 2, 1};
  const std::vector<int32_t> test_labels = {2, 0};
  const std::string npz = dir + "/d.npz";
  dt::WriteNpz(
      npz, {{"x_train/image.npy",
             dt::NpyBytes(data::NpyType::kUint8, {7, 2, 3}, image.data(), image.size())},
            {"x_train/dense.npy",
             dt::NpyBytes(data::NpyType::kFloat32, {7, 2}, dense.data(), dense.size() * 4)},
            {"y_train.npy", dt::NpyBytes(data::NpyType::kInt64, {7}, labels.data(), 56)},
            {"x_test/image.npy", dt::NpyBytes(data::NpyType::kUint8, {2, 2, 3}, image.data(), 12)},
            {"x_test/dense.npy", dt::NpyBytes(data::NpyType::kFloat32, {2, 2}, dense.data(), 16)},
            {"y_test.npy", dt::NpyBytes(data::NpyType::kInt32, {2}, test_labels.data(), 8)}});
  const struct {
    const char* name;
    tfrecord::Compression compression;
    bool csv;
    const char* pattern;
  } cases[] = {{"plain", tfrecord::Compression::kNone, false, "/train-*-of-00003.tfrecord"},
               {"gzip", tfrecord::Compression::kGzip, false, "/train-*-of-00003.tfrecord.gz"},
               {"csv", tfrecord::Compression::kNone, true, "/train-*-of-00003.csv"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string out = absl::StrCat(dir, "/", c.name);
    auto text = ConvertNpz(npz, out, 3, c.compression, c.csv);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_THAT(*text, HasSubstr(absl::StrCat("train: 7 examples in 3 files (", out, c.pattern)));
    EXPECT_THAT(*text, HasSubstr("test: 2 examples in 3 files")) << "a shard may be empty";
    EXPECT_FALSE(std::filesystem::exists(out + "/validation-00000-of-00003.tfrecord"));
    std::ifstream in(out + "/spec.json");
    const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto spec = records::ParseFeatureSpec(json, "spec.json");
    ASSERT_TRUE(spec.ok()) << spec.status() << json;
    auto layout = records::ResolveLayout(*spec, {{"dense", {2}, 0}, {"image", {2, 3}, 0}}, {},
                                         {3, 0}, "spec.json");
    ASSERT_TRUE(layout.ok()) << layout.status();
    std::vector<std::string> files;
    for (int s = 0; s < 3; ++s) {
      files.push_back(absl::StrCat(out, "/train-0000", s, "-of-00003",
                                   c.csv                                           ? ".csv"
                                   : c.compression == tfrecord::Compression::kGzip ? ".tfrecord.gz"
                                                                                   : ".tfrecord"));
    }
    records::ReadOptions options;
    options.format = c.csv ? records::FileFormat::kCsv : records::FileFormat::kTfRecord;
    auto read = records::ReadSplit(io::LocalFileSystem(), files, *layout, options, "train");
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->files[0].records, 2);  // 7 * 1 / 3
    const data::NumpyArray& x_image = read->arrays.at("x_train/image");
    ASSERT_EQ(x_image.header().count, 42);
    std::vector<float> got_image(42);
    if (x_image.header().type == data::NpyType::kUint8) {  // TFRecord: raw bytes
      for (int i = 0; i < 42; ++i) got_image[i] = x_image.as<uint8_t>()[i];
    } else {  // CSV: int64 columns, read as float values
      std::memcpy(got_image.data(), x_image.data(), 42 * 4);
    }
    for (int i = 0; i < 42; ++i) EXPECT_EQ(got_image[i], image[i]) << i;
    std::vector<float> got_dense(14);
    std::memcpy(got_dense.data(), read->arrays.at("x_train/dense").data(), 56);
    EXPECT_EQ(got_dense, dense) << "float32 exactly, CSV included";
    std::vector<int64_t> got_labels(7);
    std::memcpy(got_labels.data(), read->arrays.at("y_train").data(), 56);
    EXPECT_EQ(got_labels, labels);
  }
  // Bad input: no shard, compressed CSV, a directory's files kept.
  EXPECT_EQ(ConvertNpz(npz, dir + "/none", 0, tfrecord::Compression::kNone, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConvertNpz(npz, dir + "/csvgz", 1, tfrecord::Compression::kGzip, true).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConvertNpz(npz, dir + "/plain", 3, tfrecord::Compression::kNone, false).status().code(),
            absl::StatusCode::kAlreadyExists);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace launcher
}  // namespace psc
