// Minimal line logging to stderr (Abseil 20220623 has no absl/log).
// Each call writes one whole line with one write(2), so lines from threads
// and from the processes of a local cluster never interleave mid-line.
#ifndef PSC_COMMON_BASE_LOGGING_H_
#define PSC_COMMON_BASE_LOGGING_H_

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace psc {
namespace base {

// Writes "<UTC time> <line>\n" to stderr. Thread-safe.
void LogLine(absl::string_view line);

template <typename... Args>
void Logf(const absl::FormatSpec<Args...>& format, const Args&... args) {
  LogLine(absl::StrFormat(format, args...));
}

}  // namespace base
}  // namespace psc

#endif  // PSC_COMMON_BASE_LOGGING_H_
