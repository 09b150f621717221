#include "common/keras/dtype_policy.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace keras {
namespace {

using Json = nlohmann::json;

// Sets the dtype of every layer config under `j` but InputLayers'.
void Replace(Json& j, const std::string& policy) {
  if (j.is_array()) {
    for (Json& e : j) Replace(e, policy);
    return;
  }
  if (!j.is_object()) return;
  const auto cls = j.find("class_name");
  const auto config = j.find("config");
  if (cls != j.end() && cls->is_string() && config != j.end() && config->is_object() &&
      config->contains("dtype") && cls->get<std::string>() != "InputLayer" &&
      cls->get<std::string>() != "DTypePolicy" && cls->get<std::string>() != "FloatDTypePolicy" &&
      cls->get<std::string>() != "Policy") {
    (*config)["dtype"] = policy;
  }
  for (auto& [key, value] : j.items()) {
    // Not the compile config's metrics and losses, which are not layers.
    if (key != "dtype" && key != "compile_config") Replace(value, policy);
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

absl::Status CheckFloat16Training() {
  return absl::InvalidArgumentError(
      "the dtype policy mixed_float16 (float16): pscluster does not scale the loss yet (Keras's "
      "LossScaleOptimizer), without which float16's small gradients flush to zero; pass "
      "--dtype_policy=mixed_bfloat16 or --dtype_policy=float32");
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
