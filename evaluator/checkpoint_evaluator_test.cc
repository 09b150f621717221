// The evaluator's core on real checkpoint files: the variables come back bit
// for bit from 1 and 2 shards (a variable split over both), the metrics are
// EvaluateSplit's, and bad checkpoints are clear errors.
#include "evaluator/checkpoint_evaluator.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint_files.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/cpu_conv.h"
#include "common/data/dataset.h"
#include "common/job/evaluation.h"
#include "common/keras/keras_config.h"
#include "common/placement/placement.h"
#include "evaluator/test_checkpoints.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace evaluator {
namespace {

namespace fs = std::filesystem;

using ::testing::HasSubstr;
using testing::MakeShardCheckpoints;
using testing::TestDir;
using testing::TestValues;
using testing::WriteCheckpoint;
using testing::WriteShards;

constexpr char kDataDir[] = "/usr/share/datasets/fashion-mnist";

proto::Placement Place(const compute::Model& model, int shards, int64_t min_shard_bytes) {
  placement::PlacementOptions options;
  options.num_shards = shards;
  options.min_shard_bytes = min_shard_bytes;
  auto placement = placement::PlaceVariables(model.variables(), options);
  EXPECT_TRUE(placement.ok()) << placement.status();
  return placement.ok() ? *placement : proto::Placement();
}

void ExpectBitForBit(const std::vector<std::vector<float>>& got,
                     const std::vector<std::vector<float>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t v = 0; v < want.size(); ++v) {
    ASSERT_EQ(got[v].size(), want[v].size()) << "variable " << v;
    EXPECT_EQ(std::memcmp(got[v].data(), want[v].data(), want[v].size() * sizeof(float)), 0)
        << "variable " << v;
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
}

class CheckpointEvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = keras::BuiltinModel("mlp");
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::make_unique<compute::Model>(*std::move(model));
    values_ = TestValues(model_->variables(), 7);
    root_ = TestDir();
  }

  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::string Data(int64_t step, int shard, int n) const {
    return (fs::path(checkpoint::CheckpointDir(root_, step)) /
            absl::StrCat("shard-", shard, "-of-", n, ".data"))
        .string();
  }

  std::unique_ptr<compute::Model> model_;
  std::vector<std::vector<float>> values_;
  std::string root_;
};

TEST_F(CheckpointEvaluatorTest, OneShardComesBackBitForBit) {
  ASSERT_TRUE(
      WriteCheckpoint(root_, 10, Place(*model_, 1, 256 << 10), model_->variables(), values_).ok());
  auto read = ReadCheckpointVariables(root_, {10, 1}, model_->variables());
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectBitForBit(*read, values_);
}

TEST_F(CheckpointEvaluatorTest, TwoShardsWithPartitionedVariablesComeBackBitForBit) {
  const proto::Placement placement = Place(*model_, 2, 1024);
  int partitioned = 0;
  for (const auto& v : placement.variables()) partitioned += v.parts_size() == 2;
  ASSERT_GE(partitioned, 2) << placement.DebugString();  // both kernels are split
  ASSERT_TRUE(WriteCheckpoint(root_, 20, placement, model_->variables(), values_).ok());
  auto read = ReadCheckpointVariables(root_, {20, 2}, model_->variables());
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectBitForBit(*read, values_);
}

TEST_F(CheckpointEvaluatorTest, MetricsAreEvaluateSplitsOnTheSameParameters) {
  if (!fs::exists(fs::path(kDataDir) / "t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  data::DatasetOptions options;
  options.data_dir = kDataDir;
  options.max_train_examples = 6400;
  auto data = data::LoadFashionMnist(options);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_TRUE(
      WriteCheckpoint(root_, 30, Place(*model_, 2, 1024), model_->variables(), values_).ok());

  auto evaluator = CheckpointEvaluator::Create("mlp", &data->validation, 1);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  auto got = (*evaluator)->Evaluate(root_, {30, 2});
  ASSERT_TRUE(got.ok()) << got.status();

  auto backend = compute::CreateCpuBackend(1);
  ASSERT_TRUE(backend.ok());
  auto executor = compute::Executor::Create(model_.get(), backend->get());
  ASSERT_TRUE(executor.ok());
  ASSERT_TRUE((*executor)->SetParameters(values_).ok());
  auto want = job::EvaluateSplit(executor->get(), data->validation);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(got->loss, want->loss);
  EXPECT_EQ(got->accuracy, want->accuracy);
  EXPECT_EQ(got->examples, 5000);
  EXPECT_EQ(got->examples, want->examples);

  // A second checkpoint through the same evaluator: other values, other metrics.
  ASSERT_TRUE(WriteCheckpoint(root_, 40, Place(*model_, 1, 256 << 10), model_->variables(),
                              TestValues(model_->variables(), 8))
                  .ok());
  auto second = (*evaluator)->Evaluate(root_, {40, 1});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(second->loss, got->loss);
}

// The job's --conv_algorithm reaches the evaluator's backend: with
// "direct" its metrics are a direct backend's, bit for bit, where the
// default's Winograd convolutions round otherwise.
TEST_F(CheckpointEvaluatorTest, TheJobsConvolutionAlgorithmIsTheEvaluators) {
  if (!compute::WinogradAvailable()) {
    GTEST_SKIP() << "this CPU has no AVX-512, where oneDNN 2.6 has its Winograd kernels: the "
                    "default algorithm is direct here and rounds as --conv_algorithm=direct does";
  }
  auto cnn = keras::BuiltinModel("seed_cnn");
  ASSERT_TRUE(cnn.ok()) << cnn.status();
  const std::vector<std::vector<float>> values = TestValues(cnn->variables(), 5);
  ASSERT_TRUE(WriteCheckpoint(root_, 10, Place(*cnn, 1, 256 << 10), cnn->variables(), values).ok());
  data::Split split;
  split.count = 32;
  split.height = split.width = 28;
  for (int v = 0; v < 256; ++v) split.table[v] = static_cast<float>(v) / 128.0f - 1.0f;
  for (int64_t i = 0; i < split.count * 784; ++i) {
    split.pixels.push_back(static_cast<uint8_t>((i * 2654435761u) >> 24));
  }
  for (int64_t i = 0; i < split.count; ++i) split.labels.push_back(static_cast<int32_t>(i % 10));
  auto metrics_on = [&](compute::ConvAlgorithm conv) {
    compute::CpuBackendOptions cpu;
    cpu.threads = 1;
    cpu.conv = conv;
    auto backend = compute::CreateCpuBackend(cpu);
    EXPECT_TRUE(backend.ok());
    auto executor = compute::Executor::Create(&*cnn, backend->get());
    EXPECT_TRUE(executor.ok());
    EXPECT_TRUE((*executor)->SetParameters(values).ok());
    return job::EvaluateSplit(executor->get(), split).value();
  };
  const job::SplitMetrics direct = metrics_on(compute::ConvAlgorithm::kDirect);
  ASSERT_NE(direct.loss, metrics_on(compute::ConvAlgorithm::kAuto).loss)
      << "the algorithms must round differently for this test to tell them apart";
  compute::CpuBackendOptions cpu;
  cpu.threads = 1;
  cpu.conv = compute::ConvAlgorithm::kDirect;
  auto evaluator = CheckpointEvaluator::Create(*cnn, &split, cpu);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  auto got = (*evaluator)->Evaluate(root_, {10, 1});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->loss, direct.loss);
}

TEST_F(CheckpointEvaluatorTest, CreateRejectsBadArguments) {
  data::Split empty;
  EXPECT_EQ(CheckpointEvaluator::Create("mlp", &empty, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckpointEvaluator::Create("mlp", nullptr, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  data::Split one;
  one.count = 1;
  one.height = one.width = 28;
  one.pixels.assign(28 * 28, 0);
  one.labels = {3};
  EXPECT_EQ(CheckpointEvaluator::Create("resnet", &one, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckpointEvaluator::Create("mlp", &one, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CheckpointEvaluatorTest, APlacementForAnotherModelIsFailedPrecondition) {
  auto cnn = keras::BuiltinModel("seed_cnn");
  ASSERT_TRUE(cnn.ok());
  ASSERT_TRUE(WriteCheckpoint(root_, 50, Place(*cnn, 2, 256 << 10), cnn->variables(),
                              TestValues(cnn->variables(), 1))
                  .ok());
  auto read = ReadCheckpointVariables(root_, {50, 2}, model_->variables());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(checkpoint::CheckpointDir(root_, 50)));
  EXPECT_THAT(read.status().message(), HasSubstr("does not fit the model"));
}

TEST_F(CheckpointEvaluatorTest, ACorruptDataFileIsDataLossNamingIt) {
  ASSERT_TRUE(
      WriteCheckpoint(root_, 60, Place(*model_, 2, 1024), model_->variables(), values_).ok());
  std::string data = ReadFile(Data(60, 1, 2));
  data[data.size() / 2] ^= 0x10;
  WriteFile(Data(60, 1, 2), data);
  auto read = ReadCheckpointVariables(root_, {60, 2}, model_->variables());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(Data(60, 1, 2)));
  EXPECT_THAT(read.status().message(), HasSubstr("corrupt"));

  // Through the evaluator too: an error, not a crash.
  data::Split one;
  one.count = 1;
  one.height = one.width = 28;
  one.pixels.assign(28 * 28, 0);
  one.table.fill(0.5f);
  one.labels = {3};
  auto evaluator = CheckpointEvaluator::Create("mlp", &one, 1);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  EXPECT_EQ((*evaluator)->Evaluate(root_, {60, 2}).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointEvaluatorTest, BytesThatAreNotAShardCheckpointAreDataLoss) {
  const std::string garbage("\x0a\xff\xff\xff\xff\x0f", 6);  // a length past the end
  ASSERT_TRUE(checkpoint::WriteShardCheckpoint(root_, 70, 0, 1, garbage).ok());
  auto read = ReadCheckpointVariables(root_, {70, 1}, model_->variables());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("cannot parse"));
  EXPECT_THAT(read.status().message(), HasSubstr(checkpoint::CheckpointDir(root_, 70)));
}

TEST_F(CheckpointEvaluatorTest, AHeaderThatDisagreesWithItsFileIsDataLoss) {
  auto shards = MakeShardCheckpoints(Place(*model_, 2, 1024), model_->variables(), values_, 80);
  ASSERT_TRUE(shards.ok());
  (*shards)[1].set_step(79);
  ASSERT_TRUE(WriteShards(root_, 80, *shards).ok());
  auto read = ReadCheckpointVariables(root_, {80, 2}, model_->variables());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("shard 1 of 2"));
  EXPECT_THAT(read.status().message(), HasSubstr("does not match its file"));
}

TEST_F(CheckpointEvaluatorTest, ShardsThatRecordDifferentPlacementsAreDataLoss) {
  auto shards = MakeShardCheckpoints(Place(*model_, 2, 1024), model_->variables(), values_, 90);
  ASSERT_TRUE(shards.ok());
  *(*shards)[1].mutable_placement() = Place(*model_, 2, 256 << 10);
  ASSERT_TRUE(WriteShards(root_, 90, *shards).ok());
  auto read = ReadCheckpointVariables(root_, {90, 2}, model_->variables());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("another placement"));
}

TEST_F(CheckpointEvaluatorTest, AMissingOrMisshapenVariableIsDataLoss) {
  auto shards = MakeShardCheckpoints(Place(*model_, 2, 1024), model_->variables(), values_, 100);
  ASSERT_TRUE(shards.ok());
  (*shards)[0].mutable_variables()->RemoveLast();
  ASSERT_TRUE(WriteShards(root_, 100, *shards).ok());
  auto read = ReadCheckpointVariables(root_, {100, 2}, model_->variables());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("shard 0 of 2"));

  shards = MakeShardCheckpoints(Place(*model_, 1, 256 << 10), model_->variables(), values_, 110);
  ASSERT_TRUE(shards.ok());
  proto::Tensor* bias = (*shards)[0].mutable_variables(1)->mutable_value();
  bias->set_data(bias->data().substr(4));  // one float short of its shape
  ASSERT_TRUE(WriteShards(root_, 110, *shards).ok());
  read = ReadCheckpointVariables(root_, {110, 1}, model_->variables());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("dense/bias"));

  shards = MakeShardCheckpoints(Place(*model_, 1, 256 << 10), model_->variables(), values_, 120);
  ASSERT_TRUE(shards.ok());
  (*shards)[0].mutable_variables(1)->set_name("dense/kernel");  // a repeated name
  ASSERT_TRUE(WriteShards(root_, 120, *shards).ok());
  read = ReadCheckpointVariables(root_, {120, 1}, model_->variables());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
}

TEST_F(CheckpointEvaluatorTest, NoPlacementOrOneForAnotherShardCountIsFailedPrecondition) {
  auto shards = MakeShardCheckpoints(Place(*model_, 1, 256 << 10), model_->variables(), values_, 5);
  ASSERT_TRUE(shards.ok());
  (*shards)[0].clear_placement();
  ASSERT_TRUE(WriteShards(root_, 5, *shards).ok());
  auto read = ReadCheckpointVariables(root_, {5, 1}, model_->variables());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("no placement"));

  shards = MakeShardCheckpoints(Place(*model_, 1, 256 << 10), model_->variables(), values_, 6);
  ASSERT_TRUE(shards.ok());
  *(*shards)[0].mutable_placement() = Place(*model_, 2, 256 << 10);
  ASSERT_TRUE(WriteShards(root_, 6, *shards).ok());
  read = ReadCheckpointVariables(root_, {6, 1}, model_->variables());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << read.status();
}

TEST_F(CheckpointEvaluatorTest, AnIncompleteCheckpointIsNotFound) {
  ASSERT_TRUE(
      WriteCheckpoint(root_, 7, Place(*model_, 2, 1024), model_->variables(), values_).ok());
  const std::string index =
      (fs::path(checkpoint::CheckpointDir(root_, 7)) / "shard-1-of-2.index").string();
  ASSERT_TRUE(fs::remove(index));
  auto read = ReadCheckpointVariables(root_, {7, 2}, model_->variables());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(index));
  // And a step that is not there at all.
  EXPECT_EQ(ReadCheckpointVariables(root_, {8, 1}, model_->variables()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadCheckpointVariables("", {7, 2}, model_->variables()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadCheckpointVariables(root_, {7, 0}, model_->variables()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace evaluator
}  // namespace psc
