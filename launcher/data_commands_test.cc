#include "launcher/data_commands.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
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

}  // namespace
}  // namespace launcher
}  // namespace psc
