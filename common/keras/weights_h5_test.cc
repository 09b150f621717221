#include "common/keras/weights_h5.h"

#include <hdf5.h>

#include "common/keras/keras_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace keras {
namespace {

using ::testing::HasSubstr;

TEST(WeightsH5Test, RoundTripsEveryVariableBitForBit) {
  auto m = BuiltinModel("seed_cnn");
  ASSERT_TRUE(m.ok());
  const auto params = m->Initialize(5);
  auto bytes = WeightsH5Bytes(*m, params);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->substr(0, 4), "\x89HDF");
  auto back = ReadWeightsH5(*bytes, *m, "w.h5");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, params);
}

TEST(WeightsH5Test, WeightsThatDoNotMatchTheConfigAreRefusedNamingTheDataset) {
  auto cnn = BuiltinModel("seed_cnn");
  auto mlp = BuiltinModel("mlp");
  ASSERT_TRUE(cnn.ok() && mlp.ok());
  auto mlp_bytes = WeightsH5Bytes(*mlp, mlp->Initialize(1));
  ASSERT_TRUE(mlp_bytes.ok());
  // The mlp's weights for the CNN: its layers/dense/vars/0 is (784, 128).
  auto wrong = ReadWeightsH5(*mlp_bytes, *cnn, "w.h5");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.status().message()),
              HasSubstr("w.h5: layers/conv2d/vars (layer \"conv2d\", Conv2D) holds 0 variables; "
                        "the config gives it 2"));
  auto cnn_bytes = WeightsH5Bytes(*cnn, cnn->Initialize(1));
  ASSERT_TRUE(cnn_bytes.ok());
  auto shape = ReadWeightsH5(*cnn_bytes, *mlp, "w.h5");
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(std::string(shape.status().message()),
              HasSubstr("layers/dense/vars/0 (dense/kernel) has shape [1152,128]; the config "
                        "gives [784,128]"));
  // Not HDF5, and HDF5 cut short.
  EXPECT_THAT(std::string(ReadWeightsH5("PK\x03\x04", *cnn, "w.h5").status().message()),
              HasSubstr("not an HDF5 file"));
  EXPECT_THAT(
      std::string(ReadWeightsH5(cnn_bytes->substr(0, 600), *cnn, "w.h5").status().message()),
      HasSubstr("w.h5"));
  // Counts and sizes that do not fit the model are refused before writing.
  auto params = cnn->Initialize(1);
  params.pop_back();
  EXPECT_EQ(WeightsH5Bytes(*cnn, params).status().code(), absl::StatusCode::kInvalidArgument);
  params = cnn->Initialize(1);
  params[3].push_back(1);
  EXPECT_THAT(std::string(WeightsH5Bytes(*cnn, params).status().message()),
              HasSubstr("conv2d_1/bias"));
}

}  // namespace
}  // namespace keras
}  // namespace psc
