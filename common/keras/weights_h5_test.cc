#include "common/keras/weights_h5.h"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

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

// Values made from where they are, counting what the writer asks.
class CountingSource : public WeightsSource {
 public:
  explicit CountingSource(const compute::Model* model) : model_(model) {}
  absl::Status Variable(int v, int64_t first, int64_t count, float* out) override {
    return Fill(v, 0, first, count, out);
  }
  absl::Status Slot(int v, int slot, int64_t first, int64_t count, float* out) override {
    ++slot_calls;
    return Fill(v, slot + 1, first, count, out);
  }
  static float Value(int v, int which, int64_t element) {
    return static_cast<float>(v * 1000 + which * 100) + 0.001f * static_cast<float>(element);
  }
  int64_t most_floats = 0;  // in one call
  int calls = 0, slot_calls = 0;
  int fail_at = -1;  // the call that fails, UNAVAILABLE

 private:
  absl::Status Fill(int v, int which, int64_t first, int64_t count, float* out) {
    if (calls++ == fail_at) return absl::UnavailableError("ps:1 went away");
    const int64_t width = RowElements(model_->variables()[v].shape);
    most_floats = std::max(most_floats, count * width);
    for (int64_t i = 0; i < count * width; ++i) out[i] = Value(v, which, first * width + i);
    return absl::OkStatus();
  }
  const compute::Model* model_;
};

TEST(WeightsH5Test, AFileIsWrittenFromItsSourceAChunkOfRowsAtATime) {
  auto m = BuiltinModel("mlp");
  ASSERT_TRUE(m.ok());
  const std::string path = ::testing::TempDir() + "/chunked.weights.h5";
  CountingSource source(&*m);
  OptimizerState state;
  state.iterations = 7;
  state.learning_rate = 0.5f;
  for (int v = 0; v < static_cast<int>(m->variables().size()); ++v) state.slots.push_back({v, 0});
  // dense/kernel is (784, 128): 100 of its rows a chunk.
  ASSERT_TRUE(WriteWeightsH5(path, *m, &source, &state, 100 * 128 * 4).ok());
  EXPECT_EQ(source.most_floats, 100 * 128) << "a chunk is at most 100 of its rows";
  EXPECT_EQ(source.slot_calls, 8 + 1 + 1 + 1) << "each slot in chunks too";
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto back = ReadWeightsH5(bytes, *m, path);
  ASSERT_TRUE(back.ok()) << back.status();
  for (size_t v = 0; v < back->size(); ++v) {
    ASSERT_EQ((*back)[v].size(), static_cast<size_t>(compute::ShapeSize(m->variables()[v].shape)));
    for (size_t i = 0; i < (*back)[v].size(); ++i) {
      ASSERT_EQ((*back)[v][i], CountingSource::Value(static_cast<int>(v), 0, i)) << v << " " << i;
    }
  }
  // A source that fails half way: its error, naming the dataset; no file.
  const std::string failed = ::testing::TempDir() + "/failed.weights.h5";
  CountingSource failing(&*m);
  failing.fail_at = 3;
  absl::Status s = WriteWeightsH5(failed, *m, &failing, nullptr, 100 * 128 * 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("failed.weights.h5"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("layers/dense/vars/0"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("ps:1 went away"));
  EXPECT_FALSE(std::filesystem::exists(failed));
  for (const auto& entry : std::filesystem::directory_iterator(::testing::TempDir())) {
    EXPECT_EQ(entry.path().filename().string().find("failed.weights.h5.tmp"), std::string::npos);
  }
  // A slot of no variable, and a chunk of nothing, are refused.
  state.slots.push_back({99, 0});
  EXPECT_EQ(WriteWeightsH5(failed, *m, &source, &state).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteWeightsH5(failed, *m, &source, nullptr, 0).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(failed));
}

}  // namespace
}  // namespace keras
}  // namespace psc
