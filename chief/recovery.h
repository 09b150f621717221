// What the chief does after a server failure it survives. (A lost worker
// is membership's: in async and ssp its unit goes back to the work queue,
// work_queue.h; in sync its steps are closed without it.)
//  - A failed server (a unit failed while its worker still answers): wait
//    (up to server_recovery_timeout) for every shard to answer again (the
//    launcher's --restart_failed or an orchestrator restarts it), configure
//    them, tell them the live workers, restore every shard from the latest
//    checkpoint, and redo the work since. Without a checkpoint the job fails
//    with a message that says so; after 10 recoveries it gives up.
#ifndef PSC_CHIEF_RECOVERY_H_
#define PSC_CHIEF_RECOVERY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/error_feedback_book.h"
#include "chief/membership.h"
#include "chief/shard_control.h"
#include "chief/unit_dispatcher.h"
#include "common/base/clock.h"

namespace psc {
namespace chief {

struct RecoveryOptions {
  proto::TrainingMode mode = proto::MODE_SYNC;
  std::string checkpoint_dir;  // "" = no checkpoints to restore from
  absl::Duration server_recovery_timeout = absl::Minutes(5);
  int64_t max_recoveries = 10;
};

// Thread-compatible.
class Recovery {
 public:
  // Not owned.
  Recovery(const RecoveryOptions& options, ps_client::ParameterClient* servers,
           ShardControl* shards, UnitDispatcher* dispatcher, Membership* membership,
           base::Clock* clock)
      : options_(options),
        servers_(servers),
        shards_(shards),
        dispatcher_(dispatcher),
        membership_(membership),
        clock_(clock) {}

  // After `failure` (a unit failed while its worker answers): restores the
  // servers as above and returns the step to go on from.
  absl::StatusOr<int64_t> RestoreServers(const absl::Status& failure);

  int64_t recoveries() const { return recoveries_; }

  // --topk_ratio: a restore puts the workers' error feedback recorded with
  // the checkpoint back into `book` (not owned; null: none).
  void set_error_feedback(ErrorFeedbackBook* book) { book_ = book; }

 private:
  const RecoveryOptions options_;
  ps_client::ParameterClient* const servers_;
  ShardControl* const shards_;
  UnitDispatcher* const dispatcher_;
  Membership* const membership_;
  base::Clock* const clock_;
  int64_t recoveries_ = 0;
  ErrorFeedbackBook* book_ = nullptr;
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_RECOVERY_H_
