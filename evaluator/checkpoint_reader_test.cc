// A checkpoint read by ranges: a table split over two shards, with an
// optimizer slot, comes back row by row as the shards wrote it; the
// evaluator evaluates a model whose table is trained by rows batch by
// batch, with the results of the whole variables; an export from the
// checkpoint writes what it holds; and the files stay readable when the
// checkpoint is pruned while open.
#include "evaluator/checkpoint_reader.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compute/cpu_backend.h"
#include "common/io/faulty_file_system.h"
#include "common/io/file_system.h"
#include "common/job/evaluation.h"
#include "common/job/job_export.h"
#include "common/keras/keras_config.h"
#include "common/keras/weights_h5.h"
#include "common/placement/placement.h"
#include "common/tensor/row_sparse.h"
#include "evaluator/checkpoint_evaluator.h"
#include "evaluator/test_checkpoints.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace evaluator {
namespace checkpoint_reader_test {
namespace {

using ::testing::HasSubstr;

// Ids (3,) of a table of 200 rows of 8, flattened into a Dense.
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {"name": "bag", "layers": [
  {"class_name": "InputLayer", "config": {"name": "ids", "batch_shape": [null, 3], "dtype": "int32"}},
  {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 200, "output_dim": 8}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3}}]}})";

class CheckpointReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = keras::ModelFromKerasConfig(kModel, "bag");
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::make_unique<compute::Model>(*std::move(model));
    placement::PlacementOptions options;
    options.num_shards = 2;
    options.min_shard_bytes = 16;  // the table split over both
    auto placement = placement::PlaceVariables(model_->variables(), options);
    ASSERT_TRUE(placement.ok()) << placement.status();
    ASSERT_TRUE(placement::DeclareGradients(0, model_->moving_averages(), &*placement,
                                            model_->table_variables())
                    .ok());
    placement_ = *placement;
    ASSERT_EQ(placement_.variables(0).parts_size(), 2);
    ASSERT_EQ(placement_.variables(0).gradient(), proto::GRADIENT_ROW_SPARSE);
    values_ = testing::TestValues(model_->variables(), 3);
    slots_ = testing::TestValues(model_->variables(), 4);
    // Each shard variable with one slot (an Adagrad accumulator, say).
    auto shards = testing::MakeShardCheckpoints(placement_, model_->variables(), values_, 20);
    ASSERT_TRUE(shards.ok()) << shards.status();
    auto slot_shards = testing::MakeShardCheckpoints(placement_, model_->variables(), slots_, 20);
    ASSERT_TRUE(slot_shards.ok());
    for (size_t s = 0; s < shards->size(); ++s) {
      for (int v = 0; v < (*shards)[s].variables_size(); ++v) {
        *(*shards)[s].mutable_variables(v)->add_slots() = (*slot_shards)[s].variables(v).value();
      }
    }
    root_ = testing::TestDir();
    ASSERT_TRUE(testing::WriteShards(root_, 20, *shards).ok());
    checkpoint_ = {20, 2};
  }

  std::unique_ptr<compute::Model> model_;
  proto::Placement placement_;
  std::vector<std::vector<float>> values_, slots_;
  std::string root_;
  checkpoint::CompleteCheckpoint checkpoint_;
};

TEST_F(CheckpointReaderTest, RowsOfValuesAndSlotsComeBackAsWritten) {
  auto reader = CheckpointReader::Open(root_, checkpoint_, model_->variables());
  ASSERT_TRUE(reader.ok()) << reader.status();
  // Rows 95..104 cross from ps:0's part into ps:1's.
  std::vector<float> rows(10 * 8);
  ASSERT_TRUE((*reader)->Rows(0, 0, 95, 10, rows.data()).ok());
  EXPECT_EQ(rows, std::vector<float>(values_[0].begin() + 95 * 8, values_[0].begin() + 105 * 8));
  ASSERT_TRUE((*reader)->Slot(0, 0, 95, 10, rows.data()).ok());
  EXPECT_EQ(rows, std::vector<float>(slots_[0].begin() + 95 * 8, slots_[0].begin() + 105 * 8));
  std::vector<float> bias(3);
  ASSERT_TRUE((*reader)->Variable(2, 0, 3, bias.data()).ok());
  EXPECT_EQ(bias, values_[2]);
  auto whole = ReadCheckpointVariables(root_, checkpoint_, model_->variables());
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, values_);

  absl::Status outside = (*reader)->Rows(0, 0, 195, 6, rows.data());
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument) << outside;
  EXPECT_THAT(outside.message(), HasSubstr("rows [195, 201) of \"emb/embeddings\""));
  absl::Status slot = (*reader)->Rows(0, 2, 0, 1, rows.data());
  EXPECT_EQ(slot.code(), absl::StatusCode::kInvalidArgument) << slot;
  EXPECT_THAT(slot.message(), HasSubstr("has 1 optimizer slot(s); slot 2 asked"));

  // A pull of rows of ps:1's part, as the shard would answer it.
  const proto::VariablePlacement::Part& part = placement_.variables(0).parts(1);
  proto::PullRequest request;
  proto::RowSelection* sel = request.add_rows();
  sel->set_variable(part.shard_variable());
  sel->set_row_ids(tensor::EncodeRowIds({0, 7, 8}));
  proto::PullResponse response;
  ASSERT_TRUE((*reader)->FillPull(part.shard(), request, &response).ok());
  std::vector<int64_t> part_shape = {part.first_axis_size(), 8};
  auto got = tensor::DecodeRowSparse(response.variables(0).tensor(), proto::DT_FLOAT32, part_shape,
                                     "rows");
  ASSERT_TRUE(got.ok()) << got.status();
  for (int i : {0, 7, 8}) {
    const int64_t row = part.first_axis_offset() + i;
    const size_t j = i == 0 ? 0 : i == 7 ? 1 : 2;
    EXPECT_EQ(std::vector<float>(got->values.begin() + j * 8, got->values.begin() + (j + 1) * 8),
              std::vector<float>(values_[0].begin() + row * 8, values_[0].begin() + (row + 1) * 8));
  }
  EXPECT_EQ((*reader)->FillPull(1 - part.shard(), request, &response).code(),
            absl::StatusCode::kInvalidArgument)
      << "another shard's variable";

  // Pruned while open: the files read on.
  std::filesystem::remove_all(root_);
  ASSERT_TRUE((*reader)->Rows(0, 0, 0, 200, std::vector<float>(200 * 8).data()).ok());
}

TEST_F(CheckpointReaderTest, TheEvaluatorReadsATableBatchByBatchWithTheWholeModelsResults) {
  // 600 examples (3 batches of 250, 250 and 100) of ids in every part.
  data::Split split;
  split.count = 600;
  split.height = 3;
  split.width = 1;
  uint32_t x = 12345;
  for (int64_t i = 0; i < split.count * 3; ++i) {
    x = x * 1103515245u + 12345u;
    split.pixels.push_back(static_cast<uint8_t>((x >> 16) % 200));
  }
  for (int64_t i = 0; i < split.count; ++i) split.labels.push_back(static_cast<int32_t>(i % 3));
  for (int i = 0; i < 256; ++i) split.table[i] = static_cast<float>(i);  // raw ids
  auto evaluator = CheckpointEvaluator::Create(*model_, &split, 1);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  auto got = (*evaluator)->Evaluate(root_, checkpoint_);
  ASSERT_TRUE(got.ok()) << got.status();

  auto backend = compute::CreateCpuBackend({});
  ASSERT_TRUE(backend.ok());
  auto whole = compute::Executor::Create(model_.get(), backend->get());
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE((*whole)->SetParameters(values_).ok());
  auto want = job::EvaluateSplit(whole->get(), split);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(got->examples, 600);
  EXPECT_NEAR(got->loss, want->loss, 1e-6);
  EXPECT_EQ(got->accuracy, want->accuracy);
  // Again (the local model kept), the same.
  auto again = (*evaluator)->Evaluate(root_, checkpoint_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->loss, got->loss);
}

// A read that fails anywhere (the size, the crc32 pass, the walk) is
// DATA_LOSS or INTERNAL with the file system's message, never a parse error.
TEST_F(CheckpointReaderTest, AReadThatFailsIsReportedAsItFailed) {
  int failed = 0;
  for (int after = 0; after < 8; ++after) {
    io::FaultyFileSystem faulty;
    faulty.Fail(io::Op::kRead, ".data", absl::InternalError("EIO on the disk"), after);
    auto reader = CheckpointReader::Open(root_, checkpoint_, model_->variables(), &faulty);
    if (reader.ok()) continue;
    ++failed;
    EXPECT_THAT(reader.status().message(), HasSubstr("EIO on the disk")) << "after " << after;
  }
  EXPECT_GE(failed, 4) << "the size, the open, the crc32 pass and the walk read the file";
}

TEST_F(CheckpointReaderTest, AnExportFromTheCheckpointHoldsWhatItHolds) {
  auto reader = CheckpointReader::Open(root_, checkpoint_, model_->variables());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const std::string path = root_ + "/out.weights.h5";
  ASSERT_TRUE(job::ExportModel({"", path}, kModel, *model_, reader->get(), {}, nullptr, nullptr,
                               /*chunk_bytes=*/7 * 8 * 4)
                  .ok());
  auto bytes = io::LocalFileSystem()->ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  auto back = keras::ReadWeightsH5(*bytes, *model_, path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, values_);
}

}  // namespace
}  // namespace checkpoint_reader_test
}  // namespace evaluator
}  // namespace psc
