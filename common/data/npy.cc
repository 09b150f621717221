#include "common/data/npy.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/checked_size.h"
#include "common/base/status_macros.h"

namespace psc::data {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr int64_t kMaxDim = int64_t{1} << 62;

struct TypeInfo {
  const char* code;  // descr without the byte order: "f4"
  NpyType type;
  const char* name;
  size_t size;
};
constexpr TypeInfo kTypes[] = {
    {"b1", NpyType::kBool, "bool", 1},       {"i1", NpyType::kInt8, "int8", 1},
    {"u1", NpyType::kUint8, "uint8", 1},     {"i2", NpyType::kInt16, "int16", 2},
    {"u2", NpyType::kUint16, "uint16", 2},   {"i4", NpyType::kInt32, "int32", 4},
    {"u4", NpyType::kUint32, "uint32", 4},   {"i8", NpyType::kInt64, "int64", 8},
    {"u8", NpyType::kUint64, "uint64", 8},   {"f4", NpyType::kFloat32, "float32", 4},
    {"f8", NpyType::kFloat64, "float64", 8},
};

const TypeInfo& Info(NpyType type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return t;
  }
  return kTypes[0];
}

// A cursor over the header's dict literal.
class DictReader {
 public:
  DictReader(absl::string_view text, absl::string_view name) : text_(text), name_(name) {}

  absl::Status Error(absl::string_view what) const {
    return absl::DataLossError(absl::StrCat(name_, ": bad .npy header: ", what, " at byte ", pos_,
                                            " of \"", absl::CEscape(text_), "\""));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  absl::StatusOr<std::string> String() {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return Error("expected a quoted string");
    }
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == absl::string_view::npos) return Error("unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    if (s.find('\\') != std::string::npos) return Error("escapes are not supported");
    pos_ = end + 1;
    return s;
  }
  absl::StatusOr<bool> Bool() {
    SkipSpace();
    for (const auto& [word, value] :
         {std::pair<const char*, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, std::strlen(word)) == word) {
        pos_ += std::strlen(word);
        return value;
      }
    }
    return Error("expected True or False");
  }
  absl::StatusOr<std::vector<int64_t>> Tuple() {
    if (!Consume('(')) return Error("expected a tuple");
    std::vector<int64_t> dims;
    while (true) {
      if (Consume(')')) return dims;
      SkipSpace();
      int64_t v = 0;
      const size_t start = pos_;
      while (pos_ < text_.size() && absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_]))) {
        const int digit = text_[pos_] - '0';
        if (v > (kMaxDim - digit) / 10) return Error("a dimension over 2^62");  // before it wraps
        v = v * 10 + digit;
        ++pos_;
      }
      if (pos_ == start) return Error("expected a non-negative integer");
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2's long
      dims.push_back(v);
      if (dims.size() > 32) return Error("more than 32 dimensions");
      if (!Consume(',')) {
        if (Consume(')')) return dims;
        return Error("expected ',' or ')'");
      }
    }
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }

 private:
  absl::string_view text_;
  absl::string_view name_;
  size_t pos_ = 0;
};

absl::StatusOr<NpyType> ParseDescr(const std::string& descr, absl::string_view name) {
  if (descr.size() == 3 &&
      (descr[0] == '<' || descr[0] == '|' || descr[0] == '=' || descr[0] == '>')) {
    const std::string code = descr.substr(1);
    for (const TypeInfo& t : kTypes) {
      if (code != t.code) continue;
      if (descr[0] == '>' && t.size > 1) {
        return absl::DataLossError(absl::StrCat(
            name, ": big-endian ", t.name, " ('", descr,
            "') is not supported; save it as little-endian (arr.astype('<", t.code, "'))"));
      }
      return t.type;
    }
  }
  std::vector<std::string> known;
  for (const TypeInfo& t : kTypes) known.push_back(t.name);
  return absl::DataLossError(
      absl::StrCat(name, ": element type '", descr,
                   "' is not supported; supported: ", absl::StrJoin(known, ", ")));
}

}  // namespace

const char* NpyTypeName(NpyType type) { return Info(type).name; }
size_t NpyTypeSize(NpyType type) { return Info(type).size; }
bool NpyTypeIsInteger(NpyType type) {
  return type != NpyType::kFloat32 && type != NpyType::kFloat64;
}

std::string NpyHeader::Text() const {
  return absl::StrCat("(", absl::StrJoin(shape, ", "), shape.size() == 1 ? ",)" : ")", " ",
                      NpyTypeName(type));
}

absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, absl::string_view name,
                                         uint64_t max_data_bytes) {
  if (bytes.size() < kMagicBytes + 2 || bytes.substr(0, kMagicBytes) != kMagic) {
    return absl::DataLossError(absl::StrCat(name, ": not a .npy array (no \\x93NUMPY magic)"));
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  uint64_t header_len = 0, preamble = 0;
  if (major == 1) {
    preamble = 10;
    if (bytes.size() < preamble) return absl::DataLossError(absl::StrCat(name, ": truncated"));
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (uint64_t{static_cast<unsigned char>(bytes[9])} << 8);
  } else if (major == 2 || major == 3) {
    preamble = 12;
    if (bytes.size() < preamble) return absl::DataLossError(absl::StrCat(name, ": truncated"));
    for (int i = 0; i < 4; ++i) {
      header_len |= uint64_t{static_cast<unsigned char>(bytes[8 + i])} << (8 * i);
    }
  } else {
    return absl::DataLossError(absl::StrCat(name, ": .npy format version ", major, ".",
                                            static_cast<unsigned char>(bytes[7]),
                                            " is not supported (1.0 to 3.0 are)"));
  }
  if (header_len > kMaxNpyHeaderBytes) {
    return absl::DataLossError(absl::StrCat(name, ": a .npy header of ", header_len,
                                            " bytes (at most ", kMaxNpyHeaderBytes, ")"));
  }
  if (bytes.size() < preamble + header_len) {
    return absl::DataLossError(absl::StrCat(name, ": truncated .npy header (", bytes.size(), " of ",
                                            preamble + header_len, " bytes)"));
  }
  DictReader r(bytes.substr(preamble, header_len), name);
  if (!r.Consume('{')) return r.Error("expected '{'");
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  std::string descr;
  NpyHeader h;
  while (!r.Consume('}')) {
    PSC_ASSIGN_OR_RETURN(std::string key, r.String());
    if (!r.Consume(':')) return r.Error("expected ':'");
    if (key == "descr" && !have_descr) {
      PSC_ASSIGN_OR_RETURN(descr, r.String());
      have_descr = true;
    } else if (key == "fortran_order" && !have_order) {
      PSC_ASSIGN_OR_RETURN(fortran, r.Bool());
      have_order = true;
    } else if (key == "shape" && !have_shape) {
      PSC_ASSIGN_OR_RETURN(h.shape, r.Tuple());
      have_shape = true;
    } else {
      return r.Error(absl::StrCat("unexpected or repeated key '", key, "'"));
    }
    if (!r.Consume(',')) {
      if (!r.Consume('}')) return r.Error("expected ',' or '}'");
      break;
    }
  }
  if (!r.AtEnd()) return r.Error("text after the dict");
  if (!have_descr || !have_order || !have_shape) {
    return r.Error("the dict needs 'descr', 'fortran_order' and 'shape'");
  }
  PSC_ASSIGN_OR_RETURN(h.type, ParseDescr(descr, name));
  int big_dims = 0;
  for (int64_t d : h.shape) big_dims += d > 1;
  if (fortran && big_dims > 1) {
    return absl::DataLossError(absl::StrCat(
        name, ": a Fortran-ordered array is not supported; save np.ascontiguousarray(arr)"));
  }
  const std::string what =
      absl::StrCat(name, ": array of shape (", absl::StrJoin(h.shape, ", "), ")");
  absl::StatusOr<uint64_t> data_bytes =
      base::ByteSize(h.shape, NpyTypeSize(h.type), max_data_bytes, what);
  if (!data_bytes.ok()) return absl::DataLossError(data_bytes.status().message());
  h.data_bytes = *data_bytes;
  h.count = static_cast<int64_t>(h.data_bytes / NpyTypeSize(h.type));
  h.data_offset = preamble + header_len;
  return h;
}

std::string MakeNpyHeader(NpyType type, const std::vector<int64_t>& shape) {
  std::string dict = absl::StrCat("{'descr': '", NpyTypeSize(type) == 1 ? "|" : "<",
                                  Info(type).code, "', 'fortran_order': False, 'shape': (",
                                  absl::StrJoin(shape, ", "), shape.size() == 1 ? ",), }" : "), }");
  // Pad with spaces so that magic + version + length + dict + '\n' is a
  // multiple of 64 bytes, as np.save does.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicBytes);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>((dict.size() >> 8) & 0xff));
  return out + dict;
}

}  // namespace psc::data
