#include "launcher/flag_args.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace psc {
namespace launcher {
namespace {

enum class Match { kNone, kWithValue, kValueNext };

// Whether `arg` sets the flag `name`; with "=value", `value` gets the value.
Match MatchFlag(absl::string_view arg, absl::string_view name, std::string* value) {
  if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) return Match::kNone;
  if (!absl::ConsumePrefix(&arg, name)) return Match::kNone;
  if (arg.empty()) return Match::kValueNext;
  if (!absl::ConsumePrefix(&arg, "=")) return Match::kNone;  // another flag, e.g. --name_2
  *value = std::string(arg);
  return Match::kWithValue;
}

}  // namespace

std::optional<std::string> LastFlagValue(const std::vector<std::string>& args,
                                         absl::string_view name) {
  std::optional<std::string> found;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;
    std::string value;
    switch (MatchFlag(args[i], name, &value)) {
      case Match::kNone:
        break;
      case Match::kWithValue:
        found = value;
        break;
      case Match::kValueNext:
        if (i + 1 < args.size()) found = args[++i];
        break;
    }
  }
  return found;
}

std::vector<std::string> WithoutFlag(const std::vector<std::string>& args, absl::string_view name) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      kept.insert(kept.end(), args.begin() + i, args.end());
      break;
    }
    std::string value;
    switch (MatchFlag(args[i], name, &value)) {
      case Match::kNone:
        kept.push_back(args[i]);
        break;
      case Match::kWithValue:
        break;
      case Match::kValueNext:
        ++i;  // its value too
        break;
    }
  }
  return kept;
}

}  // namespace launcher
}  // namespace psc
