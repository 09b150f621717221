// Splits a byte stream into lines and emits each whole line with a prefix,
// so the logs of several processes interleave only at line boundaries.
//
// In place (the chief's Keras bar when the launcher's stdout is a
// terminal): a '\r' starts a redraw of the line, which is emitted at once,
// as "\r<prefix><text so far>" with no newline, and again, whole, as
// "\r<prefix><line>\n" when its newline comes. Otherwise a '\r' is an
// ordinary byte.
#ifndef PSC_LAUNCHER_LINE_PREFIXER_H_
#define PSC_LAUNCHER_LINE_PREFIXER_H_

#include <functional>
#include <string>

#include "absl/strings/string_view.h"

namespace psc {
namespace launcher {

// Thread-compatible.
class LinePrefixer {
 public:
  // `emit` receives "<prefix><line>\n" for every complete line.
  LinePrefixer(std::string prefix, std::function<void(const std::string&)> emit,
               bool in_place = false)
      : prefix_(std::move(prefix)), emit_(std::move(emit)), in_place_(in_place) {}
  void Feed(absl::string_view bytes);
  // Emits a last line that had no newline.
  void Flush();

 private:
  const std::string prefix_;
  const std::function<void(const std::string&)> emit_;
  const bool in_place_;
  std::string partial_;
  bool redrawn_ = false;  // in place: the line being built began with '\r'
};

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_LINE_PREFIXER_H_
