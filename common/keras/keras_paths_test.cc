#include "common/keras/keras_paths.h"

#include "common/keras/keras_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace keras {
namespace {

TEST(KerasPathsTest, SnakeCaseAsKerasNamesItsClasses) {
  EXPECT_EQ(SnakeCase("Conv2D"), "conv2d");
  EXPECT_EQ(SnakeCase("MaxPooling2D"), "max_pooling2d");
  EXPECT_EQ(SnakeCase("GlobalAveragePooling2D"), "global_average_pooling2d");
  EXPECT_EQ(SnakeCase("BatchNormalization"), "batch_normalization");
  EXPECT_EQ(SnakeCase("ReLU"), "re_lu");
  EXPECT_EQ(SnakeCase("InputLayer"), "input_layer");
  EXPECT_EQ(SnakeCase("Dense"), "dense");
  EXPECT_EQ(SnakeCase("Flatten"), "flatten");
}

TEST(KerasPathsTest, LayersAreNumberedPerClassNotByTheirNames) {
  auto m = BuiltinModel("seed_cnn");
  ASSERT_TRUE(m.ok());
  EXPECT_THAT(LayerGroups(*m),
              ::testing::ElementsAre("layers/conv2d", "layers/conv2d_1", "layers/max_pooling2d",
                                     "layers/conv2d_2", "layers/conv2d_3", "layers/max_pooling2d_1",
                                     "layers/conv2d_4", "layers/conv2d_5", "layers/max_pooling2d_2",
                                     "layers/flatten", "layers/dense", "layers/dense_1"));
  const std::vector<std::string> paths = VariablePaths(*m);
  ASSERT_EQ(paths.size(), m->variables().size());
  EXPECT_EQ(paths[0], "layers/conv2d/vars/0");
  EXPECT_EQ(paths[1], "layers/conv2d/vars/1");
  EXPECT_EQ(paths[15], "layers/dense_1/vars/1");
}

}  // namespace
}  // namespace keras
}  // namespace psc
