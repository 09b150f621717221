#include "common/tfrecord/example_scan.h"

#include <cstring>

namespace psc {
namespace tfrecord {
namespace {

// A cursor over protobuf wire bytes.
class Wire {
 public:
  explicit Wire(absl::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  bool done() const { return p_ == end_; }

  bool Varint(uint64_t* v) {
    uint64_t out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const uint8_t b = static_cast<uint8_t>(*p_++);
      out |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *v = out;
        return true;
      }
    }
    return false;  // more than 10 bytes
  }
  // A field's tag: its number and wire type.
  bool Tag(uint32_t* field, uint32_t* type) {
    uint64_t t = 0;
    if (!Varint(&t) || t > UINT32_MAX || (t >> 3) == 0) return false;
    *field = static_cast<uint32_t>(t >> 3);
    *type = static_cast<uint32_t>(t & 7);
    return true;
  }
  bool Bytes(absl::string_view* out) {
    uint64_t n = 0;
    if (!Varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    *out = absl::string_view(p_, static_cast<size_t>(n));
    p_ += n;
    return true;
  }
  bool Fixed(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }
  // Skips a field of `type`; false for groups (3, 4) and unknown types.
  bool Skip(uint32_t type) {
    uint64_t v = 0;
    absl::string_view s;
    switch (type) {
      case 0:
        return Varint(&v);
      case 1:
        return Fixed(8);
      case 2:
        return Bytes(&s);
      case 5:
        return Fixed(4);
      default:
        return false;
    }
  }
  const char* here() const { return p_; }

 private:
  const char* p_;
  const char* end_;
};

}  // namespace

bool ExampleScanner::Scan(absl::string_view record) {
  features_.assign(names_.size(), Feature());
  Wire w(record);
  while (!w.done()) {
    uint32_t field = 0, type = 0;
    if (!w.Tag(&field, &type)) return false;
    if (field == 1 && type == 2) {  // Example.features: several merge
      absl::string_view features;
      if (!w.Bytes(&features) || !ScanFeatures(features)) return false;
    } else if (!w.Skip(type)) {
      return false;
    }
  }
  return true;
}

bool ExampleScanner::ScanFeatures(absl::string_view features) {
  Wire w(features);
  while (!w.done()) {
    uint32_t field = 0, type = 0;
    if (!w.Tag(&field, &type)) return false;
    if (field == 1 && type == 2) {  // a map entry
      absl::string_view entry;
      if (!w.Bytes(&entry) || !ScanEntry(entry)) return false;
    } else if (!w.Skip(type)) {
      return false;
    }
  }
  return true;
}

bool ExampleScanner::ScanEntry(absl::string_view entry) {
  // key = 1, value = 2, either order, each possibly repeated (the last key
  // wins; values merge). Only an entry with one key and one value, the
  // shape every writer gives, is read here.
  Wire w(entry);
  absl::string_view key, value;
  int keys = 0, values = 0;
  while (!w.done()) {
    uint32_t field = 0, type = 0;
    if (!w.Tag(&field, &type)) return false;
    if (field == 1 && type == 2) {
      if (!w.Bytes(&key)) return false;
      ++keys;
    } else if (field == 2 && type == 2) {
      if (!w.Bytes(&value)) return false;
      ++values;
    } else if (!w.Skip(type)) {
      return false;
    }
  }
  if (keys > 1 || values > 1) return false;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (key != names_[i]) continue;
    Feature f;
    f.found = true;
    if (!ScanFeature(value, &f)) return false;
    features_[i] = std::move(f);  // a later entry of the key replaces it
  }
  return true;
}

bool ExampleScanner::ScanFeature(absl::string_view feature, Feature* out) {
  Wire w(feature);
  while (!w.done()) {
    uint32_t field = 0, type = 0;
    if (!w.Tag(&field, &type)) return false;
    if (field >= 1 && field <= 3 && type == 2) {
      const Kind kind = field == 1 ? Kind::kBytes : field == 2 ? Kind::kFloat : Kind::kInt64;
      absl::string_view list;
      if (!w.Bytes(&list)) return false;
      if (kind != out->kind) out->pieces.clear();  // another member of the oneof replaces it
      out->kind = kind;
      out->pieces.push_back(list);  // the same one merges
    } else if (!w.Skip(type)) {
      return false;
    }
  }
  return true;
}

namespace {

// Calls value(type, &wire) for each field 1 of the list messages `pieces`
// (it reads the value), skipping other fields. False for malformed bytes
// or when value() says so.
template <typename Value>
bool ForEachValue(const std::vector<absl::string_view>& pieces, Value value) {
  for (absl::string_view piece : pieces) {
    Wire w(piece);
    while (!w.done()) {
      uint32_t field = 0, type = 0;
      if (!w.Tag(&field, &type)) return false;
      if (field == 1 ? !value(type, &w) : !w.Skip(type)) return false;
    }
  }
  return true;
}

}  // namespace

bool ExampleScanner::Floats(int i, std::vector<float>* out) const {
  out->clear();
  return ForEachValue(features_[i].pieces, [out](uint32_t type, Wire* w) {
    if (type == 2) {  // packed
      absl::string_view packed;
      if (!w->Bytes(&packed) || packed.size() % 4 != 0) return false;
      const size_t at = out->size();
      out->resize(at + packed.size() / 4);
      std::memcpy(out->data() + at, packed.data(), packed.size());  // little-endian host
      return true;
    }
    if (type != 5) return w->Skip(type);
    float v;
    const char* p = w->here();
    if (!w->Fixed(4)) return false;
    std::memcpy(&v, p, 4);
    out->push_back(v);
    return true;
  });
}

bool ExampleScanner::Int64s(int i, std::vector<int64_t>* out) const {
  out->clear();
  return ForEachValue(features_[i].pieces, [out](uint32_t type, Wire* w) {
    uint64_t v = 0;
    if (type == 2) {  // packed
      absl::string_view packed;
      if (!w->Bytes(&packed)) return false;
      Wire p(packed);
      while (!p.done()) {
        if (!p.Varint(&v)) return false;
        out->push_back(static_cast<int64_t>(v));
      }
      return true;
    }
    if (type != 0) return w->Skip(type);
    if (!w->Varint(&v)) return false;
    out->push_back(static_cast<int64_t>(v));
    return true;
  });
}

bool ExampleScanner::Bytes(int i, std::vector<absl::string_view>* out) const {
  out->clear();
  return ForEachValue(features_[i].pieces, [out](uint32_t type, Wire* w) {
    if (type != 2) return w->Skip(type);
    absl::string_view v;
    if (!w->Bytes(&v)) return false;
    out->push_back(v);
    return true;
  });
}

}  // namespace tfrecord
}  // namespace psc
