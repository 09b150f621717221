#include "common/base/status_context.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace psc {
namespace base {

absl::Status Prefix(const absl::Status& status, absl::string_view what) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(what, ": ", status.message()));
  status.ForEachPayload([&out](absl::string_view type_url, const absl::Cord& payload) {
    out.SetPayload(type_url, payload);
  });
  return out;
}

}  // namespace base
}  // namespace psc
