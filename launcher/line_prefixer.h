// Splits a byte stream into lines and emits each whole line with a prefix,
// so the logs of several processes interleave only at line boundaries.
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
  LinePrefixer(std::string prefix, std::function<void(const std::string&)> emit)
      : prefix_(std::move(prefix)), emit_(std::move(emit)) {}
  void Feed(absl::string_view bytes);
  // Emits a last line that had no newline.
  void Flush();

 private:
  const std::string prefix_;
  const std::function<void(const std::string&)> emit_;
  std::string partial_;
};

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_LINE_PREFIXER_H_
