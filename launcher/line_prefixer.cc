#include "launcher/line_prefixer.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace launcher {

void LinePrefixer::Feed(absl::string_view bytes) {
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (in_place_ && bytes[i] == '\r') {  // a redraw: what came before is overwritten
      partial_.clear();
      redrawn_ = true;
      start = i + 1;
      continue;
    }
    if (bytes[i] != '\n') continue;
    absl::string_view piece = bytes.substr(start, i - start);
    emit_(absl::StrCat(redrawn_ ? "\r" : "", prefix_, partial_, piece, "\n"));
    partial_.clear();
    redrawn_ = false;
    start = i + 1;
  }
  absl::StrAppend(&partial_, bytes.substr(start));
  if (redrawn_ && !partial_.empty()) emit_(absl::StrCat("\r", prefix_, partial_));
}

void LinePrefixer::Flush() {
  if (partial_.empty()) return;
  emit_(absl::StrCat(redrawn_ ? "\r" : "", prefix_, partial_, "\n"));
  partial_.clear();
  redrawn_ = false;
}

}  // namespace launcher
}  // namespace psc
