// Integration: training on an .npz (--data) with the real daemons: the same
// examples in an .npz train bit for bit as the IDX files do; a cluster trains
// on one; a bad archive is refused before any task starts; and a worker on a
// ~2 GB stored archive keeps its resident set under 1 GB (the archive is
// mapped, not copied). Labelled integration.
#include <zip.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

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

using data::NpyType;
using data::testing::AddIdxSplit;
using data::testing::NpyBytes;
using data::testing::NpzMember;
using data::testing::WriteNpz;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kIdxDir[] = "/usr/share/datasets/fashion-mnist";
constexpr int64_t kPixels = 28 * 28;

class NumpyDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(kIdxDir) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    }
    dir_ = MakeTempDir("numpy_data");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // Fashion-MNIST as the IDX path splits it: validation = the first 5,000
  // training images, train = the next `train` ones, test = all 10,000.
  std::string WriteFashionNpz(int64_t train) {
    auto images = data::ReadIdxFile(std::string(kIdxDir) + "/train-images-idx3-ubyte.gz");
    auto labels = data::ReadIdxFile(std::string(kIdxDir) + "/train-labels-idx1-ubyte.gz");
    auto test_images = data::ReadIdxFile(std::string(kIdxDir) + "/t10k-images-idx3-ubyte.gz");
    auto test_labels = data::ReadIdxFile(std::string(kIdxDir) + "/t10k-labels-idx1-ubyte.gz");
    EXPECT_TRUE(images.ok() && labels.ok() && test_images.ok() && test_labels.ok());
    if (!images.ok() || !labels.ok() || !test_images.ok() || !test_labels.ok()) return "";
    std::vector<NpzMember> members;
    AddIdxSplit(*images, *labels, 5000, train, "train", &members);
    AddIdxSplit(*images, *labels, 0, 5000, "val", &members);
    AddIdxSplit(*test_images, *test_labels, 0, 10000, "test", &members);
    const std::string path = dir_ + "/fashion.npz";
    WriteNpz(path, members);
    return path;
  }

  nlohmann::json Standalone(const std::vector<std::string>& flags, const std::string& out) {
    std::vector<std::string> argv = {
        BinPath("worker"),      "--standalone",         "--model=mlp",         "--epochs=1",
        "--steps_per_epoch=10", "--intra_op_threads=1", "--metrics_out=" + out};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto r = RunProgram(argv, {}, absl::Seconds(240));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    EXPECT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
    return nlohmann::json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
  }

  std::string dir_;
};

TEST_F(NumpyDataTest, TheSameExamplesInAnNpzTrainBitForBitAsTheIdxFiles) {
  const std::string npz = WriteFashionNpz(6400);
  ASSERT_FALSE(npz.empty());
  auto idx = Standalone({"--max_train_examples=6400"}, dir_ + "/idx.json");
  auto from_npz = Standalone({"--data=" + npz}, dir_ + "/npz.json");
  ASSERT_FALSE(idx.is_discarded() || from_npz.is_discarded());
  EXPECT_EQ(from_npz["final_variables_sha256"], idx["final_variables_sha256"]);
  EXPECT_EQ(from_npz["epochs"][0]["loss"], idx["epochs"][0]["loss"]);
  EXPECT_EQ(from_npz["epochs"][0]["val_loss"], idx["epochs"][0]["val_loss"]);
  EXPECT_EQ(from_npz["test_accuracy"], idx["test_accuracy"]);
  // Where the data came from and how it was preprocessed, in both files.
  EXPECT_EQ(from_npz["data"]["source"], "npz:" + npz);
  EXPECT_EQ(idx["data"]["source"], std::string("fashion-mnist:") + kIdxDir);
  EXPECT_EQ(from_npz["data"]["preprocessing"]["kind"], "standardize");
  EXPECT_EQ(from_npz["data"]["preprocessing"]["mean"], idx["data"]["preprocessing"]["mean"]);
  EXPECT_EQ(from_npz["data"]["preprocessing"]["std"], idx["data"]["preprocessing"]["std"]);
  EXPECT_EQ(from_npz["data"]["train_examples"], 6400);
  EXPECT_EQ(from_npz["data"]["validation_examples"], 5000);
  EXPECT_EQ(from_npz["data"]["test_examples"], 10000);

  // --rescale changes what the model sees, and is recorded.
  auto rescaled = Standalone({"--data=" + npz, "--rescale=1/255"}, dir_ + "/rescaled.json");
  ASSERT_FALSE(rescaled.is_discarded());
  EXPECT_EQ(rescaled["data"]["preprocessing"]["kind"], "rescale");
  EXPECT_DOUBLE_EQ(rescaled["data"]["preprocessing"]["scale"].get<double>(), 1.0 / 255);
  EXPECT_NE(rescaled["final_variables_sha256"], idx["final_variables_sha256"]);
}

TEST_F(NumpyDataTest, AClusterTrainsOnAnNpzWithValidationFromTheEnd) {
  // No x_val: --validation_split=0.25 takes the last quarter of x_train, as
  // Keras's fit does.
  auto images = data::ReadIdxFile(std::string(kIdxDir) + "/train-images-idx3-ubyte.gz");
  auto labels = data::ReadIdxFile(std::string(kIdxDir) + "/train-labels-idx1-ubyte.gz");
  ASSERT_TRUE(images.ok() && labels.ok());
  std::vector<NpzMember> members;
  AddIdxSplit(*images, *labels, 0, 8000, "train", &members);
  const std::string npz = dir_ + "/train_only.npz";
  WriteNpz(npz, members);
  const std::string out = dir_ + "/cluster.json";
  auto r = RunProgram(
      {BinPath("pscluster"), "launch", "--ps=1", "--workers=2", "--", "--data=" + npz,
       "--validation_split=0.25", "--model=mlp", "--epochs=2", "--steps_per_epoch=10",
       "--intra_op_threads=1", "--eval_threads=1", "--unit_steps=5", "--metrics_out=" + out},
      {}, absl::Seconds(240));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  EXPECT_THAT(r->out, HasSubstr("job ok: mlp"));
  EXPECT_THAT(r->out, HasSubstr("no test split"));
  auto j = nlohmann::json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["data"]["train_examples"], 6000);
  EXPECT_EQ(j["data"]["validation_examples"], 2000);
  EXPECT_EQ(j["data"]["test_examples"], 0);
  EXPECT_TRUE(j["test_loss"].is_null());
  ASSERT_EQ(j["epochs"].size(), 2u);
  EXPECT_GT(j["epochs"][1]["val_accuracy"].get<double>(), 0.5);
  EXPECT_EQ(j["gradients_accepted"], 2 * 10 * 2);
}

TEST_F(NumpyDataTest, BadDataIsExitTwoBeforeAnyTaskStarts) {
  auto images = data::ReadIdxFile(std::string(kIdxDir) + "/train-images-idx3-ubyte.gz");
  auto labels = data::ReadIdxFile(std::string(kIdxDir) + "/train-labels-idx1-ubyte.gz");
  ASSERT_TRUE(images.ok() && labels.ok());
  const uint8_t bad_labels[4] = {1, 2, 10, 3};
  const std::string corrupt = dir_ + "/corrupt.npz";
  WriteFile(corrupt, "PK\x03\x04 this is no zip archive");
  struct Case {
    std::string name;
    std::vector<NpzMember> members;
    std::vector<std::string> flags;
    std::string want;
  };
  std::vector<Case> cases = {
      {"wrong_shape",
       {{"x_train.npy", NpyBytes(NpyType::kUint8, {4, 32, 32}, images->data.data(), 4 * 1024)},
        {"y_train.npy", NpyBytes(NpyType::kUint8, {4}, labels->data.data(), 4)}},
       {"--validation_split=0.5"},
       "examples of shape (32, 32, 1) for a model whose input is (28, 28, 1)"},
      {"labels_out_of_range",
       {{"x_train.npy", NpyBytes(NpyType::kUint8, {4, 28, 28}, images->data.data(), 4 * kPixels)},
        {"y_train.npy", NpyBytes(NpyType::kUint8, {4}, bad_labels, 4)}},
       {"--validation_split=0.5"},
       "10"},
      {"missing_labels",
       {{"x_train.npy", NpyBytes(NpyType::kUint8, {4, 28, 28}, images->data.data(), 4 * kPixels)}},
       {"--validation_split=0.5"},
       "no array 'y_train' (it has: x_train)"},
      {"no_validation",
       {{"x_train.npy", NpyBytes(NpyType::kUint8, {4, 28, 28}, images->data.data(), 4 * kPixels)},
        {"y_train.npy", NpyBytes(NpyType::kUint8, {4}, labels->data.data(), 4)}},
       {},
       "give --validation_split"},
      {"corrupt", {}, {}, corrupt},
  };
  // A NaN in a float32 row is refused at start in every preprocessing mode,
  // naming the row of the user's array (row 3 is in the validation rows
  // of the split, Keras's last half).
  std::vector<float> with_nan(4 * kPixels, 0.25f);
  with_nan[3 * kPixels + 28 * 7 + 9] = std::nanf("");
  for (const std::string mode : {"--standardize", "--nostandardize", "--rescale=1/255"}) {
    cases.push_back({"nan" + mode.substr(2, 5),
                     {{"x_train.npy", NpyBytes(NpyType::kFloat32, {4, 28, 28}, with_nan.data(),
                                               with_nan.size() * sizeof(float))},
                      {"y_train.npy", NpyBytes(NpyType::kUint8, {4}, labels->data.data(), 4)}},
                     {"--validation_split=0.5", mode},
                     "x_train row 3, element (7, 9) of the example, is nan"});
  }
  for (const Case& c : cases) {
    std::string npz = corrupt;
    if (!c.members.empty()) {
      npz = dir_ + "/" + c.name + ".npz";
      WriteNpz(npz, c.members);
    }
    std::vector<std::string> argv = {
        BinPath("pscluster"), "launch",      "--ps=1",        "--workers=1", "--",
        "--data=" + npz,      "--model=mlp", "--batch_size=2"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    auto r = RunProgram(argv, {}, absl::Seconds(60));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit.ToString(), "exit 2") << c.name << r->out << r->err;
    EXPECT_THAT(r->err, HasSubstr(c.want)) << c.name;
    EXPECT_THAT(r->err, HasSubstr(npz)) << c.name;
    // Nothing was started: no task printed a line.
    EXPECT_THAT(r->out, Not(HasSubstr("[ps:0]"))) << c.name;
    EXPECT_THAT(r->out + r->err, Not(HasSubstr("[chief:0]"))) << c.name;
  }
}

// Training that diverges (a learning rate far too high) ends the job within
// seconds, in sync and in async, naming the worker, the step and the
// variable, with the cause; it is not "recovered" from a checkpoint in a
// loop, and no worker waits --max_pull_wait for a step that cannot complete.
TEST_F(NumpyDataTest, ADivergedJobEndsWithinSecondsNamingTheWorkerStepAndVariable) {
  for (const std::string mode : {"sync", "async"}) {
    const absl::Time start = absl::Now();
    auto r =
        RunProgram({BinPath("pscluster"), "launch", "--ps=2", "--workers=2", "--", "--model=mlp",
                    "--mode=" + mode, "--learning_rate=1e30", "--epochs=1", "--steps_per_epoch=20",
                    "--max_train_examples=2560", "--intra_op_threads=1", "--eval_threads=1",
                    "--checkpoint_dir=" + dir_ + "/ckpt_" + mode, "--checkpoint_every_steps=5"},
                   {}, absl::Seconds(120));
    const absl::Duration took = absl::Now() - start;
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NE(r->exit.ToString(), "exit 0") << mode;
    EXPECT_LT(took, absl::Seconds(60)) << mode;
    const std::string all = r->out + r->err;
    EXPECT_THAT(all, ::testing::ContainsRegex("worker:[01], step [0-9]+: the loss is (nan|inf)"))
        << mode << all;
    EXPECT_THAT(all, HasSubstr("the gradient of 'dense")) << mode;
    EXPECT_THAT(all, HasSubstr("lower the learning rate, now 1e+30")) << mode;
    EXPECT_THAT(all, HasSubstr("cannot be redone")) << mode;
    EXPECT_THAT(all, HasSubstr("The last checkpoint is step 0 in " + dir_ + "/ckpt_" + mode))
        << mode;
    EXPECT_THAT(all, Not(HasSubstr("restored every shard"))) << mode;
  }
}

// --early_stopping_*: a job of 30 epochs ends when the monitor stops
// improving, records when and why, and with --restore_best_weights its
// test evaluation is the best epoch's (in worker --standalone as in the
// cluster; tests/interop checks the decisions against Keras's own
// EarlyStopping).
TEST_F(NumpyDataTest, EarlyStoppingEndsTheJobAndRecordsWhy) {
  const std::string out = dir_ + "/es.json";
  auto r = RunProgram(
      {BinPath("worker"), "--standalone", "--model=mlp", "--epochs=30", "--steps_per_epoch=4",
       "--batch_size=64", "--max_train_examples=2000", "--optimizer=sgd", "--learning_rate=0.5",
       "--early_stopping_monitor=val_accuracy", "--early_stopping_patience=0",
       "--restore_best_weights", "--intra_op_threads=1", "--metrics_out=" + out},
      {}, absl::Seconds(240));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  auto j = nlohmann::json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded());
  const auto& stopped = j["training_stopped"];
  ASSERT_TRUE(stopped["early"].get<bool>()) << stopped.dump();
  const int64_t epochs = stopped["epochs_trained"].get<int64_t>();
  EXPECT_LT(epochs, 30);
  EXPECT_EQ(stopped["epoch"].get<int64_t>(), epochs);
  EXPECT_THAT(stopped["reason"].get<std::string>(), HasSubstr("val_accuracy did not improve"));
  EXPECT_THAT(r->out, HasSubstr("early stopping after epoch"));
  // patience 0: the last epoch did not improve on the best, an earlier one.
  const int64_t best = stopped["best_epoch"].get<int64_t>();
  ASSERT_GE(best, 1);
  ASSERT_LT(best, epochs);
  double best_val = 0;
  for (const auto& e : j["epochs"]) best_val = std::max(best_val, e["val_accuracy"].get<double>());
  EXPECT_EQ(j["epochs"][best - 1]["val_accuracy"].get<double>(), best_val);
  EXPECT_TRUE(stopped["restored_best_weights"].get<bool>());
}

// x_train: a float32 (n, 28, 28, 1) array of `n` examples, written in chunks
// as a stored member; y_train their classes; x_val / y_val 1,000 more.
void WriteLargeNpz(const std::string& path, int64_t n) {
  zipFile zf = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
  ASSERT_NE(zf, nullptr) << path;
  auto member = [&](const std::string& name, NpyType type, std::vector<int64_t> shape,
                    int64_t count, auto&& element) {
    zip_fileinfo zi = {};
    ASSERT_EQ(zipOpenNewFileInZip64(zf, name.c_str(), &zi, nullptr, 0, nullptr, 0, nullptr, 0, 0,
                                    /*zip64=*/1),
              ZIP_OK);
    const std::string header = data::MakeNpyHeader(type, shape);
    ASSERT_EQ(zipWriteInFileInZip(zf, header.data(), static_cast<unsigned>(header.size())), ZIP_OK);
    std::vector<char> chunk;
    constexpr int64_t kChunk = 1 << 16;  // examples per write
    for (int64_t first = 0; first < count; first += kChunk) {
      const int64_t len = std::min(kChunk, count - first);
      chunk.clear();
      for (int64_t i = first; i < first + len; ++i) element(i, &chunk);
      ASSERT_EQ(zipWriteInFileInZip(zf, chunk.data(), static_cast<unsigned>(chunk.size())), ZIP_OK);
    }
    ASSERT_EQ(zipCloseFileInZip(zf), ZIP_OK);
  };
  // Example i: a bright square at a position its class gives, on noise.
  auto image = [](int64_t i, std::vector<char>* out) {
    float px[kPixels];
    const int c = static_cast<int>(i % 10);
    for (int p = 0; p < kPixels; ++p) {
      const int y = p / 28, x = p % 28;
      const bool on = y / 7 == c / 4 && x / 7 == c % 4;
      px[p] = (on ? 200.0f : 0.0f) + static_cast<float>((i * 31 + p * 17) % 50);
    }
    const char* b = reinterpret_cast<const char*>(px);
    out->insert(out->end(), b, b + sizeof(px));
  };
  auto label = [](int64_t i, std::vector<char>* out) { out->push_back(static_cast<char>(i % 10)); };
  member("x_train.npy", NpyType::kFloat32, {n, 28, 28, 1}, n, image);
  member("y_train.npy", NpyType::kUint8, {n}, n, label);
  member("x_val.npy", NpyType::kFloat32, {1000, 28, 28, 1}, 1000, image);
  member("y_val.npy", NpyType::kUint8, {1000}, 1000, label);
  ASSERT_EQ(zipClose(zf, nullptr), ZIP_OK);
}

TEST_F(NumpyDataTest, AWorkerOnATwoGigabyteNpzStaysUnderOneGigabyteResident) {
  const int64_t n = 680000;  // x 3,136 bytes = 2.13 GB of float32 examples
  const std::string npz = dir_ + "/large.npz";
  WriteLargeNpz(npz, n);
  ASSERT_GT(std::filesystem::file_size(npz), uint64_t{2000000000});
  // Standardizing reads every element twice (mean, then variance); training
  // reads 40 batches of 256.
  auto j = Standalone({"--data=" + npz, "--batch_size=256", "--steps_per_epoch=40"},
                      dir_ + "/large.json");
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["data"]["train_examples"], n);
  EXPECT_EQ(j["data"]["preprocessing"]["kind"], "standardize");
  ASSERT_TRUE(j.contains("peak_rss_mb"));
  const double rss = j["peak_rss_mb"];
  EXPECT_LT(rss, 1024.0) << "a 2.13 GB archive must be mapped, not copied";
  EXPECT_GT(j["epochs"][0]["val_accuracy"].get<double>(), 0.5);  // the squares are learnable
  std::printf("worker on a %.2f GB .npz: peak RSS %.0f MiB\n",
              static_cast<double>(std::filesystem::file_size(npz)) / 1e9, rss);
}

}  // namespace
}  // namespace testing
}  // namespace psc
