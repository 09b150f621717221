// Integration: checkpoints and exports written before the compute layer became
// a graph (issue 37) still load. tests/testdata/compat holds, for the built-in
// mlp and a chain Keras model, the last checkpoint and the export of a short
// job, its final_variables_sha256, and the predictions of the export and of an
// export made from the checkpoint (make_compat_fixtures.py made them with the
// binaries of the commit it names). Here the chief restores the checkpoint and
// must report the same sha; both exports must predict the same outputs.
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/data/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string FixtureDir(const std::string& name) {
  return std::string(PSC_SOURCE_DIR) + "/tests/testdata/compat/" + name;
}

// The float32 values of an .npy file; fails the test on anything else.
std::vector<float> ReadFloatNpy(const std::string& path) {
  const std::string bytes = ReadFile(path);
  auto header = data::ParseNpyHeader(bytes, path, 1 << 20);
  EXPECT_TRUE(header.ok()) << header.status();
  if (!header.ok()) return {};
  EXPECT_EQ(header->type, data::NpyType::kFloat32) << path;
  EXPECT_EQ(header->data_offset + header->data_bytes, bytes.size()) << path;
  if (header->type != data::NpyType::kFloat32 ||
      header->data_offset + header->data_bytes != bytes.size()) {
    return {};
  }
  std::vector<float> values(header->count);
  std::memcpy(values.data(), bytes.data() + header->data_offset, header->data_bytes);
  return values;
}

// A flag's value that names a file of the fixture, made absolute.
std::string Resolve(const std::string& flag, const std::string& dir) {
  const size_t eq = flag.find('=');
  if (eq == std::string::npos) return flag;
  const std::string file = dir + "/" + flag.substr(eq + 1);
  return fs::is_regular_file(file) ? flag.substr(0, eq + 1) + file : flag;
}

class CompatFixturesTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = FixtureDir(GetParam());
    ASSERT_TRUE(fs::exists(dir_ + "/expected.json")) << dir_;
    expected_ = nlohmann::json::parse(ReadFile(dir_ + "/expected.json"));
    tmp_ = MakeTempDir(absl::StrCat("compat_", GetParam()));
  }
  void TearDown() override {
    std::error_code ec;
    if (!tmp_.empty()) fs::remove_all(tmp_, ec);
  }

  std::vector<std::string> JobFlags() const {
    std::vector<std::string> flags;
    for (const auto& f : expected_["flags"]) flags.push_back(Resolve(f.get<std::string>(), dir_));
    return flags;
  }

  // `pscluster predict` of `model` on the fixture's inputs, against `want`.
  void ExpectPredictions(const std::string& model, const std::string& want) {
    const std::string out = tmp_ + "/p.npy";
    auto run = RunProgram({BinPath("pscluster"), "predict", "--model=" + model,
                           "--data=" + dir_ + "/inputs.npz", "--x=x", "--out=" + out},
                          {}, absl::Seconds(60));
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_TRUE(run->exit.exited && run->exit.exit_code == 0) << run->out << run->err;
    const std::vector<float> got = ReadFloatNpy(out), expected = ReadFloatNpy(want);
    ASSERT_EQ(got.size(), expected.size());
    ASSERT_FALSE(got.empty());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], expected[i], 1e-5 * (1 + std::fabs(expected[i]))) << "output " << i;
    }
  }

  std::string dir_, tmp_;
  nlohmann::json expected_;
};

TEST_P(CompatFixturesTest, TheChiefRestoresTheCheckpointToTheSameVariables) {
  const std::string ckpt = tmp_ + "/ckpt";
  fs::copy(dir_ + "/ckpt", ckpt, fs::copy_options::recursive);
  std::vector<std::string> argv = {BinPath("pscluster"), "launch", "--ps=1", "--workers=1", "--"};
  for (const std::string& f : JobFlags()) argv.push_back(f);
  argv.push_back("--checkpoint_dir=" + ckpt);
  argv.push_back("--metrics_out=" + tmp_ + "/result.json");
  auto run = RunProgram(argv, {}, absl::Seconds(120));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(run->exit.exited && run->exit.exit_code == 0) << run->out << run->err;
  EXPECT_THAT(run->out + run->err,
              HasSubstr(absl::StrCat("restored every shard from ", ckpt, " step ",
                                     expected_["steps"].get<int>())));
  const auto result = nlohmann::json::parse(ReadFile(tmp_ + "/result.json"));
  EXPECT_EQ(result["final_variables_sha256"], expected_["final_variables_sha256"]);
}

TEST_P(CompatFixturesTest, TheExportPredictsWhatItDid) {
  ExpectPredictions(dir_ + "/export.keras", dir_ + "/predictions.npy");
}

TEST_P(CompatFixturesTest, AnExportOfTheCheckpointPredictsWhatItDid) {
  std::string model = "mlp";
  for (const std::string& f : JobFlags()) {
    if (f.rfind("--model=", 0) == 0) model = f.substr(8);
  }
  const std::string out = tmp_ + "/from_checkpoint.keras";
  auto run = RunProgram(
      {BinPath("pscluster"), "export", dir_ + "/ckpt", "--model=" + model, "--out=" + out}, {},
      absl::Seconds(60));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(run->exit.exited && run->exit.exit_code == 0) << run->out << run->err;
  ExpectPredictions(out, dir_ + "/checkpoint_predictions.npy");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CompatFixturesTest, ::testing::Values("mlp", "chain"));

}  // namespace
}  // namespace testing
}  // namespace psc
