#include "common/rpc/grpc_parameter_client.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cluster/host_port.h"
#include "common/ps_client/data_channel_path.h"
#include "common/rpc/grpc_shard_transport.h"

namespace psc {
namespace rpc {
namespace {

std::vector<ps_client::ShardEndpoint> Endpoints(const std::vector<std::string>& addresses,
                                                const SecurityOptions& security,
                                                bool data_channel) {
  std::vector<ps_client::ShardEndpoint> shards;
  for (size_t i = 0; i < addresses.size(); ++i) {
    ps_client::ShardEndpoint e;
    e.name = absl::StrCat("ps:", i, " (", addresses[i], ")");
    e.transport = std::make_unique<GrpcShardTransport>(addresses[i], security);
    auto host = cluster::ParseHostPort(addresses[i]);
    if (data_channel && !security.tls && host.ok()) {
      e.data = std::make_unique<ps_client::DataChannelPath>(host->host, e.transport.get());
    }
    shards.push_back(std::move(e));
  }
  return shards;
}

}  // namespace

GrpcParameterClient::GrpcParameterClient(const std::vector<std::string>& addresses,
                                         const SecurityOptions& security,
                                         absl::Duration retry_window, bool data_channel)
    : ps_client::ParameterServerClient(Endpoints(addresses, security, data_channel),
                                       {.retry_window = retry_window}) {}

}  // namespace rpc
}  // namespace psc
