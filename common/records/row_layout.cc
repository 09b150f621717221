#include "common/records/row_layout.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"

namespace psc::records {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The feature's name(s), for messages.
std::string FeatureText(const FeatureColumn& c) {
  return c.features.size() == 1 ? absl::StrCat("\"", c.features[0], "\"")
                                : absl::StrCat("columns ", absl::StrJoin(c.features, ", "));
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Raw little-endian elements (this host is little-endian: x86-64, aarch64).
template <typename T>
void Widen(absl::string_view bytes, std::vector<double>* out) {
  const size_t n = bytes.size() / sizeof(T);
  out->resize(n);
  for (size_t i = 0; i < n; ++i)
    (*out)[i] = static_cast<double>(Load<T>(bytes.data() + i * sizeof(T)));
}

template <typename T>
void WidenInt(absl::string_view bytes, std::vector<int64_t>* out) {
  const size_t n = bytes.size() / sizeof(T);
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    (*out)[i] = static_cast<int64_t>(Load<T>(bytes.data() + i * sizeof(T)));
  }
}

}  // namespace

absl::StatusOr<RowLayout> ResolveLayout(const FeatureSpec& spec,
                                        const std::vector<InputSlot>& inputs,
                                        const std::vector<int64_t>& one_shape,
                                        const LabelSlot& label, absl::string_view where) {
  RowLayout layout;
  std::vector<InputSlot> slots = inputs;
  layout.one_input = inputs.empty();
  if (layout.one_input) {
    if (spec.inputs.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the model has one input; the spec names ", spec.inputs.size()));
    }
    slots.push_back({spec.inputs[0].key, one_shape, 0});
  }
  std::vector<std::string> names;
  for (const InputSlot& s : slots) names.push_back(s.name);
  for (const FeatureColumn& c : spec.inputs) {
    bool known = false;
    for (const InputSlot& s : slots) known = known || s.name == c.key;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": the model has no input \"", c.key,
                                                     "\" (its inputs: ", absl::StrJoin(names, ", "),
                                                     ")"));
    }
  }
  for (const InputSlot& s : slots) {
    const FeatureColumn* c = nullptr;
    for (const FeatureColumn& f : spec.inputs) {
      if (f.key == s.name) c = &f;
    }
    if (c == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": no entry for the model's input \"",
                                                     s.name, "\" of shape ", ShapeText(s.shape),
                                                     " under \"inputs\""));
    }
    Column col;
    col.spec = *c;
    col.array = layout.one_input ? "" : absl::StrCat("/", s.name);
    col.shape = s.shape;
    col.values = ShapeValues(s.shape);
    col.id_limit = s.id_limit;
    if (c->has_shape && ShapeValues(c->shape) != col.values) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": \"", s.name, "\": shape ", ShapeText(c->shape), " holds ",
          ShapeValues(c->shape), " values; the model's input takes ", ShapeText(s.shape)));
    }
    if (c->features.size() > 1 && static_cast<int64_t>(c->features.size()) != col.values) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"", s.name, "\": ", c->features.size(),
                       " columns for an input of ", col.values, " values ", ShapeText(s.shape)));
    }
    if (s.integers && c->kind != ValueKind::kFloat &&
        (!c->dtype.has_value() || data::NpyTypeIsInteger(*c->dtype))) {
      col.type = data::NpyType::kInt64;
      if (c->dtype == data::NpyType::kUint8) col.type = data::NpyType::kUint8;
    } else if (s.id_limit > 0) {
      const bool float_raw = c->dtype.has_value() && !data::NpyTypeIsInteger(*c->dtype);
      if (c->kind == ValueKind::kFloat || float_raw) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": \"", s.name,
                         "\" is an input of ids (an Embedding takes it): read it from an "
                         "int64 feature (or raw integers), not floats"));
      }
      col.type = data::NpyType::kInt64;
    } else if (c->kind == ValueKind::kBytes && c->dtype == data::NpyType::kUint8) {
      col.type = data::NpyType::kUint8;  // kept as bytes, as an .npz's images
    }
    layout.columns.push_back(std::move(col));
  }
  {
    Column col;
    col.spec = spec.label;
    col.array = "";
    if (spec.label.has_shape) {
      col.shape = spec.label.shape;
    } else if (label.target_width > 1) {
      col.shape = {label.target_width};
    }
    col.values = ShapeValues(col.shape);
    if (spec.label.features.size() > 1 && spec.label.has_shape == false) {
      col.shape = {static_cast<int64_t>(spec.label.features.size())};
      col.values = col.shape[0];
    }
    col.type =
        spec.label.kind == ValueKind::kInt64 ? data::NpyType::kInt64 : data::NpyType::kFloat32;
    if (label.target_width > 0 && col.values != label.target_width) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": \"label\": ", col.values,
                                                     " values; the model's regression has ",
                                                     label.target_width, " outputs"));
    }
    if (label.classes > 0 && col.values != 1 && col.values != label.classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"label\": ", col.values,
                       " values; want a class id (shape []) or a one-hot "
                       "row of the model's ",
                       label.classes, " classes"));
    }
    if (label.classes > 0 && col.values == 1 && col.type == data::NpyType::kInt64) {
      col.classes = label.classes;
    }
    layout.label = static_cast<int>(layout.columns.size());
    layout.columns.push_back(std::move(col));
  }
  if (spec.weight.has_value()) {
    Column col;
    col.spec = *spec.weight;
    col.type = data::NpyType::kFloat32;
    layout.weight = static_cast<int>(layout.columns.size());
    layout.columns.push_back(std::move(col));
  }
  // Each default and pad fits its column, checked once here so that an
  // error names the spec, not a record.
  for (const Column& col : layout.columns) {
    const FeatureColumn& c = col.spec;
    const size_t n = c.default_value.size();
    if (n > 1 && static_cast<int64_t>(n) != col.values) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": \"", c.key, "\": \"default\" holds ",
                                                     n, " values for ", col.values));
    }
    std::vector<double> given = c.default_value;
    if (c.varlen) given.push_back(c.pad);
    for (double v : given) {
      const char* what = nullptr;
      if (col.type == data::NpyType::kFloat32 && std::abs(v) > std::numeric_limits<float>::max()) {
        what = "beyond float32's range";
      } else if (col.id_limit > 0 && !(v >= 0 && v < static_cast<double>(col.id_limit))) {
        what = "not a row of the Embedding the input feeds";
      } else if (col.classes > 0 && !(v >= 0 && v < static_cast<double>(col.classes))) {
        what = "not one of the model's classes";
      }
      if (what != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": \"", c.key, "\": the default or pad ", v, " is ", what));
      }
    }
  }
  return layout;
}

std::string Where::Text() const {
  if (!text.empty() || path.empty()) return std::string(text);
  if (line >= 0) return absl::StrCat(path, ": line ", line);
  return absl::StrCat(path, ": record ", record, " at offset ", offset);
}

RowBuffer::RowBuffer(const RowLayout* layout)
    : layout_(layout), data_(layout->columns.size()), mark_(layout->columns.size()) {}

absl::Status RowBuffer::Room(int c, uint64_t bytes, const Where& where) const {
  if (data_[c].size() + bytes > data::kMaxNumpyArrayBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        where.Text(), ": the array of \"", layout_->columns[c].spec.key, "\" would pass ",
        data::kMaxNumpyArrayBytes >> 30, " GiB (the most one array holds)"));
  }
  return absl::OkStatus();
}

void RowBuffer::Begin() {
  for (size_t c = 0; c < data_.size(); ++c) mark_[c] = data_[c].size();
}

void RowBuffer::Abandon() {
  for (size_t c = 0; c < data_.size(); ++c) data_[c].resize(mark_[c]);
}

void RowBuffer::Reserve(int64_t rows) {
  constexpr uint64_t kMaxReserve = uint64_t{64} << 20;
  if (rows <= 0) return;
  for (size_t c = 0; c < data_.size(); ++c) {
    const Column& col = layout_->columns[c];
    if (col.values <= 0 || static_cast<uint64_t>(col.values) > kMaxReserve) continue;
    const uint64_t row = static_cast<uint64_t>(col.values) * data::NpyTypeSize(col.type);
    if (row == 0 || static_cast<uint64_t>(rows) > kMaxReserve / row) continue;
    data_[c].reserve(data_[c].size() + static_cast<uint64_t>(rows) * row);
  }
}

uint64_t RowBuffer::bytes() const {
  uint64_t n = 0;
  for (const std::string& d : data_) n += d.size();
  return n;
}

template <typename T>
absl::Status RowBuffer::Append(int c, absl::Span<const T> v, const Where& where) {
  const Column& col = layout_->columns[c];
  const auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        where.Text(), ": feature ", FeatureText(col.spec), " (", col.spec.key, "): ", what));
  };
  const int64_t n = static_cast<int64_t>(v.size());
  if (col.spec.varlen ? n > col.values : n != col.values) {
    return bad(absl::StrCat(n, " values; ", col.spec.varlen ? "at most " : "want ", col.values,
                            col.spec.varlen ? " (the input's length)" : ""));
  }
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(v[i])) return bad(absl::StrCat("value ", i, " is ", v[i]));
      // A double beyond float32's range has no float32 (and converting it is
      // undefined behaviour).
      if (col.type == data::NpyType::kFloat32 &&
          std::abs(v[i]) > std::numeric_limits<float>::max()) {
        return bad(absl::StrCat("value ", i, " is ", v[i], ", beyond float32's range"));
      }
    }
    if (col.id_limit > 0 && !(v[i] >= 0 && v[i] < col.id_limit)) {
      return bad(absl::StrCat("id ", v[i], " (value ", i, ") is not a row of the Embedding (0 to ",
                              col.id_limit - 1, ")"));
    }
    if (col.classes > 0 && !(v[i] >= 0 && v[i] < col.classes)) {
      return bad(absl::StrCat("class ", v[i], " is not one of the model's ", col.classes,
                              " classes (0 to ", col.classes - 1, ")"));
    }
  }
  std::string& out = data_[c];
  const size_t size = data::NpyTypeSize(col.type);
  const size_t at = out.size();
  PSC_RETURN_IF_ERROR(Room(c, static_cast<uint64_t>(col.values) * size, where));
  out.resize(at + static_cast<size_t>(col.values) * size);
  char* p = out.data() + at;
  for (int64_t i = 0; i < col.values; ++i) {
    const T x = i < n ? v[i] : static_cast<T>(col.spec.pad);
    if (col.type == data::NpyType::kInt64) {
      const int64_t y = static_cast<int64_t>(x);
      std::memcpy(p + i * size, &y, size);
    } else if (col.type == data::NpyType::kUint8) {
      const uint8_t y = static_cast<uint8_t>(x);
      std::memcpy(p + i * size, &y, size);
    } else {
      const float y = static_cast<float>(x);
      std::memcpy(p + i * size, &y, size);
    }
  }
  return absl::OkStatus();
}

absl::Status RowBuffer::AppendFloats(int c, absl::Span<const float> v, const Where& where) {
  return Append<float>(c, v, where);
}
absl::Status RowBuffer::AppendDoubles(int c, absl::Span<const double> v, const Where& where) {
  return Append<double>(c, v, where);
}
absl::Status RowBuffer::AppendInt64s(int c, absl::Span<const int64_t> v, const Where& where) {
  return Append<int64_t>(c, v, where);
}

absl::Status RowBuffer::AppendRaw(int c, absl::string_view bytes, const Where& where) {
  const Column& col = layout_->columns[c];
  const auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        where.Text(), ": feature ", FeatureText(col.spec), " (", col.spec.key, "): ", what));
  };
  const data::NpyType t = *col.spec.dtype;
  const size_t size = data::NpyTypeSize(t);
  if (bytes.size() != static_cast<uint64_t>(col.values) * size) {
    // Encoded images, known by their magic bytes: say so.
    const bool png =
        bytes.size() >= 8 && bytes.substr(0, 8) == absl::string_view("\x89PNG\r\n\x1a\n", 8);
    const bool jpeg =
        bytes.size() >= 3 && bytes.substr(0, 3) == absl::string_view("\xff\xd8\xff", 3);
    if (png || jpeg) {
      return bad(absl::StrCat("holds a ", png ? "PNG" : "JPEG",
                              " image; pscluster reads raw values: decode the images beforehand "
                              "(e.g. tf.io.decode_",
                              png ? "png" : "jpeg", "(...).numpy().tobytes())"));
    }
    return bad(absl::StrCat(bytes.size(), " bytes; want ", col.values, " ", data::NpyTypeName(t),
                            " values of ", size, " bytes (",
                            static_cast<uint64_t>(col.values) * size, ")"));
  }
  if (col.type == data::NpyType::kUint8) {  // uint8 raw into uint8: as they are
    PSC_RETURN_IF_ERROR(Room(c, bytes.size(), where));
    data_[c].append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  if (col.type == data::NpyType::kInt64 || t == data::NpyType::kInt64 ||
      t == data::NpyType::kUint64) {
    std::vector<int64_t> v;
    switch (t) {
      case data::NpyType::kInt8:
        WidenInt<int8_t>(bytes, &v);
        break;
      case data::NpyType::kUint8:
        WidenInt<uint8_t>(bytes, &v);
        break;
      case data::NpyType::kInt16:
        WidenInt<int16_t>(bytes, &v);
        break;
      case data::NpyType::kUint16:
        WidenInt<uint16_t>(bytes, &v);
        break;
      case data::NpyType::kInt32:
        WidenInt<int32_t>(bytes, &v);
        break;
      case data::NpyType::kUint32:
        WidenInt<uint32_t>(bytes, &v);
        break;
      case data::NpyType::kInt64:
        WidenInt<int64_t>(bytes, &v);
        break;
      case data::NpyType::kUint64:
        for (size_t i = 0; i < bytes.size() / 8; ++i) {
          if (Load<uint64_t>(bytes.data() + i * 8) > static_cast<uint64_t>(INT64_MAX)) {
            return bad(absl::StrCat("uint64 value ", i, " is over 2^63 - 1"));
          }
        }
        WidenInt<uint64_t>(bytes, &v);
        break;
      default:
        return bad("raw floats for an input of ids");  // ResolveLayout refuses it
    }
    return Append<int64_t>(c, v, where);
  }
  std::vector<double> v;
  switch (t) {
    case data::NpyType::kInt8:
      Widen<int8_t>(bytes, &v);
      break;
    case data::NpyType::kUint8:
      Widen<uint8_t>(bytes, &v);
      break;
    case data::NpyType::kInt16:
      Widen<int16_t>(bytes, &v);
      break;
    case data::NpyType::kUint16:
      Widen<uint16_t>(bytes, &v);
      break;
    case data::NpyType::kInt32:
      Widen<int32_t>(bytes, &v);
      break;
    case data::NpyType::kUint32:
      Widen<uint32_t>(bytes, &v);
      break;
    case data::NpyType::kFloat32:
      Widen<float>(bytes, &v);
      break;
    case data::NpyType::kFloat64:
      Widen<double>(bytes, &v);
      break;
    default:
      break;
  }
  return Append<double>(c, v, where);
}

absl::Status RowBuffer::AppendDefault(int c, const Where& where, absl::string_view what) {
  const Column& col = layout_->columns[c];
  const std::vector<double>& d = col.spec.default_value;
  if (d.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where.Text(), ": ", what, " and the spec gives \"", col.spec.key, "\" no \"default\""));
  }
  if (d.size() == 1) {
    return Append<double>(c, std::vector<double>(static_cast<size_t>(col.values), d[0]), where);
  }
  return Append<double>(c, d, where);
}

absl::StatusOr<std::map<std::string, data::NumpyArray>> RowBuffer::Take(absl::string_view x_prefix,
                                                                        absl::string_view y_name,
                                                                        absl::string_view w_name) {
  std::map<std::string, data::NumpyArray> out;
  for (size_t c = 0; c < layout_->columns.size(); ++c) {
    const Column& col = layout_->columns[c];
    std::vector<int64_t> shape = {rows_};
    shape.insert(shape.end(), col.shape.begin(), col.shape.end());
    const int ci = static_cast<int>(c);
    const std::string name = ci == layout_->label    ? std::string(y_name)
                             : ci == layout_->weight ? std::string(w_name)
                                                     : absl::StrCat(x_prefix, col.array);
    PSC_ASSIGN_OR_RETURN(data::NumpyArray a,
                         data::NumpyArray::FromElements(col.type, shape, std::move(data_[c])));
    out.insert_or_assign(name, std::move(a));
    data_[c].clear();
  }
  rows_ = 0;
  return out;
}

}  // namespace psc::records
