// The data channel's handler on a ps_server: Push and Pull go to the
// ShardServer exactly as the gRPC service sends them; and the order in which
// a ps_server stops them.
#ifndef PSC_PS_SERVER_DATA_HANDLER_H_
#define PSC_PS_SERVER_DATA_HANDLER_H_

#include "common/data_channel/data_server.h"
#include "ps_server/shard_server.h"

namespace psc {
namespace ps_server {

// Thread-safe.
class ShardDataHandler : public data_channel::DataHandler {
 public:
  explicit ShardDataHandler(ShardServer* server) : server_(server) {}
  absl::Status Push(const proto::PushRequest& request, absl::Time deadline,
                    proto::PushResponse* response) override {
    return server_->PushBlocking(request, deadline, response);
  }
  absl::Status Pull(const proto::PullRequest& request, absl::Time deadline,
                    proto::PullResponse* response) override {
    return server_->PullBlocking(request, deadline, response);
  }
  absl::Status CheckPush(const proto::PushRequest& meta) override {
    return server_->CheckGradientShapes(meta);
  }

 private:
  ShardServer* const server_;
};

// A ps_server's stop (SIGTERM, the chief's Shutdown), in the order that
// leaves no request in flight unanswered: every waiting pull fails
// UNAVAILABLE at once (ShardServer::Stop; new waits are refused), then the
// data channel (if any) drains: a request in flight gets its answer if it
// completes within `grace`, else UNAVAILABLE (DataServer::Stop). Pushes go
// on being applied until then, so the shard's counters stay whole
// (accepted = applied + dropped + discarded + pending).
inline void StopServing(ShardServer* server, data_channel::DataServer* data, absl::Duration grace) {
  server->Stop();
  if (data != nullptr) data->Stop(grace);
}

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_DATA_HANDLER_H_
