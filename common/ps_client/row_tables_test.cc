// A step's ids become local rows; the rows pulled land there, and the local
// gradient's rows go back under their ids, each part's counted from its
// first row.
#include "common/ps_client/row_tables.h"

#include <vector>

#include "common/keras/keras_config.h"
#include "common/placement/placement.h"
#include "common/tensor/row_sparse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_client {
namespace {

using ::testing::HasSubstr;

// Ids (3,) of a table of 10 rows of 2, flattened into a Dense.
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {"name": "bag", "layers": [
  {"class_name": "InputLayer", "config": {"name": "ids", "batch_shape": [null, 3], "dtype": "int32"}},
  {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 10, "output_dim": 2}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 2}}]}})";

TEST(RowTablesTest, AStepsIdsAreLocalRowsPulledAndPushedByTheirOwners) {
  auto model = keras::ModelFromKerasConfig(kModel, "bag");
  ASSERT_TRUE(model.ok()) << model.status();
  placement::PlacementOptions options;
  options.num_shards = 2;
  options.min_shard_bytes = 16;  // the table split: rows 0-4 on one, 5-9 on the other
  auto placement = placement::PlaceVariables(model->variables(), options);
  ASSERT_TRUE(placement.ok());
  ASSERT_TRUE(placement::DeclareGradients(0, model->moving_averages(), &*placement,
                                          model->table_variables())
                  .ok());
  ASSERT_EQ(placement->variables(0).parts_size(), 2);
  auto tables = RowTables::Create(*model, *placement, /*examples=*/2);
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_NE(*tables, nullptr);
  RowTables& t = **tables;
  EXPECT_TRUE(t.is_table(0));
  EXPECT_EQ(t.dense_variables(), (std::vector<int>{1, 2}));
  auto local = t.LocalModel(*model);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->variables()[0].name, "emb/embeddings");
  EXPECT_EQ(local->variables()[0].shape, (compute::Shape{6, 2})) << "2 examples of 3 ids";

  // Two examples, ids 7, 2, 7 and 9, 2, 0: rows 0, 2, 7, 9 are local 0-3.
  std::vector<float> inputs = {7, 2, 7, 9, 2, 0};
  ASSERT_TRUE(t.Remap(&inputs, 2, 3).ok());
  EXPECT_EQ(inputs, (std::vector<float>{2, 1, 2, 3, 1, 0}));
  EXPECT_EQ(t.step_ids(0), (std::vector<int64_t>{0, 2, 7, 9}));
  std::vector<proto::PullRequest> pulls(2);
  t.AddRowPulls(&pulls);
  const auto& parts = placement->variables(0).parts();
  for (int p = 0; p < 2; ++p) {
    const int s = parts[p].shard();
    ASSERT_EQ(pulls[s].rows_size(), 1);
    EXPECT_EQ(pulls[s].rows(0).variable(), parts[p].shard_variable());
    auto ids = tensor::DecodeRowIds(pulls[s].rows(0).row_ids(), 5, "ids");
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, (p == 0 ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{2, 4}));
  }
  // The servers' answers: rows with values 10 x global id + column.
  std::vector<proto::PullResponse> answers(2);
  for (int p = 0; p < 2; ++p) {
    const int s = parts[p].shard();
    const std::vector<int64_t> ids =
        p == 0 ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{2, 4};
    std::vector<float> values;
    for (int64_t id : ids) {
      for (int k = 0; k < 2; ++k) values.push_back(10.0f * (id + 5 * p) + k);
    }
    proto::NamedTensor* x = answers[s].add_variables();
    x->set_name(parts[p].shard_variable());
    ASSERT_TRUE(
        tensor::SetRowSparseTensor({5, 2}, ids, values, proto::DT_FLOAT32, x->mutable_tensor())
            .ok());
  }
  std::vector<std::vector<float>> values(3);
  ASSERT_TRUE(t.TakeRows(answers, &values).ok());
  EXPECT_EQ(values[0], (std::vector<float>{0, 1, 20, 21, 70, 71, 90, 91, 0, 0, 0, 0}));
  // The local gradient's first 4 rows go back under ids 0, 2 | 7, 9.
  std::vector<std::vector<float>> grads = {{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0}, {}, {}};
  std::vector<std::vector<proto::NamedTensor>> split(2);
  ASSERT_TRUE(t.EncodeGradients(grads, proto::DT_FLOAT32, &split).ok());
  for (int p = 0; p < 2; ++p) {
    const int s = parts[p].shard();
    ASSERT_EQ(split[s].size(), 1u);
    auto rows = tensor::DecodeRowSparse(split[s][0].tensor(), proto::DT_FLOAT32, {5, 2}, "g");
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_EQ(rows->ids, (p == 0 ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{2, 4}));
    EXPECT_EQ(rows->values,
              (p == 0 ? std::vector<float>{1, 2, 3, 4} : std::vector<float>{5, 6, 7, 8}));
  }
  // Rows other than those asked are refused; so is an id out of range.
  answers[parts[0].shard()].mutable_variables(0)->mutable_tensor()->set_row_ids(
      tensor::EncodeRowIds({0, 3}));
  EXPECT_THAT(std::string(t.TakeRows(answers, &values).message()), HasSubstr("were not asked"));
  std::vector<float> bad = {7, 2, 10, 9, 2, 0};
  EXPECT_THAT(std::string(t.Remap(&bad, 2, 3).message()),
              HasSubstr("id 10 is not a row of a table of 10 rows"));
}

TEST(RowTablesTest, NoRowSparseTableIsNone) {
  auto model = keras::ModelFromKerasConfig(kModel, "bag");
  ASSERT_TRUE(model.ok()) << model.status();
  auto placement = placement::PlaceVariables(model->variables(), {1});
  ASSERT_TRUE(placement.ok());
  auto tables = RowTables::Create(*model, *placement, 2);
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(*tables, nullptr) << "a dense-declared table travels whole";
}

}  // namespace
}  // namespace ps_client
}  // namespace psc
