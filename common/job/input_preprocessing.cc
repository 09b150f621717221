#include "common/job/input_preprocessing.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace job {
namespace {

using Json = nlohmann::json;
constexpr char kLayerName[] = "pscluster_preprocessing";

Json LayerConfig(const data::Preprocessing& p) {
  Json config = {{"name", kLayerName}, {"trainable", true}, {"dtype", "float32"}};
  if (p.kind == data::Preprocessing::Kind::kRescale) {
    config["scale"] = p.scale;
    config["offset"] = p.offset;
    return {{"module", "keras.layers"}, {"class_name", "Rescaling"}, {"config", config}};
  }
  config["invert"] = false;
  if (p.feature_mean.empty()) {
    config["axis"] = Json::array();  // Keras's axis=None: one mean and variance
    config["mean"] = p.mean;
    config["variance"] = p.std * p.std;
  } else {
    config["axis"] = {-1};
    Json mean = Json::array(), variance = Json::array();
    for (size_t f = 0; f < p.feature_mean.size(); ++f) {
      mean.push_back(p.feature_mean[f]);
      variance.push_back(p.feature_std[f] * p.feature_std[f]);
    }
    config["mean"] = mean;
    config["variance"] = variance;
  }
  return {{"module", "keras.layers"}, {"class_name", "Normalization"}, {"config", config}};
}

// Replaces every reference to layer `from` in `nodes` (Keras 3's
// keras_history [name, i, j], Keras 2's [name, i, j, {}]) by `to`.
void Rewire(Json* nodes, const std::string& from, const std::string& to) {
  if (nodes->is_array()) {
    if (nodes->size() >= 3 && (*nodes)[0].is_string() && (*nodes)[0] == from &&
        (*nodes)[1].is_number_integer()) {
      (*nodes)[0] = to;
      return;
    }
    for (Json& j : *nodes) Rewire(&j, from, to);
  } else if (nodes->is_object()) {
    for (auto& [key, value] : nodes->items()) Rewire(&value, from, to);
  }
}

}  // namespace

data::Preprocessing PreprocessingOf(const compute::InputTransform& t) {
  data::Preprocessing p;
  switch (t.kind) {
    case compute::InputTransform::Kind::kNone:
      return p;
    case compute::InputTransform::Kind::kRescale:
      p.kind = data::Preprocessing::Kind::kRescale;
      p.scale = t.scale;
      p.offset = t.offset;
      return p;
    case compute::InputTransform::Kind::kNormalize:
      break;
  }
  p.kind = data::Preprocessing::Kind::kStandardize;
  // In float32, as Keras: the divisor is max(sqrt(variance), epsilon).
  auto divisor = [](float variance) { return std::max(std::sqrt(variance), 1e-7f); };
  if (t.mean.size() == 1 && t.variance.size() == 1) {
    p.mean = t.mean[0];
    p.std = divisor(t.variance[0]);
    return p;
  }
  const size_t n = std::max(t.mean.size(), t.variance.size());
  for (size_t f = 0; f < n; ++f) {
    p.feature_mean.push_back(t.mean[t.mean.size() == 1 ? 0 : f]);
    p.feature_std.push_back(divisor(t.variance[t.variance.size() == 1 ? 0 : f]));
  }
  return p;
}

absl::StatusOr<std::string> WithInputLayer(const std::string& config_json,
                                           const data::Preprocessing& p) {
  if (p.kind == data::Preprocessing::Kind::kNone) return config_json;
  Json top = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  const auto bad = [](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write the job's preprocessing into the exported model: ", why));
  };
  if (!top.is_object() || !top.contains("config") || !top["config"].is_object() ||
      !top["config"].contains("layers") || !top["config"]["layers"].is_array() ||
      top["config"]["layers"].empty()) {
    return bad("not a Keras model config with layers");
  }
  Json& layers = top["config"]["layers"];
  Json layer = LayerConfig(p);
  const std::string cls = top.value("class_name", "");
  const bool first_is_input = layers[0].value("class_name", "") == "InputLayer";
  if (cls == "Sequential") {
    if (first_is_input) {
      layers.insert(layers.begin() + 1, layer);
    } else {
      // Keras 2's form: the first layer declares the input shape; the new
      // first layer takes the declaration over.
      Json& first = layers[0]["config"];
      for (const char* key : {"batch_input_shape", "batch_shape"}) {
        if (first.is_object() && first.contains(key)) {
          layer["config"][key] = first[key];
          first.erase(key);
        }
      }
      layers.insert(layers.begin(), layer);
    }
    return top.dump();
  }
  if (cls != "Functional" && cls != "Model") return bad(absl::StrCat("a ", cls, " model"));
  if (!first_is_input) return bad("its first layer is not its InputLayer");
  const Json& input = layers[0];
  const std::string input_name = input.contains("name") && input["name"].is_string()
                                     ? input["name"].get<std::string>()
                                     : input["config"].value("name", std::string());
  if (input_name.empty()) return bad("its InputLayer has no name");
  for (size_t i = 1; i < layers.size(); ++i) {
    if (layers[i].contains("inbound_nodes"))
      Rewire(&layers[i]["inbound_nodes"], input_name, kLayerName);
  }
  layer["name"] = kLayerName;
  const bool keras3 = layers.size() > 1 && layers[1].contains("inbound_nodes") &&
                      layers[1]["inbound_nodes"].is_array() &&
                      !layers[1]["inbound_nodes"].empty() &&
                      layers[1]["inbound_nodes"][0].is_object();
  if (keras3) {
    Json shape = Json::array({nullptr});
    const Json& declared = input["config"].contains("batch_shape")
                               ? input["config"]["batch_shape"]
                               : input["config"].value("batch_input_shape", Json::array());
    if (declared.is_array() && declared.size() > 1) shape = declared;
    layer["inbound_nodes"] =
        Json::array({{{"args", Json::array({{{"class_name", "__keras_tensor__"},
                                             {"config",
                                              {{"shape", shape},
                                               {"dtype", "float32"},
                                               {"keras_history", {input_name, 0, 0}}}}}})},
                      {"kwargs", Json::object()}}});
  } else {
    layer["inbound_nodes"] =
        Json::array({Json::array({Json::array({input_name, 0, 0, Json::object()})})});
  }
  layers.insert(layers.begin() + 1, layer);
  return top.dump();
}

}  // namespace job
}  // namespace psc
