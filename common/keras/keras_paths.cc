#include "common/keras/keras_paths.h"

#include <cctype>
#include <map>

#include "absl/strings/str_cat.h"

namespace psc {
namespace keras {

std::string SnakeCase(absl::string_view class_name) {
  // re.sub(r"\W+", "", name)
  std::string s;
  for (char c : class_name) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') s.push_back(c);
  }
  auto upper = [](char c) { return std::isupper(static_cast<unsigned char>(c)) != 0; };
  auto lower = [](char c) { return std::islower(static_cast<unsigned char>(c)) != 0; };
  // re.sub("(.)([A-Z][a-z]+)", r"\1_\2", s): before each capital that
  // starts a run of lowercase letters, unless it begins the string. The
  // regex scans left to right without overlapping: a match consumes the
  // character before the capital and the whole word.
  std::string a;
  for (size_t i = 0; i < s.size();) {
    if (i + 2 < s.size() && upper(s[i + 1]) && lower(s[i + 2])) {
      a += s[i];
      a += '_';
      a += s[i + 1];
      size_t j = i + 2;
      while (j < s.size() && lower(s[j])) a += s[j++];
      i = j;
    } else {
      a += s[i++];
    }
  }
  // re.sub("([a-z])([A-Z])", r"\1_\2", a)
  std::string b;
  for (size_t i = 0; i < a.size(); ++i) {
    b.push_back(a[i]);
    if (lower(a[i]) && i + 1 < a.size() && upper(a[i + 1])) b.push_back('_');
  }
  for (char& c : b) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return b;
}

std::vector<std::string> LayerGroups(const compute::Model& model) {
  std::map<std::string, int> used;
  std::vector<std::string> out;
  for (const compute::SummaryRow& row : model.summary()) {
    std::string name = SnakeCase(row.keras_class);
    const auto it = used.find(name);
    if (it == used.end()) {
      used[name] = 0;
    } else {
      name = absl::StrCat(name, "_", ++it->second);
    }
    out.push_back(absl::StrCat("layers/", name));
  }
  return out;
}

std::vector<std::string> VariablePaths(const compute::Model& model) {
  const std::vector<std::string> groups = LayerGroups(model);
  std::vector<std::string> out;
  for (size_t i = 0; i < groups.size(); ++i) {
    const compute::SummaryRow& row = model.summary()[i];
    std::map<std::string, int> next;  // per sublayer: its next variable
    for (int v = 0; v < row.variables; ++v) {
      if (static_cast<size_t>(v) < row.sublayers.size()) {
        const std::string& sub = row.sublayers[v];
        out.push_back(absl::StrCat(groups[i], "/", sub, "/vars/", next[sub]++));
      } else {
        out.push_back(absl::StrCat(groups[i], "/vars/", v));
      }
    }
  }
  return out;
}

}  // namespace keras
}  // namespace psc
