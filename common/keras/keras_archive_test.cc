#include "common/keras/keras_archive.h"

#include <fstream>

#include "common/io/zip_member.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace keras {
namespace {

using ::testing::HasSubstr;

TEST(KerasArchiveTest, WritesAndReadsTheThreeMembers) {
  const std::string path = ::testing::TempDir() + "/archive_test.keras";
  KerasArchive a{"{\"class_name\": \"Sequential\"}", "{\"keras_version\": \"3.0.0\"}",
                 std::string("\x89HDF\r\n\x1a\n", 8) + std::string(100000, 'w')};
  ASSERT_TRUE(WriteKerasArchive(path, a).ok());
  auto b = ReadKerasArchive(path);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->config_json, a.config_json);
  EXPECT_EQ(b->metadata_json, a.metadata_json);
  EXPECT_EQ(b->weights_h5, a.weights_h5);
  auto config = ReadModelConfig(path);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(*config, a.config_json);
  // Keras's own names: model.weights.h5 is stored, the JSON deflated.
  auto members = io::ReadZipFile(path, 1 << 20);
  ASSERT_TRUE(members.ok());
  ASSERT_EQ(members->size(), 3u);
  EXPECT_EQ((*members)[0].first, "metadata.json");
  EXPECT_EQ((*members)[1].first, "config.json");
  EXPECT_EQ((*members)[2].first, "model.weights.h5");
}

TEST(KerasArchiveTest, BadArchivesNameTheFile) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(ReadKerasArchive(dir + "/missing.keras").status().code(), absl::StatusCode::kNotFound);
  const std::string junk = dir + "/junk.keras";
  std::ofstream(junk) << "not a zip";
  auto j = ReadKerasArchive(junk);
  EXPECT_EQ(j.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(j.status().message()), HasSubstr(junk));
  const std::string empty = dir + "/no_config.keras";
  const std::string meta = "{}";
  ASSERT_TRUE(io::WriteZipFile(empty, {{"metadata.json", &meta}}).ok());
  EXPECT_THAT(std::string(ReadKerasArchive(empty).status().message()),
              HasSubstr("no config.json (it has: metadata.json)"));
  // Two config.json members: which one Keras reads is not ours to guess.
  const std::string twice = dir + "/twice.keras";
  const std::string config = "{}";
  ASSERT_TRUE(io::WriteZipFile(twice, {{"config.json", &config}, {"config.json", &config}}).ok());
  auto t = ReadKerasArchive(twice);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("config.json: two members of this name"));
  EXPECT_THAT(std::string(ReadModelConfig(dir + "/model.h5").status().message()),
              HasSubstr("a .keras archive or a .json config"));
  const std::string json = dir + "/model.json";
  std::ofstream(json) << "{\"class_name\": \"Sequential\"}";
  EXPECT_EQ(*ReadModelConfig(json), "{\"class_name\": \"Sequential\"}");
  EXPECT_TRUE(IsModelFile("a/b.keras"));
  EXPECT_TRUE(IsModelFile("b.json"));
  EXPECT_FALSE(IsModelFile("seed_cnn"));
}

}  // namespace
}  // namespace keras
}  // namespace psc
