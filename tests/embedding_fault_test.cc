// Issue 38, item 5: a sync job with an embedding table split over 2 ps
// tasks, its table trained by rows, checkpointed with its optimizer slots.
// ps:1 is killed -9 mid-job and restarted by the launcher; the chief
// restores every shard from the newest checkpoint all have, and the job ends
// in the variables of a run that never stopped, bit for bit.
#include <signal.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/data/npz_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using data::NpyType;
using data::testing::NpyBytes;
using data::testing::NpzMember;
using data::testing::WriteNpz;
using ::testing::HasSubstr;

constexpr int64_t kIds = 4, kRows = 3000;

// 4 ids from a table of 3,000 rows, 8 wide, into a small classifier.
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {"name": "ranker", "layers": [
  {"class_name": "InputLayer", "config": {"name": "ids", "batch_shape": [null, 4], "dtype": "int32"}},
  {"class_name": "Embedding", "config": {"name": "items", "input_dim": 3000, "output_dim": 8}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": 16, "activation": "relu"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 2, "activation": "softmax"}}]}})";

// `n` examples of ids from a fixed generator; the label says whether the
// first two ids fall in the same half of the table.
void AddSplit(const std::string& split, int64_t n, uint64_t seed, std::vector<NpzMember>* members) {
  std::vector<int32_t> ids(n * kIds);
  std::vector<uint8_t> labels(n);
  uint64_t s = seed;
  for (int64_t e = 0; e < n; ++e) {
    for (int64_t k = 0; k < kIds; ++k) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      ids[e * kIds + k] = static_cast<int32_t>((s >> 33) % kRows);
    }
    labels[e] = (ids[e * kIds] < kRows / 2) == (ids[e * kIds + 1] < kRows / 2);
  }
  members->push_back(
      {"x_" + split + ".npy", NpyBytes(NpyType::kInt32, {n, kIds}, ids.data(), ids.size() * 4)});
  members->push_back({"y_" + split + ".npy", NpyBytes(NpyType::kUint8, {n}, labels.data(), n)});
}

class EmbeddingFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("embedding_fault");
    model_ = dir_ + "/ranker.json";
    WriteFile(model_, kModel);
    std::vector<NpzMember> members;
    AddSplit("train", 2560, 1, &members);
    AddSplit("val", 256, 2, &members);
    AddSplit("test", 512, 3, &members);
    npz_ = dir_ + "/ranker.npz";
    WriteNpz(npz_, members);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // `pscluster launch` of the job on 2 ps and 2 workers, checkpoints every
  // 5 steps into `name`/ckpt, the result in `name`.json.
  std::unique_ptr<launcher::Subprocess> Launch(const std::string& name, bool restart) {
    launcher::SubprocessOptions o;
    o.argv = {BinPath("pscluster"), "launch", "--ps=2", "--workers=2"};
    if (restart) o.argv.push_back("--restart_failed");
    for (const std::string& f :
         {std::string("--"), "--model=" + model_, "--data=" + npz_, std::string("--nostandardize"),
          std::string("--mode=sync"), std::string("--optimizer=adagrad"),
          std::string("--learning_rate=0.3"), std::string("--batch_size=64"),
          std::string("--epochs=3"), std::string("--steps_per_epoch=20"),
          std::string("--unit_steps=5"), std::string("--intra_op_threads=1"),
          std::string("--eval_threads=1"), "--checkpoint_dir=" + dir_ + "/" + name + "/ckpt",
          std::string("--checkpoint_every_steps=5"),
          "--metrics_out=" + dir_ + "/" + name + ".json"}) {
      o.argv.push_back(f);
    }
    o.stdout_path = dir_ + "/" + name + ".log";
    o.stderr_path = "=stdout";
    auto p = launcher::Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }

  std::string dir_, model_, npz_;
};

TEST_F(EmbeddingFaultTest, AKilledServerOfATableRestoresAndEndsInTheCleanRunsVariables) {
  auto clean = Launch("clean", false);
  ASSERT_NE(clean, nullptr);
  auto clean_exit = clean->Wait(absl::Seconds(150));
  ASSERT_TRUE(clean_exit.ok());
  ASSERT_EQ(clean_exit->ToString(), "exit 0") << ReadFile(dir_ + "/clean.log");
  const auto want = nlohmann::json::parse(ReadFile(dir_ + "/clean.json"));
  ASSERT_EQ(want["steps"], 60);

  auto faulty = Launch("faulty", true);
  ASSERT_NE(faulty, nullptr);
  const std::string log = dir_ + "/faulty.log";
  // Killed once epoch 1 is done (the line ends it): the restore brings back
  // trained rows and their slots.
  ASSERT_TRUE(WaitForLog(log, "[chief:0] Epoch 1/3")) << ReadFile(log);
  const int pid = LaunchedPid(ReadFile(log), "ps:1");
  ASSERT_GT(pid, 0);
  kill(pid, SIGKILL);
  auto exit = faulty->Wait(absl::Seconds(150));
  ASSERT_TRUE(exit.ok());
  const std::string out = ReadFile(log);
  ASSERT_EQ(exit->ToString(), "exit 0") << out;
  EXPECT_THAT(out, HasSubstr("restarted ps:1"));
  EXPECT_THAT(out, HasSubstr("chief: a parameter server failed; restored every shard"));
  const auto got = nlohmann::json::parse(ReadFile(dir_ + "/faulty.json"));
  EXPECT_GE(got["recoveries"].get<int>(), 1);
  EXPECT_EQ(got["steps"], 60);
  EXPECT_THAT(
      out, ::testing::ContainsRegex("restored every shard from .* step (2[05]|3[05]|40|45|50|55)"));
  EXPECT_EQ(got["final_variables_sha256"], want["final_variables_sha256"]) << out;
  EXPECT_EQ(got["test_accuracy"], want["test_accuracy"]);
}

}  // namespace
}  // namespace testing
}  // namespace psc
