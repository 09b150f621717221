// The ParameterServer gRPC service: a thin adapter that authenticates each
// call, hands it to the ShardServer, and finishes it when the shard is done.
// A waiting pull holds no gRPC thread: its reactor is finished from the
// shard's callback (callback API).
#ifndef PSC_PS_SERVER_PS_SERVICE_H_
#define PSC_PS_SERVER_PS_SERVICE_H_

#include <string>

#include "common/base/shutdown.h"
#include "common/data_channel/data_server.h"
#include "common/rpc/auth.h"
#include "proto/parameter_server.grpc.pb.h"
#include "ps_server/shard_server.h"

namespace psc {
namespace ps_server {

// Thread-safe.
class ParameterServerService final : public proto::ParameterServer::CallbackService {
 public:
  // `server` and `shutdown` are not owned and must outlive the service.
  ParameterServerService(ShardServer* server, std::string token, base::ShutdownSignal* shutdown);

  // The data channel OpenDataChannel hands out (not owned; null = none).
  // Call before serving.
  void set_data_server(data_channel::DataServer* data_server) { data_server_ = data_server; }

  grpc::ServerUnaryReactor* Configure(grpc::CallbackServerContext* context,
                                      const proto::ConfigureRequest* request,
                                      proto::ConfigureResponse* response) override;
  grpc::ServerUnaryReactor* CreateVariables(grpc::CallbackServerContext* context,
                                            const proto::CreateVariablesRequest* request,
                                            proto::CreateVariablesResponse* response) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const proto::PullRequest* request,
                                 proto::PullResponse* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const proto::PushRequest* request,
                                 proto::PushResponse* response) override;
  grpc::ServerUnaryReactor* UpdateMembership(grpc::CallbackServerContext* context,
                                             const proto::UpdateMembershipRequest* request,
                                             proto::UpdateMembershipResponse* response) override;
  grpc::ServerUnaryReactor* SaveCheckpoint(grpc::CallbackServerContext* context,
                                           const proto::SaveCheckpointRequest* request,
                                           proto::SaveCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* RestoreCheckpoint(grpc::CallbackServerContext* context,
                                              const proto::RestoreCheckpointRequest* request,
                                              proto::RestoreCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const proto::GetStatsRequest* request,
                                     proto::ShardStats* response) override;
  grpc::ServerUnaryReactor* OpenDataChannel(grpc::CallbackServerContext* context,
                                            const proto::OpenDataChannelRequest* request,
                                            proto::OpenDataChannelResponse* response) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* context,
                                     const proto::ShutdownRequest* request,
                                     proto::ShutdownResponse* response) override;

 private:
  ShardServer* const server_;
  const rpc::TokenAuthenticator auth_;
  base::ShutdownSignal* const shutdown_;
  data_channel::DataServer* data_server_ = nullptr;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_PS_SERVICE_H_
