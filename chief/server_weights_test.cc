// The chief's export of a model whose table is trained by rows: the table
// and its Adagrad accumulator are read from two real shards a row at a
// time, the dense variables and their slots whole, and the files written
// (.weights.h5, .keras) hold what the servers hold, optimizer state in
// Keras's order included.
#include "chief/server_weights.h"

#include <hdf5.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chief/shard_control.h"
#include "chief/testing/local_shards.h"
#include "common/io/file_system.h"
#include "common/job/job_export.h"
#include "common/keras/keras_archive.h"
#include "common/keras/keras_config.h"
#include "common/keras/weights_h5.h"
#include "common/optimizer/optimizer.h"
#include "common/tensor/row_sparse.h"
#include "common/tensor/tensor.h"
#include "gtest/gtest.h"
#include "proto/checkpoint.pb.h"

namespace psc {
namespace chief {
namespace server_weights_test {
namespace {

using testing::LocalShards;

// A float32 dataset of the file at `path`, whole.
std::vector<float> ReadDataset(const std::string& path, const std::string& dataset) {
  std::vector<float> values;
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return values;
  hid_t ds = H5Dopen2(file, dataset.c_str(), H5P_DEFAULT);
  if (ds >= 0) {
    hid_t space = H5Dget_space(ds);
    values.resize(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
    if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) {
      values.clear();
    }
    H5Sclose(space);
    H5Dclose(ds);
  }
  H5Fclose(file);
  return values;
}

TEST(ServerWeightsTest, AnExportReadsTablesByRowsAndHoldsWhatTheServersHold) {
  auto model = keras::ModelFromKerasConfig(testing::kBagModel, "bag");
  ASSERT_TRUE(model.ok()) << model.status();
  LocalShards servers(2);
  proto::OptimizerConfig adagrad;
  adagrad.set_kind(proto::OptimizerConfig::ADAGRAD);
  adagrad.set_learning_rate(0.1);
  auto started = testing::StartTableJob(*model, adagrad, &servers);
  ASSERT_TRUE(started.ok()) << started.status();
  const proto::JobSpec& job = (*started)->job;
  const ps_client::ShardedParameters* sharded = (*started)->sharded.get();
  const proto::Placement* placement = &job.placement();
  ASSERT_EQ(placement->variables(0).parts_size(), 2);

  // One push per shard: rows 0 and 2 of each table part, every dense part,
  // so that the accumulators differ row by row.
  for (int s = 0; s < 2; ++s) {
    proto::PushRequest push;
    push.mutable_id()->set_worker(0);
    push.mutable_id()->set_step(0);
    for (const proto::VariablePlacement& vp : placement->variables()) {
      std::vector<int64_t> shape(vp.shape().begin(), vp.shape().end());
      for (const proto::VariablePlacement::Part& part : vp.parts()) {
        if (part.shard() != s) continue;
        proto::NamedTensor* g = push.add_gradients();
        g->set_name(part.shard_variable());
        shape[0] = part.first_axis_size();
        if (vp.gradient() == proto::GRADIENT_ROW_SPARSE) {
          ASSERT_TRUE(tensor::SetRowSparseTensor(shape, {0, 2}, {0.5f, -1, 2, 0.25f},
                                                 proto::DT_FLOAT32, g->mutable_tensor())
                          .ok());
        } else {
          std::vector<float> values(compute::ShapeSize(shape));
          for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i + 1);
          tensor::SetFloatTensor(shape, values, g->mutable_tensor());
        }
      }
    }
    proto::PushResponse pushed;
    absl::Status status = servers.Push(s, push, &pushed, absl::Seconds(10));
    ASSERT_TRUE(status.ok()) << status;
  }

  // What the servers hold, whole (ExportState with the tables in).
  std::vector<std::vector<float>> want;
  std::vector<std::vector<float>> want_slot;
  {
    std::vector<proto::ShardCheckpoint> states(2);
    std::vector<google::protobuf::RepeatedPtrField<proto::NamedTensor>> values(2), slots(2);
    for (int s = 0; s < 2; ++s) {
      proto::ExportStateResponse r;
      ASSERT_TRUE(servers.ExportState(s, proto::ExportStateRequest(), &r).ok());
      ASSERT_TRUE(states[s].ParseFromString(r.state()));
      for (const auto& v : states[s].variables()) {
        proto::NamedTensor* t = values[s].Add();
        t->set_name(v.name());
        *t->mutable_tensor() = v.value();
        ASSERT_EQ(v.slots_size(), 1);
        t = slots[s].Add();
        t->set_name(v.name());
        *t->mutable_tensor() = v.slots(0);
      }
    }
    ASSERT_TRUE(sharded->Assemble({&values[0], &values[1]}, &want).ok());
    ASSERT_TRUE(sharded->Assemble({&slots[0], &slots[1]}, &want_slot).ok());
  }
  ASSERT_NE(want_slot[0][0], want_slot[0][2]) << "row 0 was pushed, row 1 was not";

  const int pulls_before = servers.pulls();
  auto weights = ServerWeights::Create(&job, &*model, &servers, sharded,
                                       /*with_optimizer=*/true, 0.1, absl::Seconds(10));
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_TRUE((*weights)->by_rows(0));
  EXPECT_FALSE((*weights)->by_rows(1));
  const keras::OptimizerState& state = (*weights)->optimizer_state();
  EXPECT_EQ(state.iterations, 1);
  ASSERT_EQ(state.slots.size(), 3u);  // Adagrad: an accumulator per variable, in order
  for (int v = 0; v < 3; ++v) {
    EXPECT_EQ(state.slots[v].variable, v);
    EXPECT_EQ(state.slots[v].slot, 0);
  }

  const std::string dir = ::testing::TempDir() + "/server_weights";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  job::ExportOptions paths{dir + "/m.keras", dir + "/m.weights.h5"};
  absl::Status exported = job::ExportModel(paths, testing::kBagModel, *model, weights->get(), {},
                                           &job.optimizer(), &state,
                                           /*chunk_bytes=*/8);  // a row of the table at a time
  ASSERT_TRUE(exported.ok()) << exported;
  // 10 rows, values and accumulator for the .keras, values for the
  // .weights.h5, each row from the part that holds it: 30 pulls at least.
  EXPECT_GE(servers.pulls() - pulls_before, 30);

  auto bytes = io::LocalFileSystem()->ReadFile(paths.weights);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = keras::ReadWeightsH5(*bytes, *model, "m.weights.h5");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, want);
  auto archive = keras::ReadKerasArchive(paths.keras, *model);
  ASSERT_TRUE(archive.ok()) << archive.status();
  auto in_keras = keras::ReadWeightsH5(archive->weights_h5, *model, "m.keras");
  ASSERT_TRUE(in_keras.ok()) << in_keras.status();
  EXPECT_EQ(*in_keras, want);
  // The optimizer's variables: iterations, the rate, the accumulators.
  const std::string h5 = dir + "/model.weights.h5";
  ASSERT_TRUE(io::LocalFileSystem()->WriteFileAtomically(h5, archive->weights_h5).ok());
  EXPECT_EQ(ReadDataset(h5, "optimizer/vars/1"), std::vector<float>{0.1f});
  for (int v = 0; v < 3; ++v) {
    EXPECT_EQ(ReadDataset(h5, absl::StrCat("optimizer/vars/", v + 2)), want_slot[v]) << v;
  }
  // The file beside the archive is gone; nothing but what was asked is left.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 3);  // m.keras, m.weights.h5, the test's own model.weights.h5

  // A row outside the table is refused, naming it.
  std::vector<float> row(2);
  absl::Status outside = (*weights)->Variable(0, 10, 1, row.data());
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument) << outside;
  EXPECT_NE(outside.message().find("outside the variable"), absl::string_view::npos);
}

}  // namespace
}  // namespace server_weights_test
}  // namespace chief
}  // namespace psc
