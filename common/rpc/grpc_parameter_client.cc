#include "common/rpc/grpc_parameter_client.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/cluster/host_port.h"
#include "common/data_channel/tls.h"
#include "common/ps_client/data_channel_path.h"
#include "common/rpc/grpc_shard_transport.h"

namespace psc {
namespace rpc {
namespace {

std::vector<ps_client::ShardEndpoint> Endpoints(const std::vector<std::string>& addresses,
                                                const SecurityOptions& security,
                                                bool data_channel) {
  std::vector<ps_client::ShardEndpoint> shards;
  // Under TLS the data channel runs in TLS with the same certificates.
  std::shared_ptr<const data_channel::TlsConfig> tls;
  if (data_channel && security.tls) {
    auto made = data_channel::TlsConfig::Create(security.tls_cert_pem, security.tls_key_pem,
                                                security.tls_ca_pem);
    if (made.ok()) {
      tls = *std::move(made);
    } else {
      base::Logf("data channel off, Push and Pull go over gRPC: %s", made.status().message());
      data_channel = false;
    }
  }
  for (size_t i = 0; i < addresses.size(); ++i) {
    ps_client::ShardEndpoint e;
    e.name = absl::StrCat("ps:", i, " (", addresses[i], ")");
    e.transport = std::make_unique<GrpcShardTransport>(addresses[i], security);
    auto host = cluster::ParseHostPort(addresses[i]);
    if (data_channel && host.ok()) {
      e.data = std::make_unique<ps_client::DataChannelPath>(host->host, e.transport.get(), tls);
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
