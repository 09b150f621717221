// Keras configs written in tests (as Keras 3's to_json() writes them) and
// the gradient check the model tests share: keras_config_test.cc,
// keras_sequence_test.cc.
#ifndef PSC_COMMON_KERAS_KERAS_TEST_JSON_H_
#define PSC_COMMON_KERAS_KERAS_TEST_JSON_H_

#include <cmath>
#include <string>
#include <vector>

#include "common/compute/model.h"
#include "common/keras/keras_config.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace keras {
namespace testing {

using Json = nlohmann::json;
using compute::Executor;
using compute::LossOptions;
using compute::Model;
using compute::StepResult;

inline Json Layer(const std::string& cls, Json config) {
  return {{"module", "keras.layers"},
          {"class_name", cls},
          {"config", config},
          {"registered_name", nullptr}};
}
inline Json Input(Json batch_shape) {
  return Layer("InputLayer",
               {{"batch_shape", batch_shape}, {"dtype", "float32"}, {"name", "input_layer"}});
}
inline Json Dense(const std::string& name, int units, const std::string& act) {
  return Layer("Dense",
               {{"name", name}, {"units", units}, {"activation", act}, {"use_bias", true}});
}
// A vector, not a Json: a braced list of one Json is a copy of it, not an
// array, under some compilers (nlohmann's initializer-list rule).
inline Json Sequential(const std::vector<Json>& layers) {
  Json list = Json::array();
  for (const Json& l : layers) list.push_back(l);
  return {{"module", "keras"},
          {"class_name", "Sequential"},
          {"config", {{"name", "sequential"}, {"layers", list}}}};
}

// "name [shape]" of each variable, to compare two models' variables.
inline std::vector<std::string> Variables(const Model& m) {
  std::vector<std::string> out;
  for (const auto& v : m.variables()) out.push_back(v.name + " " + compute::ShapeText(v.shape));
  return out;
}

inline absl::StatusOr<Model> Parse(const Json& j) {
  return ModelFromKerasConfig(j.dump(), "model.json");
}

// Central differences of the summed loss against `exec`'s gradient, at
// every `stride`-th value of each trained variable of `m`; the loss at
// `params`. (Smooth activations only: across a ReLU's kink the difference
// is not the gradient.)
inline double ExpectGradientsMatchCentralDifferences(
    Executor* exec, const Model& m, const std::vector<float>& x, const std::vector<int32_t>& labels,
    const LossOptions& o, const std::vector<std::vector<float>>& params, size_t stride) {
  auto loss = [&](const std::vector<std::vector<float>>& p, std::vector<std::vector<float>>* g) {
    EXPECT_TRUE(exec->SetParameters(p).ok());
    StepResult r;
    const absl::Status computed = exec->ComputeGradients(x, labels, o, &r);
    EXPECT_TRUE(computed.ok()) << computed;
    if (g != nullptr) {
      EXPECT_TRUE(exec->CopyGradients(g).ok());
    }
    return r.loss_sum;
  };
  std::vector<std::vector<float>> grads;
  const double at = loss(params, &grads);
  for (size_t v = 0; v < params.size(); ++v) {
    if (m.moving_averages()[v].has_value()) continue;
    for (size_t i = 0; i < params[v].size(); i += stride) {
      const float eps = 2e-3f;
      auto plus = params, minus = params;
      plus[v][i] += eps;
      minus[v][i] -= eps;
      const double numeric = (loss(plus, nullptr) - loss(minus, nullptr)) / (2 * eps);
      EXPECT_NEAR(grads[v][i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << m.variables()[v].name << "[" << i << "]";
    }
  }
  return at;
}

}  // namespace testing
}  // namespace keras
}  // namespace psc

#endif  // PSC_COMMON_KERAS_KERAS_TEST_JSON_H_
