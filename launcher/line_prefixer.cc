#include "launcher/line_prefixer.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace launcher {

void LinePrefixer::Feed(absl::string_view bytes) {
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != '\n') continue;
    absl::string_view piece = bytes.substr(start, i - start);
    emit_(absl::StrCat(prefix_, partial_, piece, "\n"));
    partial_.clear();
    start = i + 1;
  }
  absl::StrAppend(&partial_, bytes.substr(start));
}

void LinePrefixer::Flush() {
  if (partial_.empty()) return;
  emit_(absl::StrCat(prefix_, partial_, "\n"));
  partial_.clear();
}

}  // namespace launcher
}  // namespace psc
