#include "common/keras/input_dims.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace keras {
namespace {

using Json = nlohmann::json;

// One input's declared batch shapes (a Sequential may declare its input
// twice: build_input_shape and its first layer's), by the input's name.
struct Declared {
  std::string name;
  std::vector<Json*> shapes;
};

Json* Member(Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string NameOf(Json& layer) {
  for (Json* j :
       {Member(layer, "name"),
        Member(layer, "config") == nullptr ? nullptr : Member(*Member(layer, "config"), "name")}) {
    if (j != nullptr && j->is_string()) return j->get<std::string>();
  }
  return "input";
}

void AddDeclared(Json& layer, Declared* d) {
  Json* config = Member(layer, "config");
  if (config == nullptr) return;
  for (const char* key : {"batch_shape", "batch_input_shape"}) {
    // Not an array: left to ModelFromKerasConfig to refuse.
    if (Json* j = Member(*config, key); j != nullptr && j->is_array()) d->shapes.push_back(j);
  }
}

bool Open(const Json& shape) {
  if (!shape.is_array()) return false;
  for (size_t i = 1; i < shape.size(); ++i) {
    if (shape[i].is_null()) return true;
  }
  return false;
}

std::string Text(const Json& shape) {
  std::string out = "(";
  for (size_t i = 1; i < shape.size(); ++i) {
    absl::StrAppend(&out, i > 1 ? ", " : "", shape[i].is_null() ? "None" : shape[i].dump());
  }
  return absl::StrCat(out, shape.size() == 2 ? ",)" : ")");
}

std::string Text(const compute::Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&out, i > 0 ? ", " : "", shape[i]);
  return absl::StrCat(out, shape.size() == 1 ? ",)" : ")");
}

absl::Status Fix(const compute::Shape& data, absl::string_view what, const std::string& name,
                 Json* shape) {
  const std::string declared = Text(*shape);
  if (data.size() + 1 != shape->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the input \"", name, "\" declares the example shape ", declared,
                     " and its data's examples are ", Text(data), ": not of one rank"));
  }
  for (size_t i = 0; i < data.size(); ++i) {
    Json& d = (*shape)[i + 1];
    if (d.is_null()) {
      d = data[i];
    } else if (!d.is_number_integer() || d.get<int64_t>() != data[i]) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": the input \"", name,
                                                     "\" declares the example shape ", declared,
                                                     " and its data's examples are ", Text(data)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> FixOpenInputDims(absl::string_view config_json, absl::string_view what,
                                             const InputDataShape& data) {
  Json top = Json::parse(config_json.begin(), config_json.end(), nullptr,
                         /*allow_exceptions=*/false);
  Json* config = top.is_discarded() ? nullptr : Member(top, "config");
  Json* layers = config == nullptr ? nullptr : Member(*config, "layers");
  Json* kind = Member(top, "class_name");
  // Not a model config: left to ModelFromKerasConfig to say so.
  if (layers == nullptr || !layers->is_array() || kind == nullptr || !kind->is_string()) {
    return std::string(config_json);
  }
  std::vector<Declared> inputs;
  if (*kind == "Sequential") {
    Declared d{"input", {}};
    if (Json* build = Member(*config, "build_input_shape"); build != nullptr && build->is_array()) {
      d.shapes.push_back(build);
    }
    if (!layers->empty()) {
      Json& first = layers->front();
      AddDeclared(first, &d);
      if (Json* c = Member(first, "class_name"); c != nullptr && *c == "InputLayer") {
        d.name = NameOf(first);
      }
    }
    inputs.push_back(std::move(d));
  } else {
    for (Json& layer : *layers) {
      Json* c = Member(layer, "class_name");
      if (c == nullptr || *c != "InputLayer") continue;
      Declared d{NameOf(layer), {}};
      AddDeclared(layer, &d);
      inputs.push_back(std::move(d));
    }
  }
  bool any = false;
  for (Declared& in : inputs) {
    bool open = false;
    for (const Json* s : in.shapes) open = open || Open(*s);
    if (!open) continue;
    if (data == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": the input \"", in.name, "\" declares the example shape ",
          Text(*in.shapes.front()),
          ": pscluster fixes a None dimension from the data when a job or `pscluster predict` "
          "starts (one length per job); here there is no data: give a model that declares its "
          "length (a job's export does)"));
    }
    PSC_ASSIGN_OR_RETURN(const compute::Shape shape, data(in.name, inputs.size() == 1));
    for (Json* s : in.shapes) PSC_RETURN_IF_ERROR(Fix(shape, what, in.name, s));
    any = true;
  }
  return any ? top.dump() : std::string(config_json);
}

}  // namespace keras
}  // namespace psc
