// The data channel as a DataPath (see common/data_channel/data_server.h for
// the protocol): one connection to one shard, negotiated through the shard's
// ShardTransport (OpenDataChannel: the port and a single-use ticket) and
// renegotiated whenever it breaks. One call at a time: a second concurrent
// call is declined and goes over the ShardTransport. A shard without a data
// channel (--data_channel=false, an older server), or whose channel's TLS
// differs from this client's (a plaintext channel would bypass TLS), is
// remembered, logged, and every later call goes over the ShardTransport.
#ifndef PSC_COMMON_PS_CLIENT_DATA_CHANNEL_PATH_H_
#define PSC_COMMON_PS_CLIENT_DATA_CHANNEL_PATH_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/data_channel/data_client.h"
#include "common/ps_client/shard_transport.h"

namespace psc {
namespace ps_client {

// Thread-safe.
class DataChannelPath : public DataPath {
 public:
  // `host` is the shard's host as the client reaches it; `control` (not
  // owned, must outlive this) negotiates the connection.
  // `tls`: this client's TLS (its --tls_*), or null for plaintext.
  DataChannelPath(std::string host, ShardTransport* control,
                  std::shared_ptr<const data_channel::TlsConfig> tls = nullptr)
      : host_(std::move(host)), control_(control), tls_(std::move(tls)) {}

  std::optional<absl::Status> Push(const proto::PushRequest& request, proto::PushResponse* response,
                                   const Attempt& attempt) override;
  std::optional<absl::Status> Pull(const proto::PullRequest& request, proto::PullResponse* response,
                                   const Attempt& attempt) override;
  int64_t calls() const override ABSL_LOCKS_EXCLUDED(calls_mu_);

 private:
  // Takes the connection (or declines: busy) for one call.
  template <typename Request, typename Response>
  std::optional<absl::Status> Call(const Request& request, Response* response,
                                   const Attempt& attempt) ABSL_LOCKS_EXCLUDED(mu_);
  template <typename Request, typename Response>
  std::optional<absl::Status> CallLocked(const Request& request, Response* response,
                                         const Attempt& attempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A fresh connection: one OpenDataChannel through the control transport,
  // then the TCP connection and its ticket.
  absl::Status Connect(const Attempt& attempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string host_;
  ShardTransport* const control_;
  const std::shared_ptr<const data_channel::TlsConfig> tls_;
  absl::Mutex mu_;  // held for a whole call: one call at a time
  std::unique_ptr<data_channel::DataConnection> connection_ ABSL_GUARDED_BY(mu_);
  bool unsupported_ ABSL_GUARDED_BY(mu_) = false;
  mutable absl::Mutex calls_mu_;
  int64_t calls_ ABSL_GUARDED_BY(calls_mu_) = 0;
};

}  // namespace ps_client
}  // namespace psc

#endif  // PSC_COMMON_PS_CLIENT_DATA_CHANNEL_PATH_H_
