#include "launcher/model_commands.h"

#include <filesystem>
#include <fstream>

#include "common/keras/keras_archive.h"
#include "common/keras/keras_paths.h"
#include "common/keras/weights_h5.h"
#include "common/placement/placement.h"
#include "evaluator/test_checkpoints.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace launcher {
namespace {

using ::testing::HasSubstr;

TEST(DescribeModelTest, PrintsTheSummaryAndThePlacement) {
  auto m = LoadModel("seed_cnn");
  ASSERT_TRUE(m.ok()) << m.status();
  auto text = DescribeModel(m->model, 2);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("Model: \"seed_cnn\""));
  EXPECT_THAT(*text, HasSubstr("conv2d (Conv2D)                      (None, 28, 28, 32)"));
  EXPECT_THAT(*text, HasSubstr("max_pooling2d_2 (MaxPooling2D)       (None, 3, 3, 128)"));
  EXPECT_THAT(*text, HasSubstr("dense (Dense)                        (None, 128)"));
  EXPECT_THAT(*text, HasSubstr("147,584"));  // dense: 1152 * 128 + 128
  EXPECT_THAT(*text, HasSubstr("Total params: 435,306 (1.66 MB)"));
  EXPECT_THAT(*text, HasSubstr("Output: 10 classes (logits)"));
  EXPECT_THAT(*text, HasSubstr("Variables over 2 parameter servers (--ps=2)"));
  EXPECT_THAT(*text, HasSubstr("dense/kernel"));
  EXPECT_THAT(*text, HasSubstr("glorot_uniform"));
  // Every byte is on some server.
  EXPECT_THAT(*text, HasSubstr("ps:1 holds"));
  EXPECT_EQ(DescribeModel(m->model, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(LoadModel("resnet").status().message()), HasSubstr("unknown model"));
  EXPECT_THAT(std::string(LoadModel("/nonexistent/m.keras").status().message()),
              HasSubstr("/nonexistent/m.keras"));
}

// A functional model of two inputs, each listed with its shape; a
// regression's output is named as one.
constexpr char kTwoInputs[] = R"({"class_name": "Functional", "config": {"name": "two",
  "layers": [
    {"class_name": "InputLayer", "name": "g", "config": {"batch_shape": [null, 2], "name": "g"},
     "inbound_nodes": []},
    {"class_name": "InputLayer", "name": "f", "config": {"batch_shape": [null, 3], "name": "f"},
     "inbound_nodes": []},
    {"class_name": "Concatenate", "name": "cat", "config": {"name": "cat", "axis": -1},
     "inbound_nodes": [{"args": [[{"class_name": "__keras_tensor__",
       "config": {"keras_history": ["g", 0, 0]}}, {"class_name": "__keras_tensor__",
       "config": {"keras_history": ["f", 0, 0]}}]], "kwargs": {}}]},
    {"class_name": "Dense", "name": "out", "config": {"name": "out", "units": 2},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
       "config": {"keras_history": ["cat", 0, 0]}}], "kwargs": {}}]}],
  "input_layers": [["f", 0, 0], ["g", 0, 0]], "output_layers": [["out", 0, 0]]}})";

TEST(DescribeModelTest, SeveralInputsAndARegressionAreNamed) {
  const std::string path = evaluator::testing::TestDir() + "/two.json";
  std::ofstream(path) << kTwoInputs;
  auto m = LoadModel(path);
  ASSERT_TRUE(m.ok()) << m.status();
  auto text = DescribeModel(m->model, 1);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("Input: 2 inputs: f (None, 3), g (None, 2) (float32 but for ids, "
                               "read from integers). Output: 2 "
                               "classes (logits)."));
  text = DescribeModel(m->model, 1, "mean_squared_error");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("Output: 2 units (linear), a regression (mean_squared_error)."));
}

// A Keras 3 config of the layers beyond seed_cnn's: a strided convolution
// without bias, BatchNormalization without beta, "same" average pooling.
constexpr char kBatchNormConfig[] = R"({"class_name": "Sequential", "config": {"name": "bn_net",
  "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [null, 12, 12, 3], "name": "in"}},
    {"class_name": "Conv2D", "config": {"name": "conv2d", "filters": 8, "kernel_size": [3, 3],
      "strides": [2, 2], "padding": "same", "use_bias": false, "activation": "linear"}},
    {"class_name": "BatchNormalization", "config": {"name": "batch_normalization", "axis": -1,
      "momentum": 0.9, "epsilon": 0.001, "center": false, "scale": true}},
    {"class_name": "ReLU", "config": {"name": "re_lu"}},
    {"class_name": "AveragePooling2D", "config": {"name": "average_pooling2d",
      "pool_size": [2, 2], "strides": [1, 1], "padding": "same"}},
    {"class_name": "Flatten", "config": {"name": "flatten"}},
    {"class_name": "Dense", "config": {"name": "dense", "units": 4, "activation": "linear"}}]}})";

TEST(DescribeModelTest, BatchNormalizationsMovingStatisticsAreNotTrainable) {
  const std::string root = evaluator::testing::TestDir();
  const std::string path = root + "/bn_net.json";
  std::ofstream(path) << kBatchNormConfig;
  auto m = LoadModel(path);
  ASSERT_TRUE(m.ok()) << m.status();
  auto text = DescribeModel(m->model, 1);
  ASSERT_TRUE(text.ok()) << text.status();
  // conv 3*3*3*8 = 216; batch norm 3 * 8 = 24 (gamma, moving mean and
  // variance); dense 6*6*8*4 + 4 = 1,156.
  EXPECT_THAT(*text, HasSubstr("conv2d (Conv2D)                      (None, 6, 6, 8)"));
  EXPECT_THAT(*text, HasSubstr("average_pooling2d (AveragePooling2D) (None, 6, 6, 8)"));
  EXPECT_THAT(*text, HasSubstr("Total params: 1,396"));
  EXPECT_THAT(*text, HasSubstr("Trainable params: 1,380"));
  EXPECT_THAT(*text, HasSubstr("Non-trainable params: 16"));
  EXPECT_THAT(*text, HasSubstr("batch_normalization/moving_variance"));
  EXPECT_THAT(*text, HasSubstr("(moving average, momentum 0.9)"));

  // A checkpoint of it exported: the moving statistics are layer
  // batch_normalization's vars/1 and vars/2, after gamma.
  const auto values = evaluator::testing::TestValues(m->model.variables(), 3);
  auto placement = placement::PlaceVariables(m->model.variables(), {1, 1024});
  ASSERT_TRUE(placement.ok());
  ASSERT_TRUE(
      evaluator::testing::WriteCheckpoint(root, 4, *placement, m->model.variables(), values).ok());
  const std::string h5 = root + "/bn_net.weights.h5";
  ASSERT_EQ(*ExportCheckpoint(root, -1, *m, h5), 4);
  std::ifstream in(h5, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(*keras::ReadWeightsH5(bytes, m->model, "w"), values);
  EXPECT_EQ(keras::VariablePaths(m->model)[3], "layers/batch_normalization/vars/2");
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
}

TEST(ExportCheckpointTest, TheNewestCheckpointBecomesKerasFiles) {
  auto m = LoadModel("mlp");
  ASSERT_TRUE(m.ok());
  const std::string root = evaluator::testing::TestDir();
  const auto values5 = evaluator::testing::TestValues(m->model.variables(), 5);
  const auto values9 = evaluator::testing::TestValues(m->model.variables(), 9);
  auto placement = placement::PlaceVariables(m->model.variables(), {2, 1024});
  ASSERT_TRUE(placement.ok());
  ASSERT_TRUE(
      evaluator::testing::WriteCheckpoint(root, 5, *placement, m->model.variables(), values5).ok());
  ASSERT_TRUE(
      evaluator::testing::WriteCheckpoint(root, 9, *placement, m->model.variables(), values9).ok());
  const std::string out = root + "/mlp.keras";
  auto step = ExportCheckpoint(root, -1, *m, out);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 9);
  auto archive = keras::ReadKerasArchive(out, m->model);
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_EQ(archive->config_json, m->config_json);
  auto weights = keras::ReadWeightsH5(archive->weights_h5, m->model, "w");
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(*weights, values9);
  // A chosen step, as a weights file.
  const std::string h5 = root + "/mlp.weights.h5";
  ASSERT_EQ(*ExportCheckpoint(root, 5, *m, h5), 5);
  std::ifstream in(h5, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(*keras::ReadWeightsH5(bytes, m->model, "w"), values5);
  // What is not there, and the checkpoint of another model.
  EXPECT_EQ(ExportCheckpoint(root, 7, *m, out).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ExportCheckpoint(root + "/empty", -1, *m, out).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ExportCheckpoint(root, -1, *m, root + "/model.h5").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto cnn = LoadModel("seed_cnn");
  ASSERT_TRUE(cnn.ok());
  EXPECT_EQ(ExportCheckpoint(root, -1, *cnn, out).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
}

}  // namespace
}  // namespace launcher
}  // namespace psc
