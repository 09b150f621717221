// The ParameterServer gRPC service: a thin adapter that authenticates each
// call and hands it to the shard. The shard's store, modes and checkpoints
// arrive with the ps_server issue; until then the data-plane methods answer
// UNIMPLEMENTED (after the token check), and GetStats/Shutdown are real.
#ifndef PSC_PS_SERVER_PS_SERVICE_H_
#define PSC_PS_SERVER_PS_SERVICE_H_

#include <string>

#include "common/rpc/auth.h"
#include "common/shutdown.h"
#include "proto/parameter_server.grpc.pb.h"

namespace psc {
namespace ps {

// Thread-safe.
class ParameterServerService final : public proto::ParameterServer::CallbackService {
 public:
  // `shutdown` (not owned) is requested by the Shutdown RPC.
  ParameterServerService(int shard_index, std::string token, ShutdownSignal* shutdown);

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
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* context,
                                     const proto::ShutdownRequest* request,
                                     proto::ShutdownResponse* response) override;

 private:
  const int shard_index_;
  const TokenAuthenticator auth_;
  ShutdownSignal* const shutdown_;
};

}  // namespace ps
}  // namespace psc

#endif  // PSC_PS_SERVER_PS_SERVICE_H_
