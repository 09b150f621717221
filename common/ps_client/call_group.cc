#include "common/ps_client/call_group.h"

namespace psc {
namespace ps_client {

void CallGroup::Fail(const absl::Status& error) {
  {
    absl::MutexLock lock(&mu_);
    if (!first_error_.ok()) return;
    first_error_ = error.ok() ? absl::UnknownError("call group failed") : error;
  }
  cancellation_.Cancel();
}

absl::Status CallGroup::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

}  // namespace ps_client
}  // namespace psc
