#include "chief/recovery.h"

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"

namespace psc {
namespace chief {

absl::StatusOr<int64_t> Recovery::RestoreServers(const absl::Status& failure) {
  if (recoveries_ >= options_.max_recoveries) {
    return absl::Status(failure.code(),
                        absl::StrCat("giving up after ", recoveries_,
                                     " recoveries; last failure: ", failure.message()));
  }
  if (options_.checkpoint_dir.empty()) {
    return absl::UnavailableError(
        "a parameter server failed and there is no checkpoint to recover from "
        "(run with --checkpoint_dir and --checkpoint_every_steps)");
  }
  const absl::Time deadline = clock_->Now() + options_.server_recovery_timeout;
  for (int s = 0; s < servers_->num_shards(); ++s) {
    for (;;) {
      auto stats = servers_->GetStats(s);
      if (stats.ok()) break;
      if (clock_->Now() >= deadline) {
        return absl::UnavailableError(
            absl::StrCat("ps:", s, " did not come back within ",
                         absl::FormatDuration(options_.server_recovery_timeout), ": ",
                         stats.status().message()));
      }
    }
  }
  PSC_RETURN_IF_ERROR(shards_->ConfigureAll());
  PSC_RETURN_IF_ERROR(membership_->TellServers());
  PSC_ASSIGN_OR_RETURN(const int64_t step, shards_->RestoreLatest(options_.checkpoint_dir));
  if (book_ != nullptr) {
    PSC_RETURN_IF_ERROR(book_->Reset(step, shards_->restored_worker_state()));
  }
  ++recoveries_;
  base::Logf("chief: a parameter server failed; restored every shard from %s step %d",
             options_.checkpoint_dir, step);
  return step;
}

}  // namespace chief
}  // namespace psc
