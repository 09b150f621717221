// The daemons' ParameterClient: a ps_client::ParameterServerClient whose
// shards are reached over gRPC (GrpcShardTransport), with the data channel
// beside it for Push and Pull when the shard offers one: in TLS, with the
// same certificates, when `security` has TLS (a shard whose channel's TLS
// differs is reached over gRPC). With data_channel = false, everything goes
// over gRPC.
#ifndef PSC_COMMON_RPC_GRPC_PARAMETER_CLIENT_H_
#define PSC_COMMON_RPC_GRPC_PARAMETER_CLIENT_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/ps_client/parameter_server_client.h"
#include "common/rpc/security.h"

namespace psc {
namespace rpc {

// Thread-safe.
class GrpcParameterClient : public ps_client::ParameterServerClient {
 public:
  // `addresses[i]` is shard i. UNAVAILABLE answers are retried with
  // exponential backoff until `retry_window` has passed since the call began.
  GrpcParameterClient(const std::vector<std::string>& addresses, const SecurityOptions& security,
                      absl::Duration retry_window = absl::Seconds(60), bool data_channel = true);
};

}  // namespace rpc
}  // namespace psc

#endif  // PSC_COMMON_RPC_GRPC_PARAMETER_CLIENT_H_
