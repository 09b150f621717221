#include "common/keras/keras_archive.h"

#include <zip.h>

#include <fstream>

#include "absl/time/clock.h"
#include "common/compute/model.h"
#include "common/io/testing/zip_bomb.h"
#include "common/io/zip_member.h"
#include "common/keras/builtin_models.h"
#include "common/keras/keras_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace keras {
namespace {

using ::testing::HasSubstr;

compute::Model Mlp() {
  auto m = BuiltinModel("mlp");
  EXPECT_TRUE(m.ok());
  return *std::move(m);
}

TEST(KerasArchiveTest, WritesAndReadsTheThreeMembers) {
  const std::string path = ::testing::TempDir() + "/archive_test.keras";
  KerasArchive a{"{\"class_name\": \"Sequential\"}", "{\"keras_version\": \"3.0.0\"}",
                 std::string("\x89HDF\r\n\x1a\n", 8) + std::string(100000, 'w')};
  ASSERT_TRUE(WriteKerasArchive(path, a).ok());
  auto b = ReadKerasArchive(path, Mlp());
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
  EXPECT_EQ(ReadKerasArchive(dir + "/missing.keras", Mlp()).status().code(),
            absl::StatusCode::kNotFound);
  const std::string junk = dir + "/junk.keras";
  std::ofstream(junk) << "not a zip";
  auto j = ReadKerasArchive(junk, Mlp());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(j.status().message()), HasSubstr(junk));
  const std::string empty = dir + "/no_config.keras";
  const std::string meta = "{}";
  ASSERT_TRUE(io::WriteZipFile(empty, {{"metadata.json", &meta}}).ok());
  EXPECT_THAT(std::string(ReadKerasArchive(empty, Mlp()).status().message()),
              HasSubstr("no config.json (it has: metadata.json)"));
  // Two config.json members: which one Keras reads is not ours to guess.
  const std::string twice = dir + "/twice.keras";
  const std::string config = "{}";
  ASSERT_TRUE(io::WriteZipFile(twice, {{"config.json", &config}, {"config.json", &config}}).ok());
  auto t = ReadKerasArchive(twice, Mlp());
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

// A .keras archive with `config` as config.json, of `config_bytes` in all
// (the rest spaces), and a model.weights.h5 of `weights_bytes` (zeros).
std::string BombArchive(const std::string& name, uint64_t config_bytes, uint64_t weights_bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  zipFile zf = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
  EXPECT_NE(zf, nullptr);
  const std::string config = keras::BuiltinModelConfig("mlp");
  EXPECT_TRUE(io::testing::AddMember(zf, "metadata.json", "{}").ok());
  EXPECT_TRUE(
      io::testing::AddInflatingMember(zf, "config.json", config, ' ', config_bytes - config.size())
          .ok());
  EXPECT_TRUE(io::testing::AddInflatingMember(zf, "model.weights.h5", "\x89HDF\r\n\x1a\n", '\0',
                                              weights_bytes)
                  .ok());
  EXPECT_EQ(zipClose(zf, nullptr), ZIP_OK);
  return path;
}

TEST(KerasArchiveTest, AConfigThatInflatesPastItsCapIsRefusedBeforeInflating) {
  const std::string path = BombArchive("config_bomb.keras", uint64_t{3} << 30, 1000);
  const absl::Time start = absl::Now();
  const absl::StatusOr<std::string> config = ReadModelConfig(path);  // what describe reads
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(config.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("config.json: would be inflated past the declared 67108864 bytes "
                        "(a config.json's cap; its zip entry announces 3221225472)"));
  EXPECT_EQ(ReadKerasArchive(path, Mlp()).status().code(), absl::StatusCode::kDataLoss);
}

TEST(KerasArchiveTest, WeightsLargerThanTheModelsVariablesAreRefusedBeforeInflating) {
  const compute::Model mlp = Mlp();
  auto limit = WeightsH5Limit(mlp);
  ASSERT_TRUE(limit.ok());
  uint64_t variables = 0;
  for (const auto& v : mlp.variables()) variables += 4 * tensor::NumElements(v.shape);
  variables *= 1 + kWeightsH5OptimizerSlots;  // an optimizer's state may come along
  EXPECT_EQ(*limit, variables + kWeightsH5OverheadBytes + variables / 100);
  const std::string path = BombArchive("weights_bomb.keras", 10000, uint64_t{1} << 30);
  const absl::Time start = absl::Now();
  auto archive = ReadKerasArchive(path, mlp);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(archive.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      std::string(archive.status().message()),
      HasSubstr(absl::StrCat("model.weights.h5: would be inflated past the declared ", *limit,
                             " bytes (mlp's variables and HDF5's overhead: larger "
                             "weights do not match the config")));
  // Its config alone is fine: describe reads only that.
  EXPECT_TRUE(ReadModelConfig(path).ok());
}

}  // namespace
}  // namespace keras
}  // namespace psc
