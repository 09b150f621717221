#include "common/job/input_preprocessing.h"

#include <cmath>

#include "common/keras/builtin_models.h"
#include "common/keras/keras_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace job {
namespace {

using Json = nlohmann::json;

Json Dense(const std::string& name, int units) {
  return {{"class_name", "Dense"},
          {"config", {{"name", name}, {"units", units}, {"activation", "linear"}}}};
}

// Keras 3's functional form of input -> Dense.
std::string Functional3() {
  Json input = {{"class_name", "InputLayer"},
                {"name", "x"},
                {"config", {{"name", "x"}, {"batch_shape", {nullptr, 3}}}},
                {"inbound_nodes", Json::array()}};
  Json dense = Dense("d", 2);
  dense["name"] = "d";
  dense["inbound_nodes"] = {
      {{"args",
        {{{"class_name", "__keras_tensor__"},
          {"config", {{"shape", {nullptr, 3}}, {"keras_history", {"x", 0, 0}}}}}}},
       {"kwargs", Json::object()}}};
  return Json({{"class_name", "Functional"},
               {"config",
                {{"name", "f"},
                 {"layers", {input, dense}},
                 {"input_layers", {{"x", 0, 0}}},
                 {"output_layers", {{"d", 0, 0}}}}}})
      .dump();
}

// Keras 2's: inbound_nodes [[["x", 0, 0, {}]]].
std::string Functional2() {
  Json input = {{"class_name", "InputLayer"},
                {"name", "x"},
                {"config", {{"name", "x"}, {"batch_input_shape", {nullptr, 3}}}},
                {"inbound_nodes", Json::array()}};
  Json dense = Dense("d", 2);
  dense["name"] = "d";
  dense["inbound_nodes"] = Json::array({Json::array({Json::array({"x", 0, 0, Json::object()})})});
  return Json({{"class_name", "Model"},
               {"config",
                {{"name", "f"},
                 {"layers", {input, dense}},
                 {"input_layers", {{"x", 0, 0}}},
                 {"output_layers", {{"d", 0, 0}}}}}})
      .dump();
}

// Keras 2's Sequential: the first layer declares the input.
std::string Sequential2() {
  Json dense = Dense("d", 2);
  dense["config"]["batch_input_shape"] = {nullptr, 3};
  return Json({{"class_name", "Sequential"}, {"config", {{"name", "s"}, {"layers", {dense}}}}})
      .dump();
}

std::string Sequential3() {
  Json input = {{"class_name", "InputLayer"},
                {"config", {{"name", "x"}, {"batch_shape", {nullptr, 3}}}}};
  return Json({{"class_name", "Sequential"},
               {"config", {{"name", "s"}, {"layers", {input, Dense("d", 2)}}}}})
      .dump();
}

TEST(InputPreprocessingTest, AnExportCarriesThePreprocessingAndReadsBackAsTheSame) {
  data::Preprocessing per_feature;
  per_feature.kind = data::Preprocessing::Kind::kStandardize;
  per_feature.feature_mean = {1.5, -2.25, 100};
  per_feature.feature_std = {0.5, 3, 1};
  data::Preprocessing rescale;
  rescale.kind = data::Preprocessing::Kind::kRescale;
  rescale.scale = 1.0 / 255;
  for (const std::string& config : {Sequential3(), Sequential2(), Functional3(), Functional2()}) {
    for (const data::Preprocessing& p : {per_feature, rescale}) {
      SCOPED_TRACE(config);
      absl::StatusOr<std::string> with = WithInputLayer(config, p);
      ASSERT_TRUE(with.ok()) << with.status();
      absl::StatusOr<compute::Model> model = keras::ModelFromKerasConfig(*with, "exported");
      ASSERT_TRUE(model.ok()) << model.status() << "\n" << *with;
      EXPECT_EQ(model->input_transform().layer, "pscluster_preprocessing");
      EXPECT_EQ(model->variables().size(), 2u);
      // Read back, the examples go through the same floats (the std up to
      // Keras's float32 sqrt of the variance).
      const data::Preprocessing back = PreprocessingOf(model->input_transform());
      for (size_t f = 0; f < 3; ++f) {
        const float v = 7.0f + static_cast<float>(f);
        EXPECT_NEAR(data::Preprocess(back, v, f), data::Preprocess(p, v, f),
                    1e-6 * std::fabs(data::Preprocess(p, v, f)))
            << f;
      }
    }
  }
  data::Preprocessing none;
  EXPECT_EQ(*WithInputLayer(Sequential3(), none), Sequential3());
  EXPECT_FALSE(WithInputLayer("{}", rescale).ok());
}

TEST(InputPreprocessingTest, KerasNormalizationArithmeticInFloat32) {
  compute::InputTransform t;
  t.kind = compute::InputTransform::Kind::kNormalize;
  t.mean = {1, 2};
  t.variance = {4, 0};  // a zero variance divides by Keras's epsilon, 1e-7
  const data::Preprocessing p = PreprocessingOf(t);
  EXPECT_EQ(data::Preprocess(p, 5, 0), 2.0f);
  EXPECT_EQ(data::Preprocess(p, 2, 1), 0.0f);
  EXPECT_EQ(data::Preprocess(p, 3, 1), 1.0f / 1e-7f);
}

}  // namespace
}  // namespace job
}  // namespace psc
