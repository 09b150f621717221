// What every binary checks on its command line before Abseil parses it:
//   - a help flag (--help, --helpfull, --helpshort) prints the usage and
//     exits 0 (Abseil's own handling exits 1);
//   - an unknown flag exits 2 with one line naming it and, when one is
//     close, the flag the user probably meant (Abseil's message names no
//     alternative and exits 1).
// Pure functions over the arguments; thread-safe.
#ifndef PSC_COMMON_DAEMON_FLAG_CHECK_H_
#define PSC_COMMON_DAEMON_FLAG_CHECK_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace psc {
namespace daemon {

// The help flag asked for ("help", "helpfull", "helpshort"), if any, among
// the arguments before a bare "--" (argv[0] excluded).
std::optional<std::string> HelpFlag(const std::vector<std::string>& args);

// For the first argument before a bare "--" that is a flag ("-name" or
// "--name", with or without "=value") that `known` does not define (nor,
// for "noname", defines as "name"), and that no --undefok lists: the line
// "unknown flag --name" plus "; did you mean --other?" when a known name is
// within 2 edits (or starts with it). nullopt when every flag is known.
std::optional<std::string> UnknownFlag(const std::vector<std::string>& args,
                                       const std::vector<std::string>& known);

}  // namespace daemon
}  // namespace psc

#endif  // PSC_COMMON_DAEMON_FLAG_CHECK_H_
