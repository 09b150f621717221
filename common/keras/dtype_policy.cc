#include "common/keras/dtype_policy.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace keras {
namespace {

using Json = nlohmann::json;

// Sets the dtype of every layer config under `j` but InputLayers'. A layer
// config is one with a "dtype" (Keras writes one for every layer;
// initializers and the like have none), or, in a config written by hand
// without dtypes, one in a model's "layers" or a wrapper's "layer" or
// "backward_layer" (`layer_slot`).
void Replace(Json& j, const std::string& policy, bool layer_slot = false) {
  if (j.is_array()) {
    for (Json& e : j) Replace(e, policy, layer_slot);
    return;
  }
  if (!j.is_object()) return;
  const auto cls = j.find("class_name");
  const auto config = j.find("config");
  if (cls != j.end() && cls->is_string() && config != j.end() && config->is_object() &&
      (config->contains("dtype") || layer_slot) && cls->get<std::string>() != "InputLayer" &&
      cls->get<std::string>() != "DTypePolicy" && cls->get<std::string>() != "FloatDTypePolicy" &&
      cls->get<std::string>() != "Policy") {
    (*config)["dtype"] = policy;
  }
  for (auto& [key, value] : j.items()) {
    // Not the compile config's metrics and losses, which are not layers.
    if (key != "dtype" && key != "compile_config") {
      Replace(value, policy, key == "layers" || key == "layer" || key == "backward_layer");
    }
  }
}

}  // namespace

absl::StatusOr<compute::DType> PolicyComputeDtype(absl::string_view name) {
  if (name == "float32") return compute::DType::kFloat32;
  if (name == "mixed_bfloat16" || name == "bfloat16") return compute::DType::kBFloat16;
  if (name == "mixed_float16" || name == "float16") return compute::DType::kFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("the dtype policy \"", name,
                   "\" is not supported (supported: ", kSupportedDtypePolicies, ")"));
}

absl::StatusOr<std::string> WithDtypePolicy(absl::string_view config_json,
                                            absl::string_view policy) {
  if (absl::Status s = PolicyComputeDtype(policy).status(); !s.ok()) return s;
  Json j = Json::parse(config_json.begin(), config_json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("the model config is not JSON");
  }
  Replace(j, std::string(policy));
  return j.dump();
}

}  // namespace keras
}  // namespace psc
