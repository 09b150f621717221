#include "common/job/job_model.h"

#include <fstream>

#include "common/data/npz_test_util.h"
#include "common/job/job_export.h"
#include "common/keras/builtin_models.h"
#include "common/keras/keras_archive.h"
#include "common/keras/keras_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace job {
namespace {

using ::testing::HasSubstr;

TEST(JobModelTest, BuiltInNamesAndModelFilesGiveTheSameModel) {
  proto::JobSpec builtin;
  ASSERT_TRUE(SetModel("mlp", &builtin).ok());
  EXPECT_TRUE(builtin.model_config().empty());
  const std::string json = ::testing::TempDir() + "/job_model_mlp.json";
  std::ofstream(json) << keras::BuiltinModelConfig("mlp");
  proto::JobSpec file;
  ASSERT_TRUE(SetModel(json, &file).ok());
  EXPECT_EQ(file.model(), json);
  EXPECT_EQ(file.model_config(), keras::BuiltinModelConfig("mlp"));
  EXPECT_TRUE(file.initial_weights().empty());  // a .json has no weights
  auto a = ModelForJob(builtin), b = ModelForJob(file);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->num_parameters(), b->num_parameters());
  builtin.set_seed(3);
  file.set_seed(3);
  EXPECT_EQ(*InitialParameters(builtin, *a), *InitialParameters(file, *b));
  EXPECT_EQ(ModelConfigJson(builtin), ModelConfigJson(file));
}

TEST(JobModelTest, AKerasArchiveCarriesItsWeightsToTheJob) {
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok());
  const auto weights = model->Initialize(11);
  const std::string path = ::testing::TempDir() + "/job_model.keras";
  ASSERT_TRUE(ExportModel({path, ""}, keras::BuiltinModelConfig("mlp"), *model, weights).ok());
  proto::JobSpec job;
  ASSERT_TRUE(SetModel(path, &job).ok());
  EXPECT_EQ(job.initial_weights(), path);
  job.set_seed(0);  // the archive's weights, not the seed's
  auto params = InitialParameters(job, *model);
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(*params, weights);
}

TEST(JobModelTest, BadModelFilesAreInvalidArgumentNamingTheFile) {
  const std::string dir = ::testing::TempDir();
  proto::JobSpec job;
  auto message = [&](const std::string& model) {
    absl::Status s = SetModel(model, &job);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << model;
    return std::string(s.message());
  };
  EXPECT_THAT(message(dir + "/missing.keras"), HasSubstr("missing.keras"));
  std::ofstream(dir + "/junk.keras") << "junk";
  EXPECT_THAT(message(dir + "/junk.keras"), HasSubstr("not a zip archive"));
  std::ofstream(dir + "/bad.json") << "{\"class_name\": \"Sequential\", \"config\": {\"layers\": "
                                      "[{\"class_name\": \"LSTM\", \"config\": {\"name\": \"lstm\","
                                      " \"batch_input_shape\": [null, 5, 3]}}]}}";
  EXPECT_THAT(message(dir + "/bad.json"), HasSubstr("layer \"lstm\" (LSTM)"));
  // An archive whose weights are another model's.
  auto cnn = keras::BuiltinModel("seed_cnn");
  ASSERT_TRUE(cnn.ok());
  const std::string mixed = dir + "/mixed.keras";
  ASSERT_TRUE(
      ExportModel({mixed, ""}, keras::BuiltinModelConfig("mlp"), *cnn, cnn->Initialize(1)).ok());
  // Larger than the config's variables (within the room an optimizer's
  // state may take: read, and refused by their datasets; far larger ones
  // are refused before they are inflated, keras_archive_test.cc).
  EXPECT_THAT(message(mixed), HasSubstr("do not match the config"));
  // Smaller: read, and refused by their datasets.
  auto mlp = keras::BuiltinModel("mlp");
  ASSERT_TRUE(mlp.ok());
  const std::string smaller = dir + "/smaller.keras";
  ASSERT_TRUE(
      ExportModel({smaller, ""}, keras::BuiltinModelConfig("seed_cnn"), *mlp, mlp->Initialize(1))
          .ok());
  EXPECT_THAT(message(smaller), HasSubstr("the weights do not match the config"));
  EXPECT_THAT(message("resnet"), HasSubstr("unknown model"));
  // Export paths Keras would refuse.
  EXPECT_THAT(std::string(CheckExportOptions({dir + "/m.h5", ""}).message()),
              HasSubstr("must end in .keras"));
  EXPECT_THAT(std::string(CheckExportOptions({"", dir + "/w.h5"}).message()),
              HasSubstr("must end in .weights.h5"));
  EXPECT_THAT(std::string(CheckExportOptions({"/nonexistent/dir/m.keras", ""}).message()),
              HasSubstr("does not exist"));
}

// Tables travel by rows on parameter servers with whole pushes; such a
// job cannot keep the best epoch's weights in the chief.
// keras.Input(shape=(None, 3)): the job's data fixes the length, in the
// config every task reads; without data, or without the array, the flag's
// error says what to give.
TEST(JobModelTest, AnOpenLengthIsTheDatas) {
  const std::string dir = ::testing::TempDir();
  const std::string json = dir + "/job_model_open.json";
  std::ofstream(json) << R"({"class_name": "Sequential", "config": {"name": "open", "layers": [
      {"class_name": "InputLayer", "config": {"name": "seq", "batch_shape": [null, null, 3]}},
      {"class_name": "GlobalAveragePooling1D", "config": {"name": "pool",
       "data_format": "channels_last", "keepdims": false}},
      {"class_name": "Dense", "config": {"name": "out", "units": 2, "activation": "linear",
       "use_bias": true}}]}})";
  const std::string npz = dir + "/job_model_open.npz";
  const std::vector<float> values(5 * 9 * 3, 0.5f);
  data::testing::WriteNpz(
      npz, {{"x_train.npy", data::testing::NpyBytes(data::NpyType::kFloat32, {5, 9, 3},
                                                    values.data(), values.size() * 4)}});
  proto::JobSpec job;
  const absl::Status set = SetModel(json, &job, NumpyInputShapes(npz, "x_train"));
  ASSERT_TRUE(set.ok()) << set;
  auto m = ModelForJob(job);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->input_shape(), compute::Shape({9, 3}));

  auto message = [&](const keras::InputDataShape& data) {
    absl::Status s = SetModel(json, &job, data);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_THAT(message(nullptr), HasSubstr("here there is no data"));
  EXPECT_THAT(message(NumpyInputShapes("", "x_train")), HasSubstr("give --data=FILE.npz"));
  EXPECT_THAT(message(NumpyInputShapes(npz, "x_all")),
              HasSubstr("has no array 'x_all/seq' or 'x_all'"));
}

TEST(JobModelTest, RestoreBestWeightsIsRefusedOnlyWhereTablesTravelByRows) {
  auto model = keras::ModelFromKerasConfig(
      R"({"class_name": "Sequential", "config": {"name": "bag", "layers": [
    {"class_name": "InputLayer", "config": {"name": "ids", "batch_shape": [null, 3], "dtype": "int32"}},
    {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 10, "output_dim": 2}},
    {"class_name": "Flatten", "config": {"name": "flat"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 2}}]}})",
      "bag");
  ASSERT_TRUE(model.ok()) << model.status();
  auto mlp = keras::BuiltinModel("mlp");
  ASSERT_TRUE(mlp.ok());
  proto::JobSpec job;
  EXPECT_TRUE(TablesTravelByRows(job, *model));
  EXPECT_FALSE(TablesTravelByRows(job, *mlp)) << "no table";
  job.mutable_callbacks()->set_restore_best_weights(true);
  absl::Status s = CheckRowTableOptions(job, *model);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--restore_best_weights"));
  EXPECT_TRUE(CheckRowTableOptions(job, *mlp).ok());
  for (int way = 0; way < 3; ++way) {
    proto::JobSpec whole = job;
    if (way == 0) whole.mutable_push()->set_dense_embeddings(true);
    if (way == 1) whole.mutable_push()->set_overlap(true);
    if (way == 2) whole.set_strategy(proto::MULTI_WORKER_MIRRORED);
    EXPECT_FALSE(TablesTravelByRows(whole, *model)) << way;
    EXPECT_TRUE(CheckRowTableOptions(whole, *model).ok()) << way;
  }
}

}  // namespace
}  // namespace job
}  // namespace psc
