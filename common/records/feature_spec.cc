#include "common/records/feature_spec.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace psc::records {
namespace {

using Json = nlohmann::json;

// The most values one entry may hold.
constexpr int64_t kMaxValues = int64_t{1} << 31;
// Integers a double holds exactly: an int64 default must be within.
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

constexpr data::NpyType kRawTypes[] = {
    data::NpyType::kUint8,   data::NpyType::kInt8,   data::NpyType::kUint16, data::NpyType::kInt16,
    data::NpyType::kUint32,  data::NpyType::kInt32,  data::NpyType::kInt64,  data::NpyType::kUint64,
    data::NpyType::kFloat32, data::NpyType::kFloat64};

std::string RawTypeNames() {
  std::vector<std::string> names;
  for (data::NpyType t : kRawTypes) names.push_back(data::NpyTypeName(t));
  return absl::StrJoin(names, ", ");
}

// A value for a message: a scalar as JSON (cut at 40 characters), anything
// else by its type (a deep structure is never walked).
std::string Shown(const Json& v) {
  if (!v.is_primitive()) return std::string(v.type_name());
  std::string text = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 40) + "...";
  return text;
}

class EntryParser {
 public:
  EntryParser(absl::string_view where, std::string key) : where_(where), key_(std::move(key)) {}

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": \"", key_, "\": ", what));
  }

  absl::StatusOr<FeatureColumn> Parse(const Json& entry) {
    if (!entry.is_object()) return Error("want an object such as {\"feature\": \"f\", ...}");
    FeatureColumn c;
    c.key = key_;
    for (const auto& [name, value] : entry.items()) {
      if (name != "feature" && name != "kind" && name != "shape" && name != "dtype" &&
          name != "varlen" && name != "pad" && name != "default") {
        return Error(absl::StrCat("unknown key \"", name,
                                  "\" (known: feature, kind, shape, dtype, varlen, pad, default)"));
      }
    }
    PSC_RETURN_IF_ERROR(Features(entry, &c));
    PSC_RETURN_IF_ERROR(Kind(entry, &c));
    PSC_RETURN_IF_ERROR(ShapeOf(entry, &c));
    PSC_RETURN_IF_ERROR(Dtype(entry, &c));
    PSC_RETURN_IF_ERROR(Varlen(entry, &c));
    PSC_RETURN_IF_ERROR(Default(entry, &c));
    if (c.features.size() > 1 && c.has_shape &&
        static_cast<int64_t>(c.features.size()) != ShapeValues(c.shape)) {
      return Error(absl::StrCat("\"feature\" lists ", c.features.size(), " columns for a shape of ",
                                ShapeValues(c.shape), " values"));
    }
    return c;
  }

 private:
  absl::Status Features(const Json& entry, FeatureColumn* c) const {
    const auto it = entry.find("feature");
    if (it == entry.end()) {
      c->features = {key_};
      return absl::OkStatus();
    }
    if (it->is_string()) {
      c->features = {it->get<std::string>()};
    } else if (it->is_array() && !it->empty()) {
      for (const Json& f : *it) {
        if (!f.is_string()) return Error("\"feature\": want a name or a list of column names");
        c->features.push_back(f.get<std::string>());
      }
    } else {
      return Error("\"feature\": want a name or a list of column names");
    }
    for (const std::string& f : c->features) {
      if (f.empty()) return Error("\"feature\": an empty name");
    }
    return absl::OkStatus();
  }

  absl::Status Kind(const Json& entry, FeatureColumn* c) const {
    const auto it = entry.find("kind");
    if (it == entry.end()) return Error("no \"kind\" (want \"float\", \"int64\" or \"bytes\")");
    const std::string kind = it->is_string() ? it->get<std::string>() : "";
    if (kind == "float") {
      c->kind = ValueKind::kFloat;
    } else if (kind == "int64") {
      c->kind = ValueKind::kInt64;
    } else if (kind == "bytes") {
      c->kind = ValueKind::kBytes;
    } else {
      return Error(
          absl::StrCat("\"kind\": ", Shown(*it), " is not one of \"float\", \"int64\", \"bytes\""));
    }
    return absl::OkStatus();
  }

  absl::Status ShapeOf(const Json& entry, FeatureColumn* c) const {
    const auto it = entry.find("shape");
    if (it == entry.end()) return absl::OkStatus();
    if (!it->is_array()) return Error("\"shape\": want a list of positive integers");
    int64_t values = 1;
    for (const Json& d : *it) {
      if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > kMaxValues) {
        return Error(
            absl::StrCat("\"shape\": ", Shown(*it), " is not a list of positive integers"));
      }
      values *= d.get<int64_t>();  // each <= 2^31, checked below before the next
      if (values > kMaxValues) {
        return Error(absl::StrCat("\"shape\": ", Shown(*it), " holds over 2^31 values"));
      }
      c->shape.push_back(d.get<int64_t>());
    }
    c->has_shape = true;
    return absl::OkStatus();
  }

  absl::Status Dtype(const Json& entry, FeatureColumn* c) const {
    const auto it = entry.find("dtype");
    if (c->kind != ValueKind::kBytes) {
      if (it != entry.end()) return Error("\"dtype\" is for \"kind\": \"bytes\" (raw values)");
      return absl::OkStatus();
    }
    if (it == entry.end()) {
      return Error(absl::StrCat(
          "a bytes feature needs \"dtype\", its raw elements' type (one of ", RawTypeNames(),
          "): pscluster reads raw values (tf.io.decode_raw's), not strings or encoded images"));
    }
    const std::string name = it->is_string() ? it->get<std::string>() : "";
    for (data::NpyType t : kRawTypes) {
      if (name == data::NpyTypeName(t)) {
        c->dtype = t;
        return absl::OkStatus();
      }
    }
    return Error(absl::StrCat("\"dtype\": ", Shown(*it), " is not one of ", RawTypeNames()));
  }

  absl::Status Varlen(const Json& entry, FeatureColumn* c) const {
    if (const auto it = entry.find("varlen"); it != entry.end()) {
      if (!it->is_boolean()) return Error("\"varlen\": want true or false");
      c->varlen = it->get<bool>();
    }
    if (const auto it = entry.find("pad"); it != entry.end()) {
      if (!c->varlen) return Error("\"pad\" is for \"varlen\": true");
      if (!it->is_number() || !std::isfinite(it->get<double>())) {
        return Error("\"pad\": want a finite number");
      }
      c->pad = it->get<double>();
      if (c->kind == ValueKind::kInt64 && !IsInt64(c->pad)) {
        return Error(absl::StrCat("\"pad\": ", Shown(*it), " is not an integer within 2^53"));
      }
    }
    if (c->varlen && c->kind == ValueKind::kBytes) {
      return Error("\"varlen\" is for int64 and float lists, not bytes");
    }
    if (c->varlen && c->features.size() > 1) {
      return Error("\"varlen\" reads one feature, not a list of columns");
    }
    return absl::OkStatus();
  }

  absl::Status Default(const Json& entry, FeatureColumn* c) const {
    const auto it = entry.find("default");
    if (it == entry.end()) return absl::OkStatus();
    if (c->kind == ValueKind::kBytes) return Error("\"default\" is for int64 and float values");
    const auto take = [&](const Json& v) -> absl::Status {
      if (!v.is_number() || !std::isfinite(v.get<double>()) ||
          (c->kind == ValueKind::kInt64 && !IsInt64(v.get<double>()))) {
        return Error(absl::StrCat("\"default\": ", Shown(v), " is not a finite ",
                                  c->kind == ValueKind::kInt64 ? "integer within 2^53" : "number"));
      }
      c->default_value.push_back(v.get<double>());
      return absl::OkStatus();
    };
    if (it->is_array()) {
      if (it->empty()) return Error("\"default\": an empty list");
      for (const Json& v : *it) PSC_RETURN_IF_ERROR(take(v));
      if (c->has_shape && static_cast<int64_t>(it->size()) != ShapeValues(c->shape)) {
        return Error(absl::StrCat("\"default\" holds ", it->size(), " values for a shape of ",
                                  ShapeValues(c->shape)));
      }
    } else {
      PSC_RETURN_IF_ERROR(take(*it));
    }
    return absl::OkStatus();
  }

  static bool IsInt64(double v) { return std::floor(v) == v && std::abs(v) <= kMaxExactInteger; }

  const absl::string_view where_;
  const std::string key_;
};

Json ColumnJson(const FeatureColumn& c) {
  Json out = Json::object();
  if (c.features.size() == 1) {
    out["feature"] = c.features[0];
  } else {
    out["feature"] = c.features;
  }
  out["kind"] = ValueKindName(c.kind);
  if (c.has_shape) out["shape"] = c.shape;
  if (c.dtype.has_value()) out["dtype"] = data::NpyTypeName(*c.dtype);
  if (c.varlen) {
    out["varlen"] = true;
    if (c.pad != 0) out["pad"] = c.pad;
  }
  if (c.default_value.size() == 1) {
    out["default"] = c.default_value[0];
  } else if (!c.default_value.empty()) {
    out["default"] = c.default_value;
  }
  return out;
}

}  // namespace

const char* ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kInt64:
      return "int64";
    case ValueKind::kBytes:
      return "bytes";
  }
  return "?";
}

int64_t ShapeValues(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // ParseFeatureSpec bounds the product
  return n;
}

absl::StatusOr<FeatureSpec> ParseFeatureSpec(absl::string_view json, absl::string_view where) {
  const Json top = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (top.is_discarded() || !top.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": not a JSON object (a feature spec: {\"inputs\": {...}, "
                     "\"label\": {...}})"));
  }
  for (const auto& [name, value] : top.items()) {
    if (name != "inputs" && name != "label" && name != "weight") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown key \"", name, "\" (known: inputs, label, weight)"));
    }
  }
  FeatureSpec spec;
  const auto inputs = top.find("inputs");
  if (inputs == top.end() || !inputs->is_object() || inputs->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": no \"inputs\" (want an object naming each model input's feature)"));
  }
  for (const auto& [name, entry] : inputs->items()) {
    PSC_ASSIGN_OR_RETURN(FeatureColumn c, EntryParser(where, name).Parse(entry));
    spec.inputs.push_back(std::move(c));
  }
  const auto label = top.find("label");
  if (label == top.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": no \"label\" (want {\"feature\": NAME, \"kind\": ...})"));
  }
  PSC_ASSIGN_OR_RETURN(spec.label, EntryParser(where, "label").Parse(*label));
  if (spec.label.kind == ValueKind::kBytes || spec.label.varlen) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"label\": want a fixed-length int64 or float feature"));
  }
  if (const auto weight = top.find("weight"); weight != top.end()) {
    PSC_ASSIGN_OR_RETURN(FeatureColumn w, EntryParser(where, "weight").Parse(*weight));
    if (w.kind == ValueKind::kBytes || w.varlen || ShapeValues(w.shape) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"weight\": want one float or int64 value per example"));
    }
    spec.weight = std::move(w);
  }
  return spec;
}

std::string FeatureSpecJson(const FeatureSpec& spec) {
  Json top = Json::object();
  Json inputs = Json::object();
  for (const FeatureColumn& c : spec.inputs) inputs[c.key] = ColumnJson(c);
  top["inputs"] = inputs;
  top["label"] = ColumnJson(spec.label);
  if (spec.weight.has_value()) top["weight"] = ColumnJson(*spec.weight);
  // Names from an .npz may not be UTF-8: replaced, never thrown.
  return top.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace psc::records
