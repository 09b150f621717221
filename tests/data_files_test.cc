// Integration: training on data files (--data=tfrecord:... and csv:...)
// with the real binaries. Fashion-MNIST in an .npz, converted by
// `pscluster data convert` to gzip TFRecord shards and to CSV, trains bit
// for bit as the .npz does, alone and in a sync cluster; bad files and
// specs are exit 2 before any task starts, naming the file, the record and
// the feature; --skip_corrupt_records skips and counts a damaged record, up
// to --max_skipped_fraction. Labelled integration.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "common/data/idx_reader.h"
#include "common/data/npy.h"
#include "common/data/npz_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using data::testing::NpzMember;
using data::testing::WriteNpz;
using ::testing::HasSubstr;

constexpr char kIdxDir[] = "/usr/share/datasets/fashion-mnist";

class DataFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(kIdxDir) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    }
    // As the chief names the files it expands: absolute and normal.
    dir_ = std::filesystem::path(MakeTempDir("data_files")).lexically_normal().string();
    auto images = data::ReadIdxFile(std::string(kIdxDir) + "/train-images-idx3-ubyte.gz");
    auto labels = data::ReadIdxFile(std::string(kIdxDir) + "/train-labels-idx1-ubyte.gz");
    ASSERT_TRUE(images.ok() && labels.ok());
    // 3,000 training, 1,000 validation and 1,000 test examples.
    std::vector<NpzMember> members;
    const struct {
      const char* split;
      int64_t first, n;
    } splits[] = {{"train", 0, 3000}, {"val", 3000, 1000}, {"test", 4000, 1000}};
    for (const auto& s : splits) {
      data::testing::AddIdxSplit(*images, *labels, s.first, s.n, s.split, &members);
    }
    npz_ = dir_ + "/fashion.npz";
    WriteNpz(npz_, members);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  void Convert(const std::string& out, const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {BinPath("pscluster"), "data", "convert", npz_, out};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto r = RunProgram(argv, {}, absl::Seconds(60));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  }

  // --data for the files convert wrote in `out`.
  static std::string Files(const std::string& format, const std::string& out) {
    return absl::StrCat("--data=", format, ":train=", out, "/train-*,validation=", out,
                        "/validation-*,test=", out, "/test-*,spec=", out, "/spec.json");
  }

  RunResult Run(std::vector<std::string> argv) {
    auto r = RunProgram(argv, {}, absl::Seconds(240));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : RunResult{};
  }

  nlohmann::json Standalone(const std::vector<std::string>& flags, const std::string& out) {
    std::vector<std::string> argv = {
        BinPath("worker"),      "--standalone",         "--model=mlp",         "--epochs=1",
        "--steps_per_epoch=10", "--intra_op_threads=1", "--metrics_out=" + out};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const RunResult r = Run(argv);
    EXPECT_EQ(r.exit.ToString(), "exit 0") << r.out << r.err;
    return nlohmann::json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
  }

  std::string dir_;
  std::string npz_;
};

TEST_F(DataFilesTest, ConvertedFilesTrainBitForBitAsTheNpz) {
  Convert(dir_ + "/gz", {"--shards=4", "--compression=gzip"});
  Convert(dir_ + "/csv", {"--shards=2", "--format=csv"});
  auto from_npz = Standalone({"--data=" + npz_}, dir_ + "/npz.json");
  auto from_tfrecord = Standalone({Files("tfrecord", dir_ + "/gz")}, dir_ + "/tfrecord.json");
  auto from_csv = Standalone({Files("csv", dir_ + "/csv")}, dir_ + "/csv.json");
  ASSERT_FALSE(from_npz.is_discarded() || from_tfrecord.is_discarded() || from_csv.is_discarded());
  for (const nlohmann::json* j : {&from_tfrecord, &from_csv}) {
    EXPECT_EQ((*j)["final_variables_sha256"], from_npz["final_variables_sha256"]);
    EXPECT_EQ((*j)["epochs"][0]["val_loss"], from_npz["epochs"][0]["val_loss"]);
    EXPECT_EQ((*j)["test_accuracy"], from_npz["test_accuracy"]);
    EXPECT_EQ((*j)["data"]["preprocessing"]["mean"], from_npz["data"]["preprocessing"]["mean"]);
    EXPECT_EQ((*j)["data"]["train_examples"], 3000);
    EXPECT_EQ((*j)["data"]["validation_examples"], 1000);
    EXPECT_EQ((*j)["data"]["test_examples"], 1000);
    EXPECT_EQ((*j)["data"]["records_skipped"], 0);
    EXPECT_GE((*j)["data"]["read_seconds"].get<double>(), 0);
  }
  EXPECT_EQ(from_tfrecord["data"]["source"],
            absl::StrCat("tfrecord:train=", dir_, "/gz/train-* (4 files), validation=", dir_,
                         "/gz/validation-* (4 files), test=", dir_,
                         "/gz/test-* (4 files), spec=", dir_, "/gz/spec.json"));
}

TEST_F(DataFilesTest, ASyncClusterTrainsOnTheFilesAsOnTheNpz) {
  Convert(dir_ + "/plain", {"--shards=3"});
  nlohmann::json runs[2];
  const std::string data[2] = {"--data=" + npz_, Files("tfrecord", dir_ + "/plain")};
  for (int i = 0; i < 2; ++i) {
    const std::string out = absl::StrCat(dir_, "/cluster", i, ".json");
    const RunResult r =
        Run({BinPath("pscluster"), "launch", "--ps=1", "--workers=2", "--", data[i], "--model=mlp",
             "--epochs=1", "--steps_per_epoch=10", "--intra_op_threads=1", "--eval_threads=1",
             "--unit_steps=5", "--metrics_out=" + out});
    ASSERT_EQ(r.exit.ToString(), "exit 0") << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("3000 train, 1000 validation, 1000 test examples"));
    runs[i] = nlohmann::json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(runs[i].is_discarded());
  }
  EXPECT_EQ(runs[1]["final_variables_sha256"], runs[0]["final_variables_sha256"]);
  EXPECT_EQ(runs[1]["gradients_accepted"], 2 * 10);
}

// read=stream: the chief counts the records (the count cached beside the
// spec) and reads the validation and test files; each worker streams its
// slot's shards through a shuffle buffer. Two runs of a sync cluster end
// in the same variables (the batches are a function of the seed, the step,
// the slot and the counts), the second counting no file; alone, a streamed
// epoch learns as the whole read's does.
TEST_F(DataFilesTest, StreamedShardsTrainReproduciblyInASyncCluster) {
  Convert(dir_ + "/gz", {"--shards=6", "--compression=gzip"});
  const std::string data = Files("tfrecord", dir_ + "/gz") + ",read=stream,shuffle_buffer=500";
  nlohmann::json runs[2];
  for (int i = 0; i < 2; ++i) {
    const std::string out = absl::StrCat(dir_, "/streamed", i, ".json");
    const RunResult r =
        Run({BinPath("pscluster"), "launch", "--ps=1", "--workers=2", "--", data, "--model=mlp",
             "--epochs=2", "--steps_per_epoch=10", "--intra_op_threads=1", "--eval_threads=1",
             "--unit_steps=5", "--metrics_out=" + out});
    ASSERT_EQ(r.exit.ToString(), "exit 0") << r.out << r.err;
    runs[i] = nlohmann::json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(runs[i].is_discarded());
    EXPECT_EQ(runs[i]["data"]["read"], "stream");
    EXPECT_EQ(runs[i]["data"]["train_examples"], 3000);
    EXPECT_EQ(runs[i]["data"]["validation_examples"], 1000);
    EXPECT_EQ(runs[i]["data"]["test_examples"], 1000);
    // `launch` checks the job first (chief --check_job), which counts them:
    // the chief reads the counts file.
    EXPECT_EQ(runs[i]["data"]["files_counted"], 0);
    EXPECT_EQ(runs[i]["gradients_accepted"], 2 * 20);
    ASSERT_EQ(runs[i]["workers"].size(), 2u);
    EXPECT_GE(runs[i]["workers"][0]["data_wait_s"].get<double>(), 0);
  }
  EXPECT_EQ(runs[1]["final_variables_sha256"], runs[0]["final_variables_sha256"]);
  EXPECT_THAT(ReadFile(dir_ + "/gz/spec.json.counts"), HasSubstr("train-00005-of-00006"));

  // Alone, one whole epoch of 23 steps: it learns as a whole read does.
  auto whole =
      Standalone({Files("tfrecord", dir_ + "/gz"), "--steps_per_epoch=0"}, dir_ + "/whole.json");
  auto streamed = Standalone({data, "--steps_per_epoch=0"}, dir_ + "/alone.json");
  ASSERT_FALSE(whole.is_discarded() || streamed.is_discarded());
  EXPECT_EQ(streamed["data"]["read"], "stream");
  EXPECT_EQ(streamed["data"]["preprocessing"]["mean"], whole["data"]["preprocessing"]["mean"]);
  EXPECT_GT(streamed["test_accuracy"].get<double>(), 0.6);
  EXPECT_NEAR(streamed["test_accuracy"].get<double>(), whole["test_accuracy"].get<double>(), 0.05);
}

// async on streamed shards: the chief hands out pieces with kept slots
// (chief/work_queue.h), so a worker reads its slot's stream on. Which
// worker trains which piece depends on timing; every piece of every slot
// is trained exactly once.
TEST_F(DataFilesTest, StreamedShardsTrainEveryPieceOnceInAnAsyncCluster) {
  Convert(dir_ + "/gz", {"--shards=4", "--compression=gzip"});
  const std::string out = dir_ + "/async.json";
  const RunResult r =
      Run({BinPath("pscluster"), "launch", "--ps=1", "--workers=2", "--",
           Files("tfrecord", dir_ + "/gz") + ",read=stream", "--mode=async", "--model=mlp",
           "--epochs=2", "--steps_per_epoch=10", "--intra_op_threads=1", "--eval_threads=1",
           "--unit_steps=2", "--metrics_out=" + out});
  ASSERT_EQ(r.exit.ToString(), "exit 0") << r.out << r.err;
  const nlohmann::json run = nlohmann::json::parse(ReadFile(out), nullptr, false);
  ASSERT_FALSE(run.is_discarded());
  EXPECT_EQ(run["data"]["read"], "stream");
  EXPECT_EQ(run["gradients_accepted"], 2 * 20) << run["units"].dump() << r.out << r.err;
  std::map<std::pair<int64_t, int>, int> trained;  // (first step, slot) -> times
  for (const nlohmann::json& u : run["units"]) {
    EXPECT_EQ(u["end"].get<int64_t>() - u["first_step"].get<int64_t>(), 2) << u.dump();
    EXPECT_EQ(u["num_slots"], 2);
    ++trained[{u["first_step"].get<int64_t>(), u["slot"].get<int>()}];
  }
  ASSERT_EQ(trained.size(), 20u);
  for (const auto& [piece, times] : trained) {
    EXPECT_EQ(piece.first % 2, 0);
    EXPECT_LT(piece.first, 20);
    EXPECT_EQ(times, 1) << piece.first << " slot " << piece.second;
  }
}

// A training file that disappears while the job runs. In async the first
// worker that cannot open it is lost (its units go to the other, and it
// stays out until restarted); the other meets the same file missing, and
// the job ends, exit 1, naming it. In sync the job ends at once naming it.
TEST_F(DataFilesTest, AFileAWorkerCannotOpenGoesToAnotherOnceThenEndsTheJob) {
  for (const std::string mode : {"async", "sync"}) {
    SCOPED_TRACE(mode);
    const std::string out = dir_ + "/" + mode;
    Convert(out, {"--shards=6", "--compression=gzip"});
    std::string doomed;
    for (const auto& e : std::filesystem::directory_iterator(out)) {
      if (e.path().filename().string().rfind("train-00002", 0) == 0) doomed = e.path().string();
    }
    ASSERT_FALSE(doomed.empty());
    // Long enough that the file goes while it runs; it ends soon after.
    auto launch = Daemon::Start(
        "pscluster", "",
        {"launch", "--ps=1", "--workers=2", "--", Files("tfrecord", out) + ",read=stream",
         "--mode=" + mode, "--model=mlp", "--epochs=500", "--steps_per_epoch=10",
         "--intra_op_threads=1", "--eval_threads=1", "--unit_steps=2"},
        dir_);
    ASSERT_TRUE(launch.ok()) << launch.status();
    ASSERT_TRUE(WaitForLog((*launch)->log_path(), "Epoch 3/500", absl::Seconds(120)))
        << (*launch)->Log();
    std::filesystem::remove(doomed);
    auto exit = (*launch)->process().Wait(absl::Seconds(120));
    ASSERT_TRUE(exit.ok()) << exit.status();
    const std::string log = (*launch)->Log();
    EXPECT_EQ(exit->ToString(), "exit 1") << log;
    const std::string lost = "is lost (it cannot open a training file (open " + doomed;
    if (mode == "async") {
      EXPECT_THAT(log, HasSubstr(lost));
    } else {
      EXPECT_THAT(log, ::testing::Not(HasSubstr(lost)));
    }
    EXPECT_THAT(log, HasSubstr("reading its training files: open " + doomed));
    EXPECT_THAT(log, ::testing::Not(HasSubstr("Epoch 500/500")));
  }
}

// A record a worker cannot read (its data CRC damaged: the chief's count
// checks the headers only, and without --standardize it reads only the
// first record) ends the job, exit 1, naming the file and the offset; no
// server is restored for it.
TEST_F(DataFilesTest, AStreamedRecordAWorkerCannotReadEndsTheJob) {
  Convert(dir_ + "/plain", {"--shards=3"});
  std::string damaged;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/plain")) {
    if (e.path().filename().string().rfind("train-00002", 0) == 0) damaged = e.path().string();
  }
  ASSERT_FALSE(damaged.empty());
  std::string bytes = ReadFile(damaged);
  ASSERT_GT(bytes.size(), 100u);
  bytes[12 + 40] ^= 1;  // record 0's data (after its 12-byte header)
  std::ofstream(damaged, std::ios::binary | std::ios::trunc) << bytes;
  const RunResult r =
      Run({BinPath("pscluster"), "launch", "--ps=1", "--workers=2", "--",
           Files("tfrecord", dir_ + "/plain") + ",read=stream", "--nostandardize", "--model=mlp",
           "--epochs=1", "--intra_op_threads=1", "--eval_threads=1", "--unit_steps=5"});
  EXPECT_EQ(r.exit.ToString(), "exit 1") << r.out << r.err;
  EXPECT_THAT(r.out + r.err, HasSubstr("reading its training files: " + damaged));
  EXPECT_THAT(r.out + r.err, HasSubstr("offset 0"));
  EXPECT_THAT(r.out + r.err, ::testing::Not(HasSubstr("restored every shard")));
}

TEST_F(DataFilesTest, BadFilesAndSpecsAreExitTwoNamingWhatAndWhere) {
  Convert(dir_ + "/f", {"--shards=2"});
  const std::string f = dir_ + "/f";
  WriteFile(dir_ + "/two_inputs.json",
            R"({"inputs": {"a": {"feature": "x", "kind": "bytes", "dtype": "uint8"},
                           "b": {"feature": "x", "kind": "bytes", "dtype": "uint8"}},
                "label": {"feature": "y", "kind": "int64"}})");
  WriteFile(dir_ + "/shape.json",
            R"({"inputs": {"x": {"kind": "bytes", "dtype": "uint8", "shape": [10]}},
                "label": {"feature": "y", "kind": "int64"}})");
  WriteFile(dir_ + "/float.json",
            R"({"inputs": {"x": {"kind": "float", "shape": [28, 28]}},
                "label": {"feature": "y", "kind": "int64"}})");
  const std::string train = absl::StrCat("train=", f, "/train-*,validation_split=0.2,spec=");
  const struct {
    std::string data;
    std::string want;
  } cases[] = {
      {absl::StrCat("tfrecord:train=", dir_, "/none-*,spec=", f, "/spec.json"),
       absl::StrCat("train: ", dir_, "/none-* matches no file")},
      {absl::StrCat("tfrecord:train=gs://bucket/train-*,spec=", f, "/spec.json"), "gs://"},
      {absl::StrCat("tfrecord:", train, dir_, "/missing.json"), "missing.json"},
      {absl::StrCat("tfrecord:", train, dir_, "/two_inputs.json"),
       "the model has one input; the spec names 2"},
      {absl::StrCat("tfrecord:", train, dir_, "/shape.json"),
       "shape [10] holds 10 values; the model's input takes [28, 28, 1]"},
      {absl::StrCat("tfrecord:", train, dir_, "/float.json"),
       absl::StrCat(f,
                    "/train-00000-of-00002.tfrecord: record 0 at offset 0: feature \"x\" (x) "
                    "is bytes; the spec says float")},
      {absl::StrCat("tfrecord:", train, f, "/spec.json,train=x"), "train is given twice"},
      {absl::StrCat("parquet:train=", f), "not a readable file"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.data);
    const RunResult r = Run({BinPath("pscluster"), "launch", "--ps=1", "--workers=1", "--",
                             "--data=" + c.data, "--model=mlp", "--epochs=1"});
    EXPECT_EQ(r.exit.ToString(), "exit 2") << r.out << r.err;
    EXPECT_THAT(r.out + r.err, HasSubstr(c.want));
  }

  // A flipped data CRC in the second shard: exit 2 naming the file and
  // offset; skipped and counted with --skip_corrupt_records; over
  // --max_skipped_fraction the job fails.
  const std::string shard = f + "/train-00001-of-00002.tfrecord";
  std::string bytes = ReadFile(shard);
  ASSERT_GT(bytes.size(), 2000u);
  bytes[100] ^= 1;  // inside the first record's data (12 header bytes, ~800 of data)
  WriteFile(shard, bytes);
  const std::string data = absl::StrCat("--data=tfrecord:", train, f, "/spec.json");
  RunResult r = Run({BinPath("pscluster"), "launch", "--ps=1", "--workers=1", "--", data,
                     "--model=mlp", "--epochs=1"});
  EXPECT_EQ(r.exit.ToString(), "exit 2") << r.out << r.err;
  EXPECT_THAT(r.out + r.err,
              HasSubstr(absl::StrCat(shard, ": bad data CRC in the record at offset 0")));
  const std::string out = dir_ + "/skipped.json";
  r = Run({BinPath("pscluster"), "launch", "--ps=1", "--workers=1", "--", data,
           "--skip_corrupt_records", "--model=mlp", "--epochs=1", "--steps_per_epoch=5",
           "--intra_op_threads=1", "--eval_threads=1", "--metrics_out=" + out});
  ASSERT_EQ(r.exit.ToString(), "exit 0") << r.out << r.err;
  auto j = nlohmann::json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["data"]["records_skipped"], 1);
  EXPECT_EQ(j["data"]["records_skipped_per_file"][shard], 1);
  EXPECT_EQ(
      j["data"]["train_examples"].get<int64_t>() + j["data"]["validation_examples"].get<int64_t>(),
      2999);
  r = Run({BinPath("pscluster"), "launch", "--ps=1", "--workers=1", "--", data,
           "--skip_corrupt_records", "--max_skipped_fraction=0.0001", "--model=mlp", "--epochs=1"});
  EXPECT_EQ(r.exit.ToString(), "exit 2") << r.out << r.err;
  EXPECT_THAT(r.out + r.err, HasSubstr("1 of 3000 records skipped (--skip_corrupt_records), over "
                                       "--max_skipped_fraction=0.0001"));
}

}  // namespace
}  // namespace testing
}  // namespace psc
