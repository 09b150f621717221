// The ParameterServer gRPC service: a thin adapter (rpc::UnaryService: the
// token, parsing, exceptions) that hands each call to the ShardServer and
// finishes it when the shard is done. A waiting pull holds no gRPC thread:
// it is finished from the shard's callback.
#ifndef PSC_PS_SERVER_PS_SERVICE_H_
#define PSC_PS_SERVER_PS_SERVICE_H_

#include <string>

#include "common/base/shutdown.h"
#include "common/data_channel/data_server.h"
#include "common/rpc/unary_service.h"
#include "ps_server/shard_server.h"

namespace psc {
namespace ps_server {

// Thread-safe.
class ParameterServerService final : public rpc::UnaryService {
 public:
  // `server` and `shutdown` are not owned and must outlive the service.
  ParameterServerService(ShardServer* server, std::string token, base::ShutdownSignal* shutdown);

  // The data channel OpenDataChannel hands out (not owned; null = none).
  // Call before serving.
  void set_data_server(data_channel::DataServer* data_server) { data_server_ = data_server; }

 private:
  absl::Status OpenDataChannel(proto::OpenDataChannelResponse* response);

  ShardServer* const server_;
  base::ShutdownSignal* const shutdown_;
  data_channel::DataServer* data_server_ = nullptr;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_PS_SERVICE_H_
