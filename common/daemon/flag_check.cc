#include "common/daemon/flag_check.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace psc {
namespace daemon {
namespace {

// "--name=value" / "-name" -> "name"; nullopt for a non-flag argument.
std::optional<std::string> FlagName(absl::string_view arg) {
  if (arg.size() < 2 || arg[0] != '-') return std::nullopt;
  arg.remove_prefix(arg[1] == '-' ? 2 : 1);
  // "-5" is a value (a negative number), not a flag.
  if (arg.empty() || arg[0] == '-' || absl::ascii_isdigit(static_cast<unsigned char>(arg[0]))) {
    return std::nullopt;
  }
  return std::string(arg.substr(0, arg.find('=')));
}

// Levenshtein distance, stopping early past `limit`.
int EditDistance(absl::string_view a, absl::string_view b, int limit) {
  if (static_cast<int>(std::max(a.size(), b.size()) - std::min(a.size(), b.size())) > limit) {
    return limit + 1;
  }
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string> HelpFlag(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") break;
    const std::optional<std::string> name = FlagName(arg);
    if (name && (*name == "help" || *name == "helpfull" || *name == "helpshort")) return name;
  }
  return std::nullopt;
}

std::optional<std::string> UnknownFlag(const std::vector<std::string>& args,
                                       const std::vector<std::string>& known) {
  const std::set<std::string> defined(known.begin(), known.end());
  std::set<std::string> undefok;
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (absl::StartsWith(arg, "--undefok=") || absl::StartsWith(arg, "-undefok=")) {
      for (absl::string_view n : absl::StrSplit(arg.substr(arg.find('=') + 1), ',')) {
        undefok.insert(std::string(n));
      }
    }
  }
  for (const std::string& arg : args) {
    if (arg == "--") break;
    const std::optional<std::string> name = FlagName(arg);
    if (!name || defined.count(*name) || undefok.count(*name)) continue;
    if (absl::StartsWith(*name, "no") && defined.count(name->substr(2))) continue;
    std::string line = absl::StrCat("unknown flag --", *name);
    std::string best;
    int best_distance = 3;
    for (const std::string& k : known) {
      const int d = EditDistance(*name, k, 2);
      if (d < best_distance || (best.empty() && absl::StartsWith(k, *name))) {
        best = k;
        best_distance = std::min(d, best_distance);
      }
    }
    if (!best.empty()) absl::StrAppend(&line, "; did you mean --", best, "?");
    return line;
  }
  return std::nullopt;
}

}  // namespace daemon
}  // namespace psc
