// The data channel's handler on a ps_server: Push and Pull go to the Shard
// exactly as the gRPC service sends them (shard_calls.h).
#ifndef PSC_PS_SERVER_DATA_HANDLER_H_
#define PSC_PS_SERVER_DATA_HANDLER_H_

#include "common/data_channel/data_server.h"
#include "ps_server/shard.h"

namespace psc {
namespace ps_server {

// Thread-safe. Waits end at their deadline only while someone calls
// shard->ExpireWaiters() (ParameterServerService does).
class ShardDataHandler : public data_channel::DataHandler {
 public:
  explicit ShardDataHandler(Shard* shard) : shard_(shard) {}
  absl::Status Push(const proto::PushRequest& request, absl::Time deadline,
                    proto::PushResponse* response) override;
  absl::Status Pull(const proto::PullRequest& request, absl::Time deadline,
                    proto::PullResponse* response) override;

 private:
  Shard* const shard_;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_DATA_HANDLER_H_
