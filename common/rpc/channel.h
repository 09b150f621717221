// Client channels to other tasks, with pscluster's security and channel
// arguments applied in one place.
#ifndef PSC_COMMON_RPC_CHANNEL_H_
#define PSC_COMMON_RPC_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/rpc/security.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace psc {
namespace rpc {

// Message size limit for requests and replies in both directions: room for
// a whole shard of a large model in one message.
inline constexpr int kMaxMessageBytes = 1 << 30;

// A channel to `address` ("host:port"). Reconnect backoff is short (100 ms
// growing to 1 s) so that a peer that comes up is found quickly; callers
// retry with their own backoff and deadline.
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& address,
                                             const SecurityOptions& security);

// Sets the deadline and the token on an outgoing call's context.
void PrepareContext(grpc::ClientContext* context, const SecurityOptions& security,
                    absl::Duration timeout);

}  // namespace rpc
}  // namespace psc

#endif  // PSC_COMMON_RPC_CHANNEL_H_
