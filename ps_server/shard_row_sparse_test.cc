// A shard whose table is declared GRADIENT_ROW_SPARSE (ConfigureRequest.
// gradients): a push carries the rows a step touched; async applies them
// on arrival, sync sums the replicas' rows by id in the fixed order over
// the count; SGD, Adagrad and Ftrl update those rows alone, the other
// optimizers the whole table as Keras's dense update does. Either way the
// table ends exactly where a dense-declared twin fed the same gradients
// scattered into zeros ends. Pulls take rows of it; a worker's full pull
// leaves it out. What is not rows of the table is refused, nothing changed.
#include <filesystem>
#include <string>
#include <vector>

#include "common/optimizer/optimizer.h"
#include "common/tensor/row_sparse.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/checkpoint.pb.h"
#include "ps_server/shard.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kRows = 6, kWidth = 2;

proto::NamedTensor Dense(const std::string& name, const std::vector<int64_t>& shape,
                         const std::vector<float>& values) {
  proto::NamedTensor t;
  t.set_name(name);
  tensor::SetFloatTensor(shape, values, t.mutable_tensor());
  return t;
}

proto::NamedTensor Rows(const std::vector<int64_t>& ids, const std::vector<float>& values) {
  proto::NamedTensor t;
  t.set_name("table");
  EXPECT_TRUE(tensor::SetRowSparseTensor({kRows, kWidth}, ids, values, proto::DT_FLOAT32,
                                         t.mutable_tensor())
                  .ok());
  return t;
}

// The same rows scattered into a dense gradient.
proto::NamedTensor Scattered(const std::vector<int64_t>& ids, const std::vector<float>& values) {
  std::vector<float> dense(kRows * kWidth, 0.0f);
  for (size_t j = 0; j < ids.size(); ++j) {
    for (int64_t k = 0; k < kWidth; ++k) dense[ids[j] * kWidth + k] = values[j * kWidth + k];
  }
  return Dense("table", {kRows, kWidth}, dense);
}

std::unique_ptr<Shard> MakeShard(base::Clock* clock, proto::TrainingMode mode, int replicas,
                                 proto::OptimizerConfig optimizer, bool row_sparse) {
  auto shard = std::make_unique<Shard>(ShardOptions{clock});
  proto::ConfigureRequest c;
  c.set_num_shards(1);
  c.set_num_workers(replicas);
  c.mutable_policy()->set_mode(mode);
  c.mutable_policy()->set_replicas_to_aggregate(replicas);
  *c.mutable_optimizer() = *optimizer::CompleteOptimizerConfig(optimizer);
  if (row_sparse) {
    proto::GradientDeclaration* d = c.add_gradients();
    d->set_variable("table");
    d->set_encoding(proto::GRADIENT_ROW_SPARSE);
  }
  EXPECT_TRUE(shard->Configure(c).ok());
  proto::CreateVariablesRequest create;
  std::vector<float> table(kRows * kWidth);
  for (size_t i = 0; i < table.size(); ++i) table[i] = 0.1f * static_cast<float>(i) - 0.4f;
  *create.add_variables() = Dense("table", {kRows, kWidth}, table);
  *create.add_variables() = Dense("b", {2}, {0.5f, -0.5f});
  proto::CreateVariablesResponse created;
  EXPECT_TRUE(shard->CreateVariables(create, &created).ok());
  return shard;
}

proto::PushRequest PushOf(proto::NamedTensor table, int worker, int64_t step, int slot) {
  proto::PushRequest p;
  p.mutable_id()->set_worker(worker);
  p.mutable_id()->set_step(step);
  p.mutable_id()->set_replica_slot(slot);
  p.set_computed_on_version(step);
  *p.add_gradients() = std::move(table);
  *p.add_gradients() = Dense("b", {2}, {0.25f * (worker + 1), -0.125f});
  return p;
}

std::vector<float> Values(Shard& shard, const std::string& name) {
  proto::PullRequest r;
  r.add_names(name);
  proto::PullResponse resp;
  absl::Status status = absl::UnknownError("not called");
  base::RealClock clock;
  shard.Pull(r, clock.Now() + absl::Seconds(1), &resp, [&](absl::Status s) { status = s; });
  EXPECT_TRUE(status.ok()) << status;
  return tensor::FloatValues(resp.variables(0).tensor());
}

proto::OptimizerConfig Kind(proto::OptimizerConfig::Kind kind, double lr) {
  proto::OptimizerConfig o;
  o.set_kind(kind);
  o.set_learning_rate(lr);
  return o;
}

// Four steps of two replicas (sync) or four pushes (async) whose rows
// overlap, on a row-sparse shard and a dense twin: the same bits.
TEST(ShardRowSparseTest, RowsUpdateTheTableAsTheDenseGradientWould) {
  base::RealClock clock;
  std::vector<proto::OptimizerConfig> optimizers = {
      Kind(proto::OptimizerConfig::SGD, 0.5), Kind(proto::OptimizerConfig::ADAGRAD, 0.3),
      Kind(proto::OptimizerConfig::FTRL, 0.2), Kind(proto::OptimizerConfig::ADAM, 0.05),
      Kind(proto::OptimizerConfig::MOMENTUM, 0.1)};
  proto::OptimizerConfig decayed = Kind(proto::OptimizerConfig::SGD, 0.5);
  decayed.set_weight_decay(0.1);  // every row decays: the dense update
  optimizers.push_back(decayed);
  const std::vector<std::vector<int64_t>> ids = {{1, 4}, {0, 4, 5}, {2}, {}};
  for (proto::TrainingMode mode : {proto::MODE_ASYNC, proto::MODE_SYNC}) {
    for (const proto::OptimizerConfig& o : optimizers) {
      SCOPED_TRACE(absl::StrCat(proto::TrainingMode_Name(mode), " ",
                                optimizer::OptimizerText(*optimizer::CompleteOptimizerConfig(o))));
      const int replicas = mode == proto::MODE_SYNC ? 2 : 1;
      auto sparse = MakeShard(&clock, mode, replicas, o, true);
      auto dense = MakeShard(&clock, mode, replicas, o, false);
      for (int64_t step = 0; step < 4; ++step) {
        for (int slot = 0; slot < replicas; ++slot) {
          const std::vector<int64_t>& rows = ids[(step + slot) % ids.size()];
          std::vector<float> values;
          for (size_t j = 0; j < rows.size() * kWidth; ++j) {
            values.push_back(0.3f * static_cast<float>(j + 1) -
                             0.2f * static_cast<float>(step + slot));
          }
          const int64_t version = mode == proto::MODE_SYNC ? step : step;
          proto::PushResponse a, b;
          ASSERT_TRUE(sparse->Push(PushOf(Rows(rows, values), slot, version, slot), &a).ok());
          ASSERT_TRUE(dense->Push(PushOf(Scattered(rows, values), slot, version, slot), &b).ok());
          EXPECT_EQ(a.outcome(), b.outcome());
        }
      }
      EXPECT_EQ(Values(*sparse, "table"), Values(*dense, "table"));
      EXPECT_EQ(Values(*sparse, "b"), Values(*dense, "b"));
      EXPECT_EQ(sparse->Stats().version(), dense->Stats().version());
    }
  }
}

// Lazy Adam (lazy_rows): only the rows pushed move, their moments too; so a
// row pushed once stays put after, where Keras's Adam (the dense twin)
// keeps moving it.
TEST(ShardRowSparseTest, LazyAdamMovesOnlyTheRowsPushed) {
  base::RealClock clock;
  proto::OptimizerConfig lazy = Kind(proto::OptimizerConfig::ADAM, 0.05);
  lazy.set_lazy_rows(true);
  auto rows = MakeShard(&clock, proto::MODE_ASYNC, 1, lazy, true);
  auto keras =
      MakeShard(&clock, proto::MODE_ASYNC, 1, Kind(proto::OptimizerConfig::ADAM, 0.05), true);
  const std::vector<float> before = Values(*rows, "table");
  proto::PushResponse r;
  ASSERT_TRUE(rows->Push(PushOf(Rows({1}, {1, -1}), 0, 0, 0), &r).ok());
  ASSERT_TRUE(keras->Push(PushOf(Rows({1}, {1, -1}), 0, 0, 0), &r).ok());
  const std::vector<float> after_first = Values(*rows, "table");
  EXPECT_EQ(Values(*keras, "table"), after_first) << "one push: the same update";
  for (int64_t step = 1; step < 3; ++step) {
    ASSERT_TRUE(rows->Push(PushOf(Rows({3}, {0.5f, 0.5f}), 0, step, 0), &r).ok());
    ASSERT_TRUE(keras->Push(PushOf(Rows({3}, {0.5f, 0.5f}), 0, step, 0), &r).ok());
  }
  const std::vector<float> lazy_now = Values(*rows, "table"), keras_now = Values(*keras, "table");
  EXPECT_EQ(lazy_now[2], after_first[2]) << "row 1, not pushed since, stays put";
  EXPECT_NE(keras_now[2], after_first[2]) << "Keras's Adam keeps moving it";
  EXPECT_EQ(lazy_now[0], before[0]) << "row 0, never pushed";
  EXPECT_NE(lazy_now[6], before[6]) << "row 3 moved";
  auto decayed = Kind(proto::OptimizerConfig::ADAM, 0.05);
  decayed.set_lazy_rows(true);
  decayed.set_weight_decay(0.1);
  EXPECT_FALSE(optimizer::CompleteOptimizerConfig(decayed).ok()) << "lazy with weight decay";
}

TEST(ShardRowSparseTest, SgdMovesOnlyTheRowsPushedAndPullsTakeRows) {
  base::RealClock clock;
  auto shard =
      MakeShard(&clock, proto::MODE_ASYNC, 1, Kind(proto::OptimizerConfig::SGD, 1.0), true);
  const std::vector<float> before = Values(*shard, "table");
  proto::PushResponse response;
  {
    absl::Status pushed = shard->Push(PushOf(Rows({1, 4}, {1, 2, 3, 4}), 0, 0, 0), &response);
    ASSERT_TRUE(pushed.ok()) << pushed;
  }
  const std::vector<float> after = Values(*shard, "table");
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t k = 0; k < kWidth; ++k) {
      const size_t i = r * kWidth + k;
      const float g = r == 1 ? (k == 0 ? 1 : 2) : r == 4 ? (k == 0 ? 3 : 4) : 0;
      EXPECT_EQ(after[i], before[i] - g) << "row " << r;
    }
  }
  // Rows of the table alone; a worker's full pull leaves the table out.
  proto::PullRequest rows;
  rows.set_skip_row_sparse(true);
  proto::RowSelection* sel = rows.add_rows();
  sel->set_variable("table");
  sel->set_row_ids(tensor::EncodeRowIds({0, 4}));
  proto::PullResponse pulled;
  absl::Status status = absl::UnknownError("not called");
  shard->Pull(rows, clock.Now() + absl::Seconds(1), &pulled, [&](absl::Status s) { status = s; });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(pulled.variables_size(), 1) << "rows asked without names: the rows alone";
  auto got = tensor::DecodeRowSparse(pulled.variables(0).tensor(), proto::DT_FLOAT32,
                                     {kRows, kWidth}, "rows");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ids, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(got->values, (std::vector<float>{after[0], after[1], after[8], after[9]}));
  proto::PullRequest full;
  full.set_skip_row_sparse(true);
  status = absl::UnknownError("not called");
  shard->Pull(full, clock.Now() + absl::Seconds(1), &pulled, [&](absl::Status s) { status = s; });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(pulled.variables_size(), 1);
  EXPECT_EQ(pulled.variables(0).name(), "b");
  // Bad selections: refused, nothing read.
  for (const auto& [ids, says] : std::vector<std::pair<std::vector<int64_t>, std::string>>{
           {{4, 0}, "not above the one before it"}, {{6}, "row 6 at position 0 is out of range"}}) {
    proto::PullRequest bad;
    proto::RowSelection* s = bad.add_rows();
    s->set_variable("table");
    s->set_row_ids(tensor::EncodeRowIds(ids));
    proto::PullResponse r;
    absl::Status st = absl::UnknownError("not called");
    shard->Pull(bad, clock.Now() + absl::Seconds(1), &r, [&](absl::Status x) { st = x; });
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << says;
    EXPECT_THAT(std::string(st.message()), HasSubstr(says));
  }
}

TEST(ShardRowSparseTest, WhatIsNotRowsOfTheTableIsRefusedAndChangesNothing) {
  base::RealClock clock;
  auto shard =
      MakeShard(&clock, proto::MODE_ASYNC, 1, Kind(proto::OptimizerConfig::SGD, 1.0), true);
  const std::vector<float> before = Values(*shard, "table");
  proto::NamedTensor wide = Rows({1}, {1, 2});
  wide.mutable_tensor()->set_data(std::string(3 * sizeof(float), '\0'));
  proto::NamedTensor unsorted = Rows({1, 2}, {1, 2, 3, 4});
  unsorted.mutable_tensor()->set_row_ids(tensor::EncodeRowIds({2, 1}));
  proto::NamedTensor beyond = Rows({5}, {1, 2});
  beyond.mutable_tensor()->set_row_ids(tensor::EncodeRowIds({6}));
  proto::NamedTensor nonfinite = Rows({3}, {1, std::nanf("")});
  struct Case {
    proto::PushRequest push;
    const char* says;
  };
  std::vector<Case> cases = {
      {PushOf(wide, 0, 0, 0), "(1 rows of 2)"},
      {PushOf(unsorted, 0, 0, 0), "row 1 at position 1 is not above the one before it"},
      {PushOf(beyond, 0, 0, 0), "row 6 at position 0 is out of range (6 rows)"},
      {PushOf(Scattered({1}, {1, 2}), 0, 0, 0),
       "arrives dense; its variable is declared row-sparse"},
      {PushOf(nonfinite, 0, 0, 0), "has a non-finite value in row 3, element 1"},
  };
  proto::PushRequest rows_for_dense = PushOf(Rows({1}, {1, 2}), 0, 0, 0);
  proto::NamedTensor b_rows;
  b_rows.set_name("b");
  ASSERT_TRUE(
      tensor::SetRowSparseTensor({2}, {0}, {1}, proto::DT_FLOAT32, b_rows.mutable_tensor()).ok());
  *rows_for_dense.mutable_gradients(1) = b_rows;
  cases.push_back({rows_for_dense, "arrives row-sparse; its variable is declared dense"});
  for (Case& c : cases) {
    proto::PushResponse response;
    absl::Status s = shard->Push(c.push, &response);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.says;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says));
  }
  EXPECT_EQ(Values(*shard, "table"), before);
  EXPECT_EQ(shard->Stats().pushes_accepted(), 0);
}

TEST(ShardRowSparseTest, ARestoredShardKeepsItsDeclarations) {
  base::RealClock clock;
  auto shard =
      MakeShard(&clock, proto::MODE_ASYNC, 1, Kind(proto::OptimizerConfig::ADAGRAD, 0.1), true);
  proto::PushResponse response;
  ASSERT_TRUE(shard->Push(PushOf(Rows({2}, {1, -1}), 0, 0, 0), &response).ok());
  const std::string dir = ::testing::TempDir() + "/row_sparse_ckpt";
  std::filesystem::remove_all(dir);
  proto::SaveCheckpointRequest save;
  save.set_directory(dir);
  save.set_step(1);
  proto::SaveCheckpointResponse saved;
  ASSERT_TRUE(shard->SaveCheckpoint(save, &saved).ok());
  const std::vector<float> at = Values(*shard, "table");
  ASSERT_TRUE(shard->Push(PushOf(Rows({3}, {1, 1}), 0, 1, 0), &response).ok());
  proto::RestoreCheckpointRequest restore;
  restore.set_directory(dir);
  restore.set_step(-1);
  proto::RestoreCheckpointResponse restored;
  ASSERT_TRUE(shard->RestoreCheckpoint(restore, &restored).ok());
  EXPECT_EQ(Values(*shard, "table"), at);
  EXPECT_TRUE(shard->Push(PushOf(Rows({4}, {1, 1}), 0, 1, 0), &response).ok())
      << "rows still travel row-sparse after the restore";
}

// An export reads a table's optimizer slot by rows (RowSelection.slot) and
// the rest of the shard through ExportState without the table; that state
// is not a checkpoint: ImportState refuses it and keeps the table.
TEST(ShardRowSparseTest, AnExportReadsTheSlotsByRowsAndAStateWithoutTheTable) {
  base::RealClock clock;
  auto shard =
      MakeShard(&clock, proto::MODE_ASYNC, 1, Kind(proto::OptimizerConfig::ADAGRAD, 0.1), true);
  proto::PushResponse response;
  ASSERT_TRUE(shard->Push(PushOf(Rows({2, 5}, {1, -1, 0.5f, 2}), 0, 0, 0), &response).ok());
  proto::ExportStateRequest whole;
  proto::ExportStateResponse exported;
  ASSERT_TRUE(shard->ExportState(whole, &exported).ok());
  proto::ShardCheckpoint state;
  ASSERT_TRUE(state.ParseFromString(exported.state()));
  ASSERT_EQ(state.variables_size(), 2);
  ASSERT_EQ(state.variables(0).name(), "table");
  ASSERT_EQ(state.variables(0).slots_size(), 1);
  const std::vector<float> accumulator = tensor::FloatValues(state.variables(0).slots(0));
  auto pull_rows = [&](int slot, const std::vector<int64_t>& ids, proto::PullResponse* out) {
    proto::PullRequest r;
    proto::RowSelection* sel = r.add_rows();
    sel->set_variable("table");
    sel->set_row_ids(tensor::EncodeRowIds(ids));
    sel->set_slot(slot);
    absl::Status st = absl::UnknownError("not called");
    shard->Pull(r, clock.Now() + absl::Seconds(1), out, [&](absl::Status x) { st = x; });
    return st;
  };
  proto::PullResponse pulled;
  ASSERT_TRUE(pull_rows(1, {2, 3}, &pulled).ok());
  auto got = tensor::DecodeRowSparse(pulled.variables(0).tensor(), proto::DT_FLOAT32,
                                     {kRows, kWidth}, "slot rows");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->values,
            (std::vector<float>{accumulator[4], accumulator[5], accumulator[6], accumulator[7]}));
  EXPECT_NE(accumulator[4], accumulator[6]) << "row 2 was pushed, row 3 was not";
  for (int bad : {2, -1}) {
    absl::Status st = pull_rows(bad, {0}, &pulled);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(st.message()), HasSubstr("has 1 optimizer slot(s)"));
  }
  proto::ExportStateRequest without;
  without.set_skip_row_sparse(true);
  ASSERT_TRUE(shard->ExportState(without, &exported).ok());
  ASSERT_TRUE(state.ParseFromString(exported.state()));
  ASSERT_EQ(state.variables_size(), 1);
  EXPECT_EQ(state.variables(0).name(), "b");
  EXPECT_TRUE(state.row_sparse_left_out());
  const std::vector<float> table = Values(*shard, "table");
  proto::ImportStateRequest import;
  import.set_state(exported.state());
  proto::ImportStateResponse imported;
  absl::Status refused = shard->ImportState(import, &imported);
  EXPECT_EQ(refused.code(), absl::StatusCode::kDataLoss) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("without its row-sparse variables"));
  EXPECT_EQ(Values(*shard, "table"), table);
}

// A small request cannot have the shard make tables without bound: what it
// would make (values and Adagrad's slot) is held to max_generated_bytes,
// RESOURCE_EXHAUSTED and nothing created beyond it.
TEST(ShardRowSparseTest, MadeTablesAreBoundedAndCreateNothingBeyond) {
  base::RealClock clock;
  ShardOptions options{&clock};
  options.max_generated_bytes = 100 * 4 * 2;  // 100 values and their slots
  Shard shard(options);
  proto::ConfigureRequest c;
  c.set_num_shards(1);
  c.set_num_workers(1);
  c.mutable_policy()->set_mode(proto::MODE_ASYNC);
  *c.mutable_optimizer() =
      *optimizer::CompleteOptimizerConfig(Kind(proto::OptimizerConfig::ADAGRAD, 0.1));
  ASSERT_TRUE(shard.Configure(c).ok());
  auto made = [](const std::string& name, int64_t rows) {
    proto::GeneratedVariable g;
    g.set_name(name);
    for (int64_t d : {rows, int64_t{10}}) {
      g.add_shape(d);
      g.add_variable_shape(d);
    }
    g.mutable_initializer()->set_kind(proto::InitializerSpec::RANDOM_UNIFORM);
    g.mutable_initializer()->set_a(-0.05);
    g.mutable_initializer()->set_b(0.05);
    return g;
  };
  proto::CreateVariablesRequest request;
  *request.add_generated() = made("a", 6);
  *request.add_generated() = made("b", 5);  // 110 values in all
  *request.add_variables() = Dense("c", {1}, {1});
  proto::CreateVariablesResponse response;
  absl::Status s = shard.CreateVariables(request, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("800 bytes"));
  request.mutable_generated()->RemoveLast();
  s = shard.CreateVariables(request, &response);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.created(), 2) << "\"c\" and \"a\", after the refusal created nothing";
  *request.add_generated() = made("huge", int64_t{1} << 40);
  EXPECT_EQ(shard.CreateVariables(request, &response).code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
