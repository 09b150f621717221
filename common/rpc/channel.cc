#include "common/rpc/channel.h"

#include "common/rpc/auth.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace psc {
namespace rpc {

std::shared_ptr<grpc::Channel> CreateChannel(const std::string& address,
                                             const SecurityOptions& security) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Distinct channels to one address must not share a subchannel, so that a
  // test or a client holding several sees independent connections.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, MakeChannelCredentials(security), args);
}

void PrepareContext(grpc::ClientContext* context, const SecurityOptions& security,
                    absl::Duration timeout) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  AttachToken(context, security.token);
}

}  // namespace rpc
}  // namespace psc
