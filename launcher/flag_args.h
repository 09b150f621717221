// The launcher passes the chief's flags on without parsing them (they are
// the chief's, defined in its binary). These helpers read and filter such a
// command line the way Abseil's parser reads it: "--name=value",
// "-name=value", or "--name value" for a flag that takes a value; a bare
// "--" ends the flags. They know no other flag, so an argument that is
// another flag's value ("--logdir --name=x") is read as a flag. Pure
// functions; thread-safe.
#ifndef PSC_LAUNCHER_FLAG_ARGS_H_
#define PSC_LAUNCHER_FLAG_ARGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace psc {
namespace launcher {

// The value the flag `name` (a flag that takes a value) gets from `args`:
// the last occurrence wins, as in Abseil. nullopt when it does not occur.
// "--name" as the last argument has no value and counts as absent.
std::optional<std::string> LastFlagValue(const std::vector<std::string>& args,
                                         absl::string_view name);

// `args` without any occurrence of the flag `name` (a flag that takes a
// value; "--name value" drops both arguments). Arguments after "--" are
// kept as they are.
std::vector<std::string> WithoutFlag(const std::vector<std::string>& args, absl::string_view name);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_FLAG_ARGS_H_
