#include "ps_server/data_handler.h"

#include "ps_server/shard_calls.h"

namespace psc {
namespace ps_server {

absl::Status ShardDataHandler::Push(const proto::PushRequest& request, absl::Time deadline,
                                    proto::PushResponse* response) {
  return PushThenPullBlocking(shard_, request, deadline, response);
}

absl::Status ShardDataHandler::Pull(const proto::PullRequest& request, absl::Time deadline,
                                    proto::PullResponse* response) {
  return PullBlocking(shard_, request, deadline, response);
}

}  // namespace ps_server
}  // namespace psc
